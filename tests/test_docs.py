"""Every snippet of the README and of docs/**/*.md runs, and the Sphinx site builds without a warning.

Per page, in a temporary directory (with its own ``TENSORGYM_DB``), in this order:

1. python blocks preceded by ``<!-- file: NAME -->`` are written to NAME (scripts the page then runs);
2. shell blocks (``bash``, ``sh``, ``shell``, ``console``) run one after the other with bash, ``set -e``, the
   venv's ``tensorgym`` and ``python`` first on PATH (``console`` blocks: only the ``$ `` lines); ``examples/`` and
   ``bench/`` of the repository are linked into the directory;
3. the other python blocks run in order in one fresh interpreter, sharing one namespace (a page is one session).

A block preceded by ``<!-- not-tested: REASON -->`` is not run and is reported as a skipped test with its reason
(the site shows the reason above the block). ``text`` blocks are output, never run. Snippets use the landscape
backend and small budgets, so the whole file takes about a minute and a half of CPU.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.docs  # the same on any target: `make test-avx2` leaves them out

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
SHELL = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
MARKER = re.compile(r"<!--\s*(?P<kind>not-tested|file):\s*(?P<value>.*?)\s*-->", re.S)


@dataclass
class Block:
    page: str
    line: int
    lang: str
    code: str
    skip: str | None = None  # the not-tested reason
    file: str | None = None  # write the block to this file instead of running it

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    found = [REPO / "README.md"]
    found += sorted(p for p in DOCS.rglob("*.md") if not ({"_build", "_generated"} & set(p.relative_to(DOCS).parts)))
    return found


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with the marker comment just before each, if any."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i, pending = [], 0, None
    rel = str(path.relative_to(REPO))
    while i < len(lines):
        line = lines[i]
        marker = MARKER.search(line)
        if marker:
            pending = (marker.group("kind"), marker.group("value"))
            i += 1
            continue
        fence = FENCE.match(line)
        if not fence:
            if line.strip():
                pending = None  # a marker applies to the block right after it (blank lines allowed)
            i += 1
            continue
        close = fence.group("fence")
        info = fence.group("info").strip()
        start = i + 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(close):
            body.append(lines[i])
            i += 1
        i += 1
        lang = info.split()[0].lower() if info else ""
        if lang in {"python", "py"} | SHELL:
            block = Block(rel, start, "python" if lang == "py" else lang, "\n".join(body) + "\n")
            if pending and pending[0] == "not-tested":
                block.skip = pending[1]
            elif pending and pending[0] == "file":
                block.file = pending[1]
            out.append(block)
        pending = None
    return out


def all_blocks() -> dict[str, list[Block]]:
    return {str(p.relative_to(REPO)): blocks(p) for p in pages()}


BLOCKS = all_blocks()
SKIPPED = [b for page in BLOCKS.values() for b in page if b.skip]
RUN_PAGES = [page for page, found in BLOCKS.items() if any(not b.skip for b in found)]

RUNNER = r"""
import json, sys, traceback
blocks = json.load(open(sys.argv[1]))
namespace = {"__name__": "__docs__"}
for where, code in blocks:
    print(f"--- {where}", flush=True)
    try:
        exec(compile(code, where, "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"FAILED: the python block at {where}", file=sys.stderr, flush=True)
        sys.exit(1)
"""


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["TENSORGYM_DB"] = str(tmp / "default.db")
    env["MPLBACKEND"] = "Agg"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _shell_script(block: Block) -> str:
    if block.lang != "console":
        return block.code
    commands, current = [], None
    for line in block.code.splitlines():
        if line.startswith("$ "):
            current = line[2:]
            commands.append(current)
        elif current is not None and commands[-1].endswith("\\"):
            commands[-1] += "\n" + line
    return "\n".join(commands) + "\n"


def _check(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode})\n--- stdout\n{proc.stdout[-4000:]}\n"
                    f"--- stderr\n{proc.stderr[-6000:]}", pytrace=False)


@pytest.mark.parametrize("page", RUN_PAGES)
def test_snippets_run(page: str, tmp_path: Path) -> None:
    found = [b for b in BLOCKS[page] if not b.skip]
    env = _env(tmp_path)
    for name in ("examples", "bench"):
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    for block in found:
        if block.file:
            (tmp_path / block.file).write_text(block.code, encoding="utf-8")
    for block in found:
        if block.lang in SHELL and not block.file:
            script = "set -euo pipefail\n" + _shell_script(block)
            proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=600)
            _check(proc, f"the shell block at {block.where}")
    python = [(b.where, b.code) for b in found if b.lang == "python" and not b.file]
    if python:
        (tmp_path / "_blocks.json").write_text(json.dumps(python), encoding="utf-8")
        (tmp_path / "_runner.py").write_text(RUNNER, encoding="utf-8")
        proc = subprocess.run([sys.executable, "_runner.py", "_blocks.json"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        _check(proc, f"the python blocks of {page}")


@pytest.mark.parametrize("block", SKIPPED, ids=[b.where for b in SKIPPED])
def test_not_tested_snippets(block: Block) -> None:
    pytest.skip(f"{block.where}: {block.skip}")


def test_every_snippet_is_run_or_marked() -> None:
    """The extractor sees the snippets: the README quickstart runs, and every skip carries a reason."""
    readme = BLOCKS["README.md"]
    assert any(b.lang == "python" and not b.skip and "backend=\"landscape\"" in b.code for b in readme)
    assert all(b.skip.strip() for page in BLOCKS.values() for b in page if b.skip is not None)
    assert len(RUN_PAGES) >= 10


def test_docs_cite_only_the_repository() -> None:
    """No page points outside the repository (no ../shared paths) or at issue numbers."""
    bad = re.compile(r"(/work/|\.\./shared|shared/notes|shared/seeds|\bissue[s]? \d+|#\d{1,4}\b)")
    for path in pages():
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            assert not bad.search(line), f"{path.relative_to(REPO)}:{number}: {line.strip()}"


def test_no_tracked_file_cites_an_issue_number() -> None:
    """Code, reports and docs say why in their own words: an issue number means nothing to a reader of a clone."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    suffixes = {".md", ".txt", ".py", ".sh", ".toml", ".cfg", ".yml", ".yaml", ".html", ".rst"}
    bad = re.compile(r"\bissues? \d+", re.IGNORECASE)
    for name in names:
        path = REPO / name
        if path.suffix not in suffixes or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            assert not bad.search(line), f"{name}:{number}: {line.strip()}"


def test_sphinx_builds_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("sphinx", reason="the docs extra is not installed: pip install -e '.[docs]'")
    pytest.importorskip("myst_parser", reason="the docs extra is not installed: pip install -e '.[docs]'")
    pytest.importorskip("furo", reason="the docs extra is not installed: pip install -e '.[docs]'")
    build = shutil.which("sphinx-build", path=str(Path(sys.executable).parent)) or "sphinx-build"
    proc = subprocess.run([build, "-W", "--keep-going", "-q", "-b", "html", "-d", str(tmp_path / "doctrees"),
                           str(DOCS), str(tmp_path / "html")], cwd=REPO, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=900)
    _check(proc, "sphinx-build -W -b html docs")
    html = tmp_path / "html"
    for page in ("index", "reference/cli", "reference/envs", "reference/errors", "reference/api",
                 "explanation/landscapes", "tutorials/first-env"):
        assert (html / f"{page}.html").is_file(), page
    cli = (html / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "landscape sample" in cli and "--backend" in cli
    envs = (html / "reference" / "envs.html").read_text(encoding="utf-8")
    assert "Conv2d-ResNet-R5-v0" in envs and "Matmul-BERT-M3-v0" in envs
    assert "Not run by the docs tests" in (html / "howto" / "gpus.html").read_text(encoding="utf-8")
    for figure in ("leaderboard.png", "landscape-histogram.png", "dataflow.png"):
        assert (html / "_images" / figure).is_file(), figure
