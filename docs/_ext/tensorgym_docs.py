"""Sphinx extension of tensorgym's docs: reference pages generated from the code, and visible "not tested" notes.

At ``builder-inited`` it writes, into ``docs/_generated/`` (ignored by git, excluded from the sources), the
Markdown that the reference pages ``{include}``:

* ``envs.md``: every registered environment id (from Gymnasium's registry), its shape, GFLOP count, spaces and
  dtypes, and the keyword arguments of ``gym.make`` (from the env and space classes' signatures);
* ``cli.md``: every ``tensorgym`` subcommand, its usage and options (from :func:`tensorgym.cli.build_parser`);
* ``errors.md``: every :class:`~tensorgym.errors.TensorgymError` subclass in the package (read from the source
  with :mod:`ast`, so nothing heavy is imported);
* ``agents.md``: the agent and task-scheduler names of :mod:`tensorgym.catalog`.

It also draws the pictures (``docs/_scripts/figures.py``) when one is missing, and turns a
``<!-- not-tested: REASON -->`` comment, the marker ``tests/test_docs.py`` reads to skip the next code block, into
a visible line above that block.

Run it as a script to write the generated pages without Sphinx: ``python docs/_ext/tensorgym_docs.py``.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent
REPO = DOCS.parent
GENERATED = DOCS / "_generated"
FIGURES = DOCS / "_static" / "figures"
NOT_TESTED = re.compile(r"<!--\s*not-tested:\s*(.*?)\s*-->", re.S)


def cell(text: object) -> str:
    """One Markdown table cell: no pipes, no newlines."""
    return " ".join(str(text).replace("|", "\\|").split())


def table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def plain(text: str) -> str:
    """A docstring's first paragraph with its Sphinx roles reduced to literals (safe in any page)."""
    text = re.sub(r":[a-z:]+:`~?\.?([^`<]*?)(?: <[^>]*>)?`", r"``\1``", text)
    return text.replace("``", "`")


SUITE_SOURCES = {
    "ResNet-50": "The ResNet-50 convolutions of Table 1 of Li et al. (ICS '24); H/W is the input size, "
                 "\"same\" padding.",
    "YOLO-9000": "The YOLO-9000 convolutions of Table 1 of Li et al. (ICS '24).",
    "BERT": "The BERT matmuls `C[M,N] = A[M,K] B[K,N]` of Table 1 of Li et al. (ICS '24).",
    "ResNet-18": "The ResNet-18 convolutions GTA (Xie et al., JSA 2025) evaluates, with AMOS's shapes.",
}


# -- environment ids -------------------------------------------------------------------------------------------
def envs_page() -> str:
    import gymnasium as gym

    import tensorgym  # noqa: F401  (registers the ids)
    from tensorgym.cli.list_envs import space_dtypes
    from tensorgym.networks import NETWORKS
    from tensorgym.suites import SUITES, env_id

    support = space_dtypes()
    first = next(env_id(s, s.layers[0]) for s in SUITES.values())
    out = ["Generated from Gymnasium's registry (`import tensorgym` registers the ids) and the suites of "
           "`tensorgym.suites`. Every suite id is batch 1, NCHW, float32 unless `dtype=` says otherwise, and is "
           f"registered with `max_episode_steps={gym.spec(first).max_episode_steps}`.\n",
           "Spaces by dtype: " + "; ".join(f"`{name}`: {', '.join(d)}" for name, d in support.items()) + ".\n"]
    for suite in SUITES.values():
        rows = []
        for wl in suite.layers:
            eid = env_id(suite, wl)
            spec = gym.spec(eid)
            rows.append([f"`{eid}`", wl.describe(), f"{wl.gflop:.4g}", spec.max_episode_steps])
        out.append(f"\n### {suite.name}\n\n{SUITE_SOURCES.get(suite.name, '')}\n\n")
        out.append(table(["env id", "shape", "GFLOP", "max_episode_steps"], rows))
    out.append("\n### Shapes of your own\n\n")
    out.append(table(["env id", "keywords", "example"], [
        ["`tensorgym/Conv2d-v0`", "C, H, F, R (required); W, S, N, stride, padding",
         "`gym.make(\"tensorgym/Conv2d-v0\", C=64, H=56, F=128, R=3, stride=2)`"],
        ["`tensorgym/Matmul-v0`", "M, N, K", "`gym.make(\"tensorgym/Matmul-v0\", M=512, N=768, K=3072)`"],
    ]))
    out.append("\n### Networks\n\n")
    rows = [[f"`{net.env_id}`", net.name, f"{len(net.live_tasks)} of {len(net.tasks)}",
             ", ".join(f"{t.workload.name} x{t.weight:g}" for t in net.tasks), f"{net.gflop:.4g}"]
            for net in NETWORKS.values()]
    rows.append(["`tensorgym/Network-v0`", "yours (`network=`)", "", "a `Network`, or a JSON/TOML file", ""])
    out.append(table(["env id", "network", "layers tuned", "layer x count", "GFLOP (weighted)"], rows))
    out.append(keywords_section())
    return "\n".join(out)


