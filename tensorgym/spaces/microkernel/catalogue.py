"""The machine's catalogue of register microkernels (seed 003, B.2 and B.5.1), as data.

A *microkernel* is the fully unrolled innermost block of a kernel: an output
tile of ``vec`` vectors (along the vectorised dimension: conv output channels,
matmul columns) by ``h`` by ``w`` elements, held in vector registers, updated
by ``c x r x s`` unrolled steps of the reduction, and repeated by a *reuse
loop* on the reduction dimension (conv input channels, matmul k) directly
around it. Conv uses all six sizes; matmul uses ``vec`` (columns), ``h``
(rows) and ``c`` (k unroll), with ``w = r = s = 1``.

This module holds what a catalogue *is*: the candidates the register file
allows (:func:`enumerate_microkernels`), the measured entries and the
machine's measured FMA peak (:class:`Catalogue`), and where catalogues are
stored (JSON under the cache directory, one file per target fingerprint).
Measuring one is :mod:`tensorgym.calibration`'s job (a measuring job above the spaces).

**Enumeration rules** (seed 003 B.2 for 32 vector registers, scaled for other
register files; ``out = vec*h*w``, ``par = vec*c*r*s``):

* ``14 <= out <= 28`` and ``16 <= out + par <= 36``; every size in ``1..16``;
* ``r, s`` in the allowed sizes, and ``r = s`` when both exceed 1;
* adaptation: ``out + vec + 1 <= registers``. The generated code keeps the
  ``out`` accumulators, the ``vec`` weight vectors of one reduction step and one
  broadcast live at once; a microkernel beyond that spills (measured: 33 live
  registers run at half the speed of 31).

Pruning, to keep a full calibration near 4 minutes on 2 cores: ``r, s`` in
``{1, 3}`` (no layer in the suites has a 5x5 kernel and 7x7 appears only in
the stem layers) and the reduction unroll ``c`` in ``{1, 2, 4, 8, 16}``. That
leaves 840 candidates on AVX-512. ``paper=True`` (``--paper``) enumerates seed
003's unpruned set (``r, s`` in ``{1, 3, 5, 7}``, ``c`` in ``1..16``: 2027
candidates with the spill rule, 2043 without). ``quick=True`` enumerates 22
(``c = r = s = 1``, ``w`` in ``{1, 7, 14}``, ``vec <= 3``), enough for the
ResNet-50, YOLO-9000 and BERT shapes.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import TensorgymError
from ...target import Target, resolve_target

CACHE_ENV = "TENSORGYM_CACHE"
DEFAULT_THRESHOLD = 0.8  # seed 003: microkernels at >= 80 % of peak are kept
FORMAT_VERSION = 1


class CatalogueMissing(TensorgymError, FileNotFoundError):
    """No calibrated microkernel catalogue exists for this machine."""

    def __str__(self) -> str:  # OSError would format the message as "[Errno ...]"
        return str(self.args[0]) if self.args else ""


# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class Microkernel:
    """Sizes of one register microkernel (see the module docs); ``vec`` counts vectors."""

    vec: int
    h: int
    w: int = 1
    c: int = 1
    r: int = 1
    s: int = 1

    def __post_init__(self) -> None:
        for name in ("vec", "h", "w", "c", "r", "s"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"microkernel size {name} must be a positive integer, got {value!r}")

    @property
    def key(self) -> tuple[int, int, int, int, int, int]:
        return (self.vec, self.h, self.w, self.c, self.r, self.s)

    @property
    def class_key(self) -> tuple[int, int, int, int, int]:
        """Everything but ``h``: microkernels of one class can be combined along h."""
        return (self.vec, self.w, self.c, self.r, self.s)

    @property
    def out_registers(self) -> int:
        return self.vec * self.h * self.w

    @property
    def param_registers(self) -> int:
        return self.vec * self.c * self.r * self.s

    @property
    def live_registers(self) -> int:
        """Vector registers live at once in the generated code: accumulators, one step's weights, a broadcast."""
        return self.out_registers + self.vec + 1

    @property
    def matmul_compatible(self) -> bool:
        return self.w == 1 and self.r == 1 and self.s == 1

    def with_h(self, h: int) -> "Microkernel":
        return Microkernel(self.vec, h, self.w, self.c, self.r, self.s)

    def fmas(self, lanes: int) -> int:
        """Scalar multiply-adds of one unrolled block (one reuse-loop iteration)."""
        return self.out_registers * lanes * self.c * self.r * self.s

    @property
    def label(self) -> str:
        return f"vec{self.vec} h{self.h} w{self.w} c{self.c} r{self.r} s{self.s}"

    @staticmethod
    def from_key(key: Sequence[int]) -> "Microkernel":
        return Microkernel(*(int(k) for k in key))

    @staticmethod
    def parse(text: str) -> "Microkernel":
        """``"vec,h,w[,c,r,s]"`` (``c``, ``r``, ``s`` default to 1), as the command line takes one."""
        try:
            sizes = [int(p) for p in text.split(",")]
        except ValueError:
            sizes = []
        if not 3 <= len(sizes) <= 6:
            raise ValueError(f"a microkernel is vec,h,w[,c,r,s] in positive integers (e.g. 2,1,7), got {text!r}")
        return Microkernel(*sizes)


