"""Where shipped landscapes live, and which one belongs to this machine.

A landscape is one CPU's measurements: on another CPU the best config, the ranking and the timings
differ, so a landscape answers for the CPU it was measured on only. Shipped landscapes live in
``tensorgym/data/landscapes/<cpu folder>/<layer>-<space>.json.gz``:

* the **CPU folder** (:func:`cpu_folder`) is a file-system-safe name of what decides the timings of a
  tiles kernel: the CPU model, its micro-architecture where the model name does not say it (virtual
  machines often report ``AMD EPYC`` alone; the family and model numbers tell Zen 3 from Zen 4), the
  vector ISA the kernels were compiled for, a restricting profile (``x86-64-v3``) if any, and the
  cores the kernels ran on (kernels use every core). For example ``amd-epyc-zen4-avx512-2c``.
  The TVM version, which the target's fingerprint also holds, is left out on purpose: a newer TVM
  should not make every shipped landscape unusable; each file's metadata names the versions it was
  measured with.
* the **layer** is the suite layer's name (``R5``, ``M3``) when the workload is that layer exactly,
  else the layer or operator name with a short hash of the workload's key (``R5-1a2b3c4d`` for R5
  in NHWC), so two different computations never share a file name.

:func:`find_landscape` gives the landscape of this machine's CPU when there is one, else that of the CPU
folder named (``cpu=``), else the one another CPU has. Another CPU's landscape says nothing about this
machine's kernels (its best config, ranking and speed differ), but it is still a fair benchmark for
comparing search methods, as any tabular benchmark is: :func:`another_cpu_notice` is the one line that
says whose measurements a run answers from, which the envs warn and the command line prints.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..errors import TensorgymError, UnknownNameError
from ..suites import SUITES, all_suite_workloads
from ..target import Target, local_cpu
from ..workloads import Workload

LANDSCAPES_DIR = Path(__file__).resolve().parent.parent / "data" / "landscapes"
LANDSCAPE_SPACES = ("tiles", "microkernel")  # the spaces benchmark spaces and landscapes are defined for
SUFFIX = ".json.gz"
SAMPLES = "samples"  # the folder of a CPU's full-space samples, beside its landscapes

# AMD family -> ((first model, last model, micro-architecture), ...): what a bare "AMD EPYC" is.
_AMD_MICROARCHITECTURES: dict[int, tuple[tuple[int, int, str], ...]] = {
    23: ((0x00, 0x2F, "zen"), (0x30, 0xFF, "zen2")),
    25: ((0x00, 0x0F, "zen3"), (0x10, 0x1F, "zen4"), (0x20, 0x5F, "zen3"), (0x60, 0x7F, "zen4"),
         (0xA0, 0xAF, "zen4")),
    26: ((0x00, 0xFF, "zen5"),),
}
# Intel family 6 models whose micro-architecture is unambiguous (Skylake-X and Cascade Lake share 0x55).
_INTEL_MICROARCHITECTURES: dict[int, str] = {
    0x3F: "haswell", 0x4F: "broadwell", 0x6A: "icelake", 0x6C: "icelake", 0x8F: "sapphirerapids",
    0xCF: "emeraldrapids", 0xAD: "graniterapids", 0xAE: "graniterapids",
}
# Words of CPU model names that say nothing about the CPU.
_NOISE = re.compile(r"\((r|tm)\)|\b(cpu|processor|with radeon graphics|\d+-core)\b|@.*$", re.I)


class AnotherCPULandscape(UserWarning):
    """A run answers from a landscape measured on another CPU than the one it runs on (see
    :func:`another_cpu_notice`)."""


class LandscapeNotFound(TensorgymError, LookupError):
    """No landscape of the asked layer and space is shipped for the asked CPU (the message lists what is)."""


@dataclass(frozen=True)
class ShippedLandscape:
    """One shipped landscape file: its CPU folder, layer and space, and where it is."""

    cpu: str
    layer: str
    space: str
    path: Path

    @property
    def name(self) -> str:
        return f"{self.cpu}/{self.layer}-{self.space}"

    @property
    def sample(self) -> Path:
        """Where the full-space sample of its layer on its CPU lives (see :func:`sample_path`)."""
        return self.path.parent / SAMPLES / self.path.name


def cpu_folder(target: Target | None = None) -> str:
    """The folder name of ``target``'s landscapes (default: this machine's CPU); see the module docs."""
    target = target if target is not None else local_cpu()
    model = target.cpu_model
    found = re.search(r"\(family (\d+) model (\d+)\)", model)
    name = _slug(_NOISE.sub(" ", re.sub(r"\(family \d+ model \d+\)", " ", model).replace("(constructed)", " ")))
    parts = [name or "cpu"]
    if found:
        family, number = int(found.group(1)), int(found.group(2))
        uarch = _microarchitecture(name, family, number)
        if uarch and uarch not in name:
            parts.append(uarch)
        elif not uarch and not re.search(r"\d", name):  # a bare name ("amd-epyc"): the numbers tell it apart
            parts.append(f"f{family}m{number}")
    parts.append(target.isa_level)
    if target.profile and _slug(target.profile) not in parts[0]:
        parts.append(_slug(target.profile))
    parts.append(f"{target.num_cores}c")
    return "-".join(parts)


def _microarchitecture(name: str, family: int, model: int) -> str | None:
    if name.startswith("amd"):
        for first, last, uarch in _AMD_MICROARCHITECTURES.get(family, ()):
            if first <= model <= last:
                return uarch
    if name.startswith("intel") and family == 6:
        return _INTEL_MICROARCHITECTURES.get(model)
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def layer_name(workload: Workload) -> str:
    """The layer part of a landscape's file name (see the module docs)."""
    for suite in SUITES.values():
        for layer in suite.layers:
            if layer.name == workload.name and layer.key == workload.key:
                return layer.name
    stem = re.sub(r"[^A-Za-z0-9]+", "-", workload.name).strip("-") or workload.op
    return f"{stem}-{hashlib.sha256(workload.key.encode()).hexdigest()[:8]}"


