"""The package's shape: no import cycle, no upward import, one composition root whose names hold."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Folder -> the package it is installed as (pyproject.toml's package-dir mapping).
PACKAGES = {"tensorgym": "tensorgym", "envs": "tensorgym.envs", "agents": "tensorgym.agents",
            "baselines": "tensorgym.baselines"}
LOWER = ("tensorgym.config", "tensorgym.errors", "tensorgym.record", "tensorgym.database", "tensorgym.spaces",
         "tensorgym.measure", "tensorgym.cuda", "tensorgym.context")
UPPER = ("tensorgym.envs", "tensorgym.agents", "tensorgym.baselines")


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            out[".".join([package, *parts])] = (path, path.name == "__init__.py")
    return out


def _imports(name: str, path: Path, is_package: bool, known: set[str]) -> set[str]:
    """Modules of tensorgym that ``name`` imports anywhere in its file (functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = name.split(".") if is_package else name.split(".")[:-1]
            if node.level > 1:
                base = base[: len(base) - (node.level - 1)]
            stem = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
            targets = [stem] + [f"{stem}.{a.name}" for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in known and t != name and not t.startswith(name + ".")}
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, is_pkg, set(modules)) for name, (path, is_pkg) in modules.items()}


def test_no_import_cycle(graph):
    state: dict[str, int] = {}  # 1: on the stack, 2: done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_lower_layers_import_nothing_from_upper_ones(graph):
    for module, targets in graph.items():
        if module.startswith(LOWER):
            upward = sorted(t for t in targets if t.startswith(UPPER))
            assert not upward, f"{module} imports {upward}"


def test_only_the_catalog_points_up_from_the_core():
    """The command line (``tensorgym/cli``) is an application on top of everything, and ``import
    tensorgym`` registers the environments; the rest of the core names agents and baselines only
    through the catalog."""
    for path in (ROOT / "tensorgym").rglob("*.py"):
        if path.name == "catalog.py" or path.parent.name == "cli" or path == ROOT / "tensorgym" / "__init__.py":
            continue
        text = path.read_text()
        for upper in ("tensorgym.agents", "tensorgym.baselines"):
            assert f"import {upper}" not in text and f"from {upper}" not in text and f'"{upper}.' not in text, \
                f"{path.relative_to(ROOT)} points up to {upper}"


def test_every_catalog_entry_is_the_class_it_names():
    from tensorgym import catalog

    for name in catalog.SPACES:
        assert catalog.space_class(name).name == name
    for name in catalog.ENVS:
        assert catalog.env_class(name).space_name == name
    for name in catalog.AGENTS:
        assert catalog.agent_class(name).name == name
    for name in catalog.SCHEDULERS:
        assert catalog.scheduler_class(name).name == name


# Where each registry's entries may live: the layer its kind belongs to (the MetaSchedule peer is a baseline).
CATALOG_LAYERS = {"SPACES": ("tensorgym.spaces.", "tensorgym.baselines.metaschedule"),
                  "ENVS": ("tensorgym.envs.",), "AGENTS": ("tensorgym.agents.", "tensorgym.baselines.metaschedule"),
                  "SCHEDULERS": ("tensorgym.agents.schedulers.", "tensorgym.baselines.metaschedule")}


def test_catalog_entries_obey_the_layering(graph):
    """The catalog's lazy ``module:Class`` strings are imports too: each names an existing module of its
    kind's layer, and that module reaches no module of a higher kind's layer through its imports (a space
    never needs an env, an env never an agent)."""
    from tensorgym import catalog

    higher = {"SPACES": ("tensorgym.envs", "tensorgym.agents"), "ENVS": ("tensorgym.agents",),
              "AGENTS": (), "SCHEDULERS": ()}
    for registry, prefixes in CATALOG_LAYERS.items():
        for name, entry in getattr(catalog, registry).items():
            if not isinstance(entry, str):
                continue  # a class a user registered (catalog.register_agent)
            module = entry.partition(":")[0]
            assert module in graph, f"catalog.{registry}[{name!r}] names {module}, which does not exist"
            assert module.startswith(prefixes), f"catalog.{registry}[{name!r}] = {entry} is outside {prefixes}"
            reached, todo = set(), [module]
            while todo:
                for nxt in graph[todo.pop()] - reached:
                    reached.add(nxt)
                    todo.append(nxt)
            above = sorted(m for m in reached if m.startswith(higher[registry]))
            assert not above, f"catalog.{registry}[{name!r}] ({module}) reaches {above}"


# -- search geometry apart from building (MetaSchedule's design space / builder split) ---------------------------
MEASURE_MAY_IMPORT = {"tensorgym.spaces.base", "tensorgym.spaces.builder"}  # the interfaces, no implementation
KERNEL_METHODS = ("apply", "kernel_arguments", "prepare_runtime", "canonical_output", "cuda_kernel")


def _reach(graph, module: str) -> set[str]:
    reached, todo = set(), [module]
    while todo:
        for nxt in graph[todo.pop()] - reached:
            reached.add(nxt)
            todo.append(nxt)
    return reached


def test_no_space_module_imports_the_measurer(graph):
    """The spaces are the core's bottom: calibration, which measures, is a job above them
    (``tensorgym.calibration``), and no space module reaches ``tensorgym.measure`` even indirectly."""
    for module in graph:
        if module == "tensorgym.spaces" or module.startswith("tensorgym.spaces."):
            measuring = sorted(m for m in _reach(graph, module) if m.startswith("tensorgym.measure"))
            assert not measuring, f"{module} reaches {measuring}"


def test_the_measurer_sees_only_the_builder_interface(graph):
    """``tensorgym.measure`` builds and runs kernels through :class:`KernelBuilder`; it imports no space
    implementation (nor the ``tensorgym.spaces`` package, which imports them)."""
    for module, targets in graph.items():
        if module.startswith("tensorgym.measure"):
            spaces = {t for t in targets if t == "tensorgym.spaces" or t.startswith("tensorgym.spaces.")}
            assert spaces <= MEASURE_MAY_IMPORT, f"{module} imports {sorted(spaces - MEASURE_MAY_IMPORT)}"


def test_every_space_has_its_builder_in_its_own_module():
    """A space keeps the geometry; the code that makes and runs its kernels is its builder's, in a module of
    its own (what moves between processes and what agents see stay apart)."""
    from tensorgym import catalog
    from tensorgym.spaces import KernelBuilder
    from tensorgym.spaces.tiles import GpuTilesSpace

    for cls in [catalog.space_class(name) for name in catalog.SPACES] + [GpuTilesSpace]:
        builder = cls.builder_class
        assert isinstance(builder, type) and issubclass(builder, KernelBuilder), cls
        assert builder.__module__ != cls.__module__, f"{cls.__name__}'s builder lives in its space's module"
        assert builder.__module__.rpartition(".")[0] == cls.__module__.rpartition(".")[0], (cls, builder)
        kept = [name for name in KERNEL_METHODS if hasattr(cls, name)]
        assert not kept, f"{cls.__name__} still builds kernels itself: {kept}"