@dataclass(frozen=True)
class EnumerationRules:
    """The register constraints of seed 003 (B.2) for a file of ``registers`` vector registers."""

    registers: int = 32
    min_out: int = 14
    max_out: int = 28
    min_total: int = 16
    max_total: int = 36
    max_size: int = 16
    rs_sizes: tuple[int, ...] = (1, 3)
    c_sizes: tuple[int, ...] = (1, 2, 4, 8, 16)
    w_sizes: tuple[int, ...] | None = None  # None: 1..max_size
    max_vec: int | None = None  # None: max_size

    @staticmethod
    def for_target(target: Target, quick: bool = False, paper: bool = False) -> "EnumerationRules":
        """Rules scaled to the target's register file; ``paper``: seed 003's full (unpruned) set."""
        regs = target.vector_registers
        scale = regs / 32
        base = dict(registers=regs, min_out=max(1, round(14 * scale)), max_out=max(1, round(28 * scale)),
                    min_total=max(1, round(16 * scale)), max_total=max(1, round(36 * scale)))
        if paper:
            return EnumerationRules(**base, rs_sizes=(1, 3, 5, 7), c_sizes=tuple(range(1, 17)))
        if quick:
            return EnumerationRules(**base, rs_sizes=(1,), c_sizes=(1,), w_sizes=(1, 7, 14), max_vec=3)
        return EnumerationRules(**base)

    def allows(self, mk: Microkernel) -> bool:
        out, par = mk.out_registers, mk.param_registers
        sizes_ok = all(1 <= v <= self.max_size for v in (mk.vec, mk.h, mk.w, mk.c))
        rs_ok = mk.r in self.rs_sizes and mk.s in self.rs_sizes and not (mk.r > 1 and mk.s > 1 and mk.r != mk.s)
        return (sizes_ok and rs_ok and mk.c in self.c_sizes
                and (self.w_sizes is None or mk.w in self.w_sizes)
                and (self.max_vec is None or mk.vec <= self.max_vec)
                and self.min_out <= out <= self.max_out
                and self.min_total <= out + par <= self.max_total
                and mk.live_registers <= self.registers)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "EnumerationRules":
        return EnumerationRules(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def enumerate_microkernels(rules: EnumerationRules) -> list[Microkernel]:
    """Every microkernel the rules allow, sorted by (class, h)."""
    out = []
    sizes = range(1, rules.max_size + 1)
    widths = rules.w_sizes if rules.w_sizes is not None else sizes
    for vec in range(1, (rules.max_vec or rules.max_size) + 1):
        for w in widths:
            for h in sizes:
                if vec * h * w > rules.max_out:
                    break
                for c in rules.c_sizes:
                    for r in rules.rs_sizes:
                        for s in rules.rs_sizes:
                            mk = Microkernel(vec, h, w, c, r, s)
                            if rules.allows(mk):
                                out.append(mk)
    return sorted(out, key=lambda m: (m.class_key, m.h))


# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CatalogueEntry:
    """One measured candidate: GFLOP/s on all cores (None if it failed)."""

    microkernel: Microkernel
    status: str
    gflops: float | None = None
    latency_s: float | None = None
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"mk": list(self.microkernel.key), "status": self.status, "gflops": self.gflops,
                "latency_s": self.latency_s, "error": self.error}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "CatalogueEntry":
        return CatalogueEntry(Microkernel.from_key(data["mk"]), data["status"], data.get("gflops"),
                              data.get("latency_s"), data.get("error") or "")