def landscape_filename(workload: Workload, space: str = "tiles") -> str:
    """``<layer>-<space>.json.gz``."""
    return f"{layer_name(workload)}-{space}{SUFFIX}"


def sample_path(workload: Workload, target: Target | None = None, space: str = "tiles", *, cpu: str | None = None,
                root: str | Path | None = None) -> Path:
    """Where the full-space sample of a layer lives on the CPU folder ``cpu`` (default ``target``'s CPU's):
    ``<cpu folder>/samples/`` beside its landscapes (see :func:`tensorgym.landscape.measuring.sample_order`)."""
    base = Path(root) if root is not None else LANDSCAPES_DIR
    return base / (cpu or cpu_folder(target)) / SAMPLES / landscape_filename(workload, space)


def shipped_landscapes(root: str | Path | None = None) -> list[ShippedLandscape]:
    """Every shipped landscape (under ``root``, default the package's), sorted by CPU, layer and space."""
    base = Path(root) if root is not None else LANDSCAPES_DIR
    out = []
    if base.is_dir():
        for path in sorted(base.glob(f"*/*{SUFFIX}")):
            layer, _, space = path.name.removesuffix(SUFFIX).rpartition("-")
            out.append(ShippedLandscape(path.parent.name, layer, space, path))
    return out


def shipped_env_ids(cpu: str, space: str = "tiles", root: str | Path | None = None) -> list[str]:
    """The suite env ids that have a ``space`` landscape shipped for the CPU folder ``cpu``, in suite order."""
    layers = {s.layer for s in shipped_landscapes(root) if s.cpu == cpu and s.space == space}
    return [env_id for env_id, workload in all_suite_workloads().items() if layer_name(workload) in layers]