def _parameters(func, skip=("self", "workload", "target", "space", "kwargs", "space_options")) -> list[list[str]]:
    rows = []
    for p in inspect.signature(func).parameters.values():
        if p.name in skip or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        default = "required" if p.default is p.empty else f"`{p.default!r}`"
        rows.append([f"`{p.name}`", default])
    return rows


def keywords_section() -> str:
    from tensorgym.catalog import ENVS, SPACES, env_class, space_class
    from tensorgym.envs.base import BACKENDS, TuningEnv
    from tensorgym.envs.landscape_env import LandscapeHopEnv

    out = ["\n## Keyword arguments of `gym.make`\n",
           "Every id takes the keywords of the env base class, then those of the env of its `space=` (default "
           f"`\"tiles\"`; env classes: {', '.join(f'`{k}`' for k in ENVS)}), then the options of that space, "
           "and `dtype=` and (conv2d) `layout=`. Backends: " + ", ".join(f"`{b}`" for b in BACKENDS) + ".\n",
           "\n### Every env (`tensorgym.envs.base.TuningEnv`)\n\n",
           table(["keyword", "default"], _parameters(TuningEnv.__init__) + [["`target`", "`None` (this CPU)"],
                                                                            ["`dtype`", "the workload's (`float32`)"],
                                                                            ["`layout`", "`None` (NCHW)"]])]
    for name in ENVS:
        cls = env_class(name)
        rows = _parameters(cls.__init__, skip=("self", "workload", "kwargs", "space_options", "context", "target",
                                               "db", "measurer", "max_steps", "render_mode", "backend", "evaluator"))
        if rows:
            out.append(f"\n### The `{name}` env (`{cls.__module__}.{cls.__name__}`)\n\n")
            out.append(table(["keyword", "default"], rows))
    out.append("\n### `backend=\"landscape\"` (`tensorgym.envs.landscape_env.LandscapeHopEnv`)\n\n")
    out.append(table(["keyword", "default"], _parameters(LandscapeHopEnv.__init__, skip=(
        "self", "workload", "kwargs", "target", "backend", "evaluator"))))
    for name in SPACES:
        if name not in ENVS:
            continue
        cls = space_class(name)
        rows = _parameters(cls.__init__)
        if rows:
            out.append(f"\n### Options of the `{name}` space (`{cls.__module__}.{cls.__name__}`)\n\n")
            out.append(table(["keyword", "default"], rows))
    return "".join(out)


