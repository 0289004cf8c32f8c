"""Every repository file the documentation cites exists.

README.md, the docstrings of the package's modules, classes and functions, and the JSON files under
tensorgym/data cite files of this repository (``tensorgym/spaces/tiles/features.py``,
``tools/SHAPE_PRIORS.md``); files move, and the citations went stale (``tensorgym/features.py``,
``NOTES.md``). A citation is a path with a directory ending in ``.py``, or any ``.md`` file name; URLs,
absolute paths, home and parent-directory paths (``../shared/...``), the project's notes beside the
checkout (``shared/notes/...``), placeholders and globs are not citations of this repository's files.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The installed package's directories that live elsewhere in the repository (pyproject's package-dir).
PACKAGE_DIRS = {"tensorgym/agents/": "agents/", "tensorgym/envs/": "envs/", "tensorgym/baselines/": "baselines/"}
PACKAGE_ROOTS = ("tensorgym", "agents", "envs", "baselines")
# Paths outside the repository: a parent directory's, and the project's notes beside the checkout (shared/).
OUTSIDE = ("../", "./../", "shared/")
OUTPUTS = {"compare.md"}  # files the commands write (``tensorgym compare``'s table), not the repository's

_PATH = re.compile(r"(?<![\w./:~$<>{*-])((?:[\w.-]+/)+[\w.-]+\.py|(?:[\w.-]+/)*[\w.-]+\.md)(?![\w/-])")
_URL = re.compile(r"\b(?:https?|file|ftp)://\S+|\bwww\.\S+|\bgithub\.com/\S+")


def citations(text: str) -> list[str]:
    """The repository paths ``text`` cites (see the module docs)."""
    text = _URL.sub(" ", text)
    found = []
    for match in _PATH.finditer(text):
        path = match.group(1)
        if path.startswith(OUTSIDE) or "//" in path or path.startswith(".") and not path.startswith("./"):
            continue
        if path not in OUTPUTS:
            found.append(path.removeprefix("./"))
    return found


def exists(path: str, cited_from: Path) -> bool:
    """Whether ``path`` names a file of the repository: from its root, beside the citing file, through the
    package's directory mapping, or (a bare ``.md`` name) anywhere in it."""
    candidates = [ROOT / path, cited_from.parent / path]
    candidates += [ROOT / (mapped + path[len(prefix):]) for prefix, mapped in PACKAGE_DIRS.items()
                   if path.startswith(prefix)]
    if any(c.is_file() for c in candidates):
        return True
    if "/" not in path:  # a bare file name: somewhere in the repository (not in the virtualenv)
        return any(p.is_file() for p in ROOT.rglob(path) if ".venv" not in p.parts)
    return False


def docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    return [doc for n in nodes if (doc := ast.get_docstring(n, clean=False))]


def sources() -> list[tuple[Path, str]]:
    """(file, text) of everything scanned: the README, the package's docstrings, tensorgym/data's JSON."""
    out = [(ROOT / "README.md", (ROOT / "README.md").read_text(encoding="utf-8"))]
    for root in PACKAGE_ROOTS:
        for path in sorted((ROOT / root).rglob("*.py")):
            out += [(path, doc) for doc in docstrings(path)]
    for path in sorted((ROOT / "tensorgym" / "data").rglob("*.json")):
        out.append((path, path.read_text(encoding="utf-8")))
    return out


def test_the_scanner_finds_citations_and_ignores_what_is_not_one():
    text = ("see `tensorgym/spaces/tiles/features.py` and tools/SHAPE_PRIORS.md (NOTES.md); "
            "https://github.com/apache/tvm/blob/main/python/tvm/rpc/server.py, ../shared/notes/tvm_probe.md, "
            "(shared/notes/tvm_probe.md, B7), "
            "~/.cache/tensorgym/records.db, /usr/lib/x.py, $OUT/run.py, <dir>/a.py, gpu_features.py")
    assert citations(text) == ["tensorgym/spaces/tiles/features.py", "tools/SHAPE_PRIORS.md", "NOTES.md"]
    readme = ROOT / "README.md"
    assert exists("tensorgym/spaces/tiles/features.py", readme) and exists("tools/SHAPE_PRIORS.md", readme)
    assert exists("tensorgym/baselines/render.py", readme)  # the package's path of baselines/render.py
    assert exists("README.md", readme)
    assert not exists("tensorgym/features.py", readme) and not exists("NOTES.md", readme)


def test_every_cited_repository_file_exists():
    scanned = sources()
    assert len(scanned) > 100  # the README, hundreds of docstrings, the JSON
    stale = sorted({f"{source.relative_to(ROOT)}: {path}" for source, text in scanned for path in citations(text)
                    if not exists(path, source)})
    assert not stale, "stale references to repository files:\n" + "\n".join(stale)


@pytest.mark.parametrize("path, stale", [("README.md", "tensorgym/features.py"),
                                         ("tensorgym/data/shape_priors.json", "NOTES.md")])
def test_the_references_that_went_stale_are_fixed(path, stale):
    assert stale not in (ROOT / path).read_text(encoding="utf-8").replace("tiles/features.py", "")


def test_the_rpc_docstring_names_the_status_the_code_records():
    """An unreachable device is the machine's fault: ``infra_error`` (measured again later), as run_remote
    records it, not a kernel's ``runtime_error``."""
    import tensorgym.measure.rpc as rpc

    doc = " ".join(rpc.__doc__.split())
    assert "or no tracker: ``infra_error``" in doc
    assert "or no tracker: ``runtime_error``" not in doc


def test_the_gpu_section_says_how_little_the_cuda_path_was_measured():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "run once, on an NVIDIA H200 (64 trials, one seed)" in readme
    guide = " ".join((ROOT / "docs" / "howto" / "gpus.md").read_text(encoding="utf-8").split())
    assert "**The CUDA path has run on one GPU, once:**" in guide and "Nothing has run on any other GPU." in guide
    assert (ROOT / "bench" / "reports" / "gpu" / "README.md").is_file()