def resolve_workload(env_id_or_workload: str | Workload) -> tuple[Workload, str | None]:
    """The workload of a suite env id (``Conv2d-ResNet-R5-v0``) or a :class:`Workload`, and its env id if it
    is a suite layer."""
    layers = all_suite_workloads()
    if isinstance(env_id_or_workload, Workload):
        ids = [i for i, w in layers.items() if w.key == env_id_or_workload.key and w.name == env_id_or_workload.name]
        return env_id_or_workload, (ids[0] if ids else None)
    if isinstance(env_id_or_workload, str) and env_id_or_workload in layers:
        return layers[env_id_or_workload], env_id_or_workload
    close = difflib.get_close_matches(str(env_id_or_workload), layers, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UnknownNameError(f"no suite layer {env_id_or_workload!r}{hint}: landscapes are named by suite env ids "
                           f"(e.g. Conv2d-ResNet-R5-v0) or given a Workload")


def find_landscape(env_id_or_workload: str | Workload, space: str = "tiles", cpu: str | None = None,
                   target: Target | None = None, *, root: str | Path | None = None) -> Path:
    """The shipped landscape of a layer and space: for the CPU folder named by ``cpu``, else for this machine's
    CPU (``target``'s, default the local CPU), else another CPU's (the one with the most landscapes: see
    :func:`another_cpu_notice`).

    Raises :class:`LandscapeNotFound` (one line, saying what to type) when ``cpu`` names no CPU with
    landscapes, or no CPU has one of this layer and space.
    """
    workload, env_id = resolve_workload(env_id_or_workload)
    base = Path(root) if root is not None else LANDSCAPES_DIR
    filename = landscape_filename(workload, space)
    shipped = shipped_landscapes(base)
    folders = sorted({s.cpu for s in shipped})
    if cpu is not None:
        if not isinstance(cpu, str) or cpu not in folders:
            raise LandscapeNotFound(f"no landscapes are shipped for CPU {cpu!r}; CPUs with landscapes: "
                                    f"{', '.join(folders) or 'none'} (`tensorgym landscape list` shows them)")
        wanted = cpu
    else:
        wanted = cpu_folder(target)
    path = base / wanted / filename
    if path.is_file():
        return path
    layer = filename.removesuffix(SUFFIX)
    elsewhere = [s.cpu for s in shipped if f"{s.layer}-{s.space}" == layer]
    if cpu is None and elsewhere:
        count = {folder: sum(s.cpu == folder for s in shipped) for folder in elsewhere}
        return base / max(sorted(elsewhere), key=count.__getitem__) / filename
    listing = ", ".join(s.name for s in shipped) or "none"
    measure = f"tensorgym landscape measure {env_id} --space {space} --db {layer}.db" if env_id else \
        "tensorgym landscape measure ENV_ID --db FILE"
    raise LandscapeNotFound(f"no {space} landscape of {workload.label} is shipped for {wanted}; shipped: {listing}. "
                            f"Measure one on this CPU: `{measure}`")


def another_cpu_notice(landscape_cpu: str, target: Target | None = None) -> str | None:
    """The one line a run answered from a landscape measured on the CPU folder ``landscape_cpu`` prints, or
    ``None`` when that is ``target``'s CPU (default the local one)."""
    here = cpu_folder(target)
    if landscape_cpu == here:
        return None
    return (f"answering from the landscape measured on {landscape_cpu}, not on this CPU ({here}): a benchmark "
            f"of search methods, not of this machine's kernels (choose another with --landscape CPU, or measure "
            f"this CPU with `tensorgym landscape measure`)")


def warn_if_another_cpu(landscape_cpu: str, target: Target | None = None, stacklevel: int = 3) -> None:
    """Warn (:class:`AnotherCPULandscape`, once per call site) with :func:`another_cpu_notice`'s line when the
    landscape was measured on another CPU."""
    notice = another_cpu_notice(landscape_cpu, target)
    if notice:
        warnings.warn(notice, AnotherCPULandscape, stacklevel=stacklevel)