# -- the command line ------------------------------------------------------------------------------------------
def _option_rows(parser: argparse.ArgumentParser) -> list[list[str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        names = ", ".join(f"`{n}`" for n in action.option_strings) or f"`{action.dest}`"
        if action.option_strings and action.nargs != 0:
            names += f" `{action.metavar or action.dest.upper()}`"
        default = "" if action.default in (None, argparse.SUPPRESS, False) or action.required else \
            f"`{action.default}`"
        if action.required and action.option_strings:
            default = "required"
        text = action.help or ""
        if action.choices and not isinstance(action.choices, dict):
            text += " (choices: " + ", ".join(f"`{c}`" for c in action.choices) + ")"
        rows.append([names, default, text])
    return rows


def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")


def cli_page() -> str:
    from tensorgym.cli import build_parser

    root = build_parser()
    out = ["Generated from `tensorgym.cli.build_parser()`: every subcommand, its usage and its options, as "
           "`tensorgym COMMAND --help` prints them. Every error a user can cause is one line on stderr and exit "
           "code 2; `-v` adds the traceback.\n\n", "```text\n" + root.format_usage().strip() + "\n```\n"]

    def walk(parser, path, depth):
        for name, sub, help_text in _subparsers(parser):
            full = f"{path} {name}"
            out.append(f"\n{'#' * depth} `{full}`\n\n")
            if help_text:
                out.append(f"{cell(help_text)[0].upper()}{cell(help_text)[1:]}.\n\n")
            if sub.description and sub.description != help_text:
                out.append(cell(sub.description) + "\n\n")
            usage = sub.format_usage().strip().removeprefix("usage: ")
            out.append("```text\n" + usage + "\n```\n\n")
            rows = _option_rows(sub)
            if rows:
                out.append(table(["argument", "default", "meaning"], rows))
            walk(sub, full, min(depth + 1, 4))

    walk(root, "tensorgym", 2)
    return "".join(out)


# -- errors ----------------------------------------------------------------------------------------------------
SOURCE_DIRS = {"tensorgym": "tensorgym", "envs": "tensorgym.envs", "agents": "tensorgym.agents",
               "baselines": "tensorgym.baselines"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    parts[0] = SOURCE_DIRS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def error_classes() -> list[tuple[str, str, list[str], str]]:
    """(class, module, bases, first paragraph of its docstring) of every class that derives from TensorgymError."""
    found: dict[str, tuple[str, list[str], str]] = {}
    for folder in SOURCE_DIRS:
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
                    found.setdefault(node.name, (_module_name(path), bases, first_paragraph(ast.get_docstring(node))))
    errors = {"TensorgymError"}
    changed = True
    while changed:
        changed = False
        for name, (_, bases, _) in found.items():
            if name not in errors and errors.intersection(bases):
                errors.add(name)
                changed = True
    rows = [(name, *found[name]) for name in errors]
    order = {"TensorgymError": 0}
    return sorted(rows, key=lambda r: (order.get(r[0], 1), r[1], r[0]))


def errors_page() -> str:
    rows = [[f"`{name}`", f"`{module}`", ", ".join(f"`{b}`" for b in bases), plain(doc)]
            for name, module, bases, doc in error_classes()]
    return ("Generated from the source: every class that derives from `tensorgym.errors.TensorgymError` "
            f"({len(rows)} classes). Each is also the built-in exception it names (`ValueError`, `TypeError`, "
            "`LookupError`, ...), so `except ValueError` keeps working; the command line prints any of them as one "
            "line and exits with code 2.\n\n" + table(["error", "module", "bases", "when"], rows))


# -- agents ----------------------------------------------------------------------------------------------------
def agents_page() -> str:
    from tensorgym.catalog import AGENTS, SCHEDULERS

    def row(name, target):
        module, _, cls = str(target).partition(":")
        return [f"`{name}`", f"`{module}.{cls}`"]

    return ("Generated from `tensorgym.catalog`: the names `make_agent`, `--agent` and `--agents` accept "
            "(`register_agent` adds yours), and the task schedulers of `make_scheduler` and `--scheduler(s)`.\n\n"
            + table(["agent", "class"], [row(n, t) for n, t in AGENTS.items()])
            + "\n" + table(["scheduler", "class"], [row(n, t) for n, t in SCHEDULERS.items()]))


PAGES = {"envs.md": envs_page, "cli.md": cli_page, "errors.md": errors_page, "agents.md": agents_page}


def write_generated(folder: Path = GENERATED) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in PAGES.items():
        path = folder / name
        text = make()
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


FIGURE_NAMES = ("leaderboard.png", "landscape-histogram.png", "dataflow.png")


def ensure_figures() -> None:
    if all((FIGURES / name).exists() for name in FIGURE_NAMES):
        return
    subprocess.run([sys.executable, str(DOCS / "_scripts" / "figures.py")], check=True, cwd=REPO)


# -- Sphinx ----------------------------------------------------------------------------------------------------
def _builder_inited(app) -> None:
    write_generated()
    ensure_figures()


def _not_tested_notes(app, doctree) -> None:
    """A ``<!-- not-tested: REASON -->`` comment becomes a visible line: readers see what the tests skip."""
    from docutils import nodes

    for raw in list(doctree.findall(nodes.raw)):
        match = NOT_TESTED.search(raw.astext())
        if not match:
            continue
        note = nodes.paragraph(classes=["not-tested"])
        note += nodes.emphasis(text=f"Not run by the docs tests: {match.group(1)}.")
        raw.replace_self(note)
    for comment in list(doctree.findall(nodes.comment)):
        match = NOT_TESTED.search(comment.astext())
        if match:
            note = nodes.paragraph(classes=["not-tested"])
            note += nodes.emphasis(text=f"Not run by the docs tests: {match.group(1)}.")
            comment.replace_self(note)


def setup(app):
    app.connect("builder-inited", _builder_inited)
    app.connect("doctree-read", _not_tested_notes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    for written in write_generated():
        print(written.relative_to(REPO))