@dataclass(frozen=True)
class Catalogue:
    """The calibrated microkernels of one machine, with its measured FMA peak.

    ``kept(threshold)`` lists the microkernels at ``>= threshold`` of the peak;
    ``classes(threshold)`` groups them by everything but ``h``.
    """

    fingerprint: str
    target_label: str
    lanes: int
    registers: int
    peak_gflops: float
    mode: str  # "full", "quick", "paper", "custom" (other rules) or "unmeasured"
    rules: EnumerationRules
    entries: tuple[CatalogueEntry, ...]
    threshold: float = DEFAULT_THRESHOLD
    created: float = 0.0
    calibration_s: float = 0.0
    _by_key: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_key.update({e.microkernel: e for e in self.entries})

    def __len__(self) -> int:
        return len(self.entries)

    def entry(self, mk: Microkernel) -> CatalogueEntry | None:
        return self._by_key.get(mk)

    def fraction(self, mk: Microkernel) -> float | None:
        """The microkernel's measured GFLOP/s as a fraction of the measured peak (None if unmeasured)."""
        entry = self._by_key.get(mk)
        if entry is None or entry.gflops is None or self.peak_gflops <= 0:
            return None
        return entry.gflops / self.peak_gflops

    def measured(self) -> list[CatalogueEntry]:
        return [e for e in self.entries if e.status == "ok" and e.gflops is not None]

    def kept(self, threshold: float | None = None) -> list[Microkernel]:
        """Microkernels at ``>= threshold`` of the measured peak (default: the catalogue's threshold)."""
        t = self.threshold if threshold is None else threshold
        return [e.microkernel for e in self.measured() if e.gflops >= t * self.peak_gflops]

    def ranked(self) -> list[Microkernel]:
        """Every measured microkernel, fastest first (for fallbacks below the threshold)."""
        return [e.microkernel for e in sorted(self.measured(), key=lambda e: -e.gflops)]

    def classes(self, threshold: float | None = None) -> dict[tuple[int, ...], list[Microkernel]]:
        groups: dict[tuple[int, ...], list[Microkernel]] = {}
        for mk in self.kept(threshold):
            groups.setdefault(mk.class_key, []).append(mk)
        return {k: sorted(v, key=lambda m: m.h) for k, v in sorted(groups.items())}

    def satisfies(self, quick: bool = False, paper: bool = False) -> bool:
        """Whether this catalogue answers a calibration request (a larger enumeration answers a smaller one)."""
        if paper:
            return self.mode == "paper"
        return self.mode in ("full", "paper") or (quick and self.mode == "quick")

    # -- JSON -----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "fingerprint": self.fingerprint, "target": self.target_label,
                "lanes": self.lanes, "registers": self.registers, "peak_gflops": self.peak_gflops,
                "mode": self.mode, "threshold": self.threshold, "created": self.created,
                "calibration_s": self.calibration_s, "rules": self.rules.to_json(),
                "entries": [e.to_json() for e in self.entries]}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Catalogue":
        if data.get("format") != FORMAT_VERSION:
            raise ValueError(f"unsupported microkernel catalogue format {data.get('format')!r}; re-calibrate "
                             "with `tensorgym microkernels calibrate --force`")
        return Catalogue(
            fingerprint=data["fingerprint"], target_label=data["target"], lanes=int(data["lanes"]),
            registers=int(data["registers"]), peak_gflops=float(data["peak_gflops"]), mode=data["mode"],
            rules=EnumerationRules.from_json(data["rules"]),
            entries=tuple(CatalogueEntry.from_json(e) for e in data["entries"]),
            threshold=float(data.get("threshold", DEFAULT_THRESHOLD)), created=float(data.get("created", 0.0)),
            calibration_s=float(data.get("calibration_s", 0.0)),
        )

    def save(self, path: str | Path) -> None:
        """Write atomically (a reader never sees a half-written file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1))
        os.replace(tmp, path)

    @staticmethod
    def load(path: str | Path) -> "Catalogue":
        return Catalogue.from_json(json.loads(Path(path).read_text()))

    @staticmethod
    def unmeasured(target: Target, microkernels: Iterable[Microkernel] | None = None, *,
                   rules: EnumerationRules | None = None) -> "Catalogue":
        """A catalogue that keeps every candidate without measuring (tests, exploring the space).

        Every microkernel is marked at 100 % of a nominal peak of 1 GFLOP/s.
        """
        rules = rules or EnumerationRules.for_target(target)
        mks = list(microkernels) if microkernels is not None else enumerate_microkernels(rules)
        return Catalogue(fingerprint=target.fingerprint, target_label=target.label,
                         lanes=target.vector_lanes_fp32, registers=target.vector_registers, peak_gflops=1.0,
                         mode="unmeasured", rules=rules,
                         entries=tuple(CatalogueEntry(m, "ok", 1.0) for m in mks), threshold=0.0)


# ------------------------------------------------------------------------------------------------
def default_cache_dir() -> Path:
    """``$TENSORGYM_CACHE/microkernels`` if set, else ``~/.cache/tensorgym/microkernels``."""
    root = os.environ.get(CACHE_ENV)
    return (Path(root) if root else Path.home() / ".cache" / "tensorgym") / "microkernels"


def catalogue_path(target: Target | str | None = None, cache_dir: str | Path | None = None) -> Path:
    target = resolve_target(target)
    return Path(cache_dir) if cache_dir is not None and Path(cache_dir).suffix == ".json" else \
        (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / f"{target.fingerprint}.json"


def load_catalogue(target: Target | str | None = None, cache_dir: str | Path | None = None) -> Catalogue:
    """The stored catalogue of ``target`` (default: this machine); raises :class:`CatalogueMissing`."""
    target = resolve_target(target)
    path = catalogue_path(target, cache_dir)
    if not path.exists():
        raise CatalogueMissing(
            f"no microkernel catalogue for this machine ({target.label}, fingerprint {target.fingerprint}) "
            f"at {path}. Run `tensorgym microkernels calibrate` once (about 4 minutes; `--quick` measures a "
            f"small subset in seconds), or pass catalogue=... to the space/env."
        )
    catalogue = Catalogue.load(path)
    if catalogue.fingerprint != target.fingerprint:
        raise CatalogueMissing(f"{path} was calibrated on another machine ({catalogue.target_label}); "
                               f"run `tensorgym microkernels calibrate --force`")
    return catalogue


