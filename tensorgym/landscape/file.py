"""A landscape as a value, and its compact file format.

A *landscape* is every config of one bounded search space of one layer, measured once on one CPU
(:mod:`tensorgym.spaces.tiles.benchmark` and :mod:`tensorgym.spaces.microkernel.benchmark` choose such
spaces, :mod:`.measuring` measures them, :mod:`.export` turns the database into a :class:`Landscape`).
It is shipped as data, so agents can be compared on it with many seeds in minutes, against the true
optimum, without compiling anything.

**The file** (``*.json.gz``, :data:`FORMAT` version :data:`VERSION`): one gzip-compressed JSON object

* ``format``, ``version``;
* ``metadata`` (:class:`LandscapeMetadata`): the CPU (model, folder, label, fingerprint, ISA flags,
  cores, the measured fp32 FMA peak if known), the versions (TVM, LLVM, tensorgym and its git
  commit), the timing protocol, the date and the span of the measurements, the workload (its JSON,
  key and label), the space's name and options (``bounds`` included, and for a microkernel space the
  catalogue entries of its microkernels: :meth:`Landscape.space` builds exactly the measured space again,
  on any machine), the full target description, the env id if the workload is a
  suite layer, and how many configs of the space the file holds;
* ``columns``: one list per field, one entry per config, in the space's own order
  (:meth:`~tensorgym.spaces.base.Space.configs`): ``config`` (the config's JSON key), ``status``,
  ``latency_s`` (the median), ``latency_cv``, ``samples`` (seconds per call: every sample when at
  most :data:`MAX_SAMPLES` were taken, else the ``(i + 0.5) / 16`` quantiles, an equal-weight
  summary to draw from), ``sample_count`` (how many were taken), ``number`` (calls per sample),
  ``gflops``, ``build_s``, ``run_s``, ``wall_s``, ``timing`` (``full``/``short``), ``contention``
  and ``error`` (its first line). Failed configs have ``null`` latencies.

Columns rather than one object per config: the field names are written once, and gzip finds the
repeats within a column. Times keep 6 significant digits (timer noise is far above that), both in
memory and in the file, so a landscape saved and loaded again is equal to itself.

Nothing here imports TVM: a landscape, its space and its records are plain Python and NumPy.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..config import Config
from ..errors import TensorgymError
from ..evaluator import NotMeasured
from ..record import Record, Status
from ..spaces.base import Space
from ..target import Target
from ..workloads import Workload

FORMAT = "tensorgym-landscape"
VERSION = 1
MAX_SAMPLES = 16  # samples kept per config; beyond that, this many quantiles
_DIGITS = 6  # significant digits of the times kept


class LandscapeError(TensorgymError, ValueError):
    """A landscape cannot be read, built or used as asked (the message says why)."""


class NotInLandscape(NotMeasured):
    """A config the landscape does not hold: outside its space, or not measured in a partial landscape."""


@dataclass(frozen=True)
class LandscapeMetadata:
    """Where, how and when a landscape was measured, and what of (see the module docs).

    ``target`` is the full :meth:`Target.to_json` description (the space is rebuilt for it);
    ``cpu_model``, ``cpu_flags``, ``cores`` and ``fingerprint`` repeat its parts a reader looks for.
    ``fma_peak_gflops`` is the measured fp32 FMA peak of the CPU (None: not calibrated).
    ``configs_in_space`` is the size of the space; a complete landscape holds all of them.
    """

    workload: dict[str, Any]
    workload_key: str
    workload_label: str
    space: str
    space_options: dict[str, Any]
    target: dict[str, Any]
    cpu_model: str
    cpu_folder: str
    fingerprint: str
    cpu_flags: tuple[str, ...]
    cores: int
    tvm_version: str
    llvm_version: str
    tensorgym_version: str
    protocol: dict[str, Any]
    date: str
    configs_in_space: int
    fma_peak_gflops: float | None = None
    git_commit: str | None = None
    env_id: str | None = None
    measured_from: str | None = None
    measured_to: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    # What a landscape's metadata must say (the others may be None: not known).
    REQUIRED: ClassVar[tuple[str, ...]] = (
        "workload", "workload_key", "workload_label", "space", "target", "cpu_model", "cpu_folder", "fingerprint",
        "cpu_flags", "cores", "tvm_version", "llvm_version", "tensorgym_version", "protocol", "date",
        "configs_in_space")

    def __post_init__(self) -> None:
        # Held as JSON gives them back (lists, not tuples), so a loaded landscape equals the one saved.
        for name in ("workload", "space_options", "target", "protocol", "notes"):
            object.__setattr__(self, name, json.loads(json.dumps(getattr(self, name))))
        object.__setattr__(self, "cpu_flags", tuple(self.cpu_flags))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["cpu_flags"] = list(self.cpu_flags)
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "LandscapeMetadata":
        known = {f.name for f in fields(LandscapeMetadata)}
        missing = [name for name in LandscapeMetadata.REQUIRED if name not in data]
        if missing:
            raise LandscapeError(f"the landscape's metadata lacks {', '.join(missing)}")
        return LandscapeMetadata(**{k: v for k, v in data.items() if k in known})

    def problems(self) -> list[str]:
        """What is missing or inconsistent (empty: complete)."""
        out = [f"{name} is empty" for name in self.REQUIRED if getattr(self, name) in (None, "", {}, ())]
        if self.target.get("fingerprint") not in (None, self.fingerprint):
            out.append(f"the target's fingerprint {self.target.get('fingerprint')} is not {self.fingerprint}")
        try:
            if Workload.from_json(self.workload).key != self.workload_key:
                out.append(f"the workload's key is not {self.workload_key} (written by another tensorgym?)")
        except TensorgymError as exc:
            out.append(f"the workload cannot be rebuilt: {exc}")
        return out


class Landscape:
    """Every measured config of one space of one layer on one CPU, as columns (see the module docs).

    Build one with :meth:`from_records` (what :func:`~tensorgym.landscape.export.export_landscape`
    does) or :meth:`load`. Rows are in the space's own order; :meth:`index_of` finds a config's row.
    """

    def __init__(self, metadata: LandscapeMetadata, columns: Mapping[str, Sequence[Any]]):
        self.metadata = metadata
        n = len(columns["config"])
        for name in _COLUMNS:
            if len(columns[name]) != n:
                raise LandscapeError(f"column {name!r} has {len(columns[name])} entries, not {n}")
        self.configs: tuple[Config, ...] = tuple(Config.from_json(c) if not isinstance(c, Config) else c
                                                 for c in columns["config"])
        self.status: tuple[Status, ...] = tuple(Status(s) for s in columns["status"])
        if Status.INFRA_ERROR in self.status:
            raise LandscapeError("a landscape holds final records only; an infra_error config is not measured")
        self.latency_s = _floats(columns["latency_s"])
        self.latency_cv = _floats(columns["latency_cv"])
        self.samples: tuple[tuple[float, ...], ...] = tuple(tuple(map(float, s)) for s in columns["samples"])
        self.sample_count = np.asarray(columns["sample_count"], dtype=np.int64)
        self.number = np.asarray(columns["number"], dtype=np.int64)
        self.gflops = _floats(columns["gflops"])
        self.build_s = _floats(columns["build_s"])
        self.run_s = _floats(columns["run_s"])
        self.wall_s = _floats(columns["wall_s"])
        self.timing: tuple[str, ...] = tuple(columns["timing"])
        self.contention = _floats(columns["contention"])
        self.error: tuple[str, ...] = tuple(columns["error"])
        self.ok = np.array([s is Status.OK for s in self.status], dtype=bool)
        bad = [i for i in np.flatnonzero(self.ok) if not self.samples[i] or not self.latency_s[i] > 0]
        if bad:
            raise LandscapeError(f"config {self.configs[bad[0]].key} is ok but has no positive latency or samples")
        for array in (self.latency_s, self.latency_cv, self.sample_count, self.number, self.gflops, self.build_s,
                      self.run_s, self.wall_s, self.contention, self.ok):
            array.flags.writeable = False

    # -- building ------------------------------------------------------------------
    @classmethod
    def from_records(cls, records: Iterable[Record], metadata: LandscapeMetadata,
                     order: Sequence[Config] | None = None) -> "Landscape":
        """The landscape of ``records`` (final records of ``metadata``'s workload and space), in the order of
        ``order`` (default: the records' order); configs of ``order`` without a record are left out."""
        by_config: dict[Config, Record] = {}
        for record in records:
            if record.workload != metadata.workload_key or record.space != metadata.space:
                raise LandscapeError(f"a record of {record.workload} ({record.space}) is not of "
                                     f"{metadata.workload_label} ({metadata.space})")
            if not record.final:
                raise LandscapeError(f"{record.config.key} has an infra_error record: measure it again first")
            by_config[record.config] = record
        rows = [by_config[c] for c in order if c in by_config] if order is not None else list(by_config.values())
        columns: dict[str, list[Any]] = {name: [] for name in _COLUMNS}
        for r in rows:
            # A record with a latency but no samples (written by hand, or by an old tensorgym) is one sample.
            samples = r.samples or ((r.latency_s,) if r.ok and r.latency_s else ())
            columns["config"].append(r.config)
            columns["status"].append(r.status.value)
            columns["latency_s"].append(_sig(r.latency_s))
            columns["latency_cv"].append(_sig(r.latency_cv))
            columns["samples"].append(_kept_samples(samples))
            columns["sample_count"].append(len(samples))
            columns["number"].append(int(r.number))
            columns["gflops"].append(_sig(r.gflops))
            columns["build_s"].append(_sig(r.build_s))
            columns["run_s"].append(_sig(r.run_s))
            columns["wall_s"].append(_sig(r.wall_s))
            columns["timing"].append(r.timing)
            columns["contention"].append(_sig(r.contention))
            columns["error"].append(r.error.strip().splitlines()[0][:200] if r.error.strip() else "")
        return cls(metadata, columns)

    # -- the file ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        columns = {
            "config": [c.key for c in self.configs],
            "status": [s.value for s in self.status],
            "latency_s": _json_floats(self.latency_s),
            "latency_cv": _json_floats(self.latency_cv),
            "samples": [list(s) for s in self.samples],
            "sample_count": self.sample_count.tolist(),
            "number": self.number.tolist(),
            "gflops": _json_floats(self.gflops),
            "build_s": _json_floats(self.build_s),
            "run_s": _json_floats(self.run_s),
            "wall_s": _json_floats(self.wall_s),
            "timing": list(self.timing),
            "contention": _json_floats(self.contention),
            "error": list(self.error),
        }
        return {"format": FORMAT, "version": VERSION, "metadata": self.metadata.to_json(), "columns": columns}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Landscape":
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise LandscapeError("not a tensorgym landscape (no 'format': 'tensorgym-landscape')")
        if data.get("version") != VERSION:
            raise LandscapeError(f"landscape format version {data.get('version')!r}; this tensorgym reads {VERSION}")
        columns = data.get("columns")
        if not isinstance(columns, Mapping) or any(name not in columns for name in _COLUMNS):
            missing = [n for n in _COLUMNS if not isinstance(columns, Mapping) or n not in columns]
            raise LandscapeError(f"the landscape lacks the column(s) {', '.join(missing)}")
        return cls(LandscapeMetadata.from_json(data.get("metadata") or {}), columns)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the file (gzip without a time stamp, so the same landscape gives the same bytes), atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_json(), separators=(",", ":"), allow_nan=False).encode()
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                          compresslevel=9) as out:
                out.write(text)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # a shipped file is readable by all, as any file written plainly is
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Landscape":
        """Read a landscape file; raises :class:`LandscapeError` saying what is wrong with it."""
        path = Path(path)
        try:
            with gzip.open(path, "rb") as f:
                data = json.loads(f.read())
        except FileNotFoundError:
            raise LandscapeError(f"no landscape file {path}") from None
        except (OSError, EOFError, ValueError) as exc:
            raise LandscapeError(f"cannot read the landscape {path}: {exc}") from None
        try:
            return cls.from_json(data)
        except (LandscapeError, TypeError, KeyError, ValueError) as exc:
            raise LandscapeError(f"{path}: {exc}") from None

    # -- what it is of ---------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.configs)

    def __repr__(self) -> str:
        return f"Landscape({self.workload_label}, {self.space_name}, {len(self)} configs, {self.cpu_label})"

    @property
    def workload_key(self) -> str:
        return self.metadata.workload_key

    @property
    def workload_label(self) -> str:
        return self.metadata.workload_label

    @cached_property
    def workload(self) -> Workload:
        return Workload.from_json(self.metadata.workload)

    @property
    def space_name(self) -> str:
        return self.metadata.space

    @cached_property
    def target(self) -> Target:
        """The CPU it was measured on, as a :class:`Target` (a description: nothing is run on it)."""
        return Target.from_json(self.metadata.target)

    @property
    def fingerprint(self) -> str:
        return self.metadata.fingerprint

    @property
    def cpu_label(self) -> str:
        return self.target.label

    @property
    def cpu_folder(self) -> str:
        return self.metadata.cpu_folder

    @property
    def complete(self) -> bool:
        """Whether it holds every config of its space."""
        return len(self) == self.metadata.configs_in_space

    def space(self, target: Target | None = None) -> Space:
        """The measured space, built again from the metadata (same name, workload, target and options, bounds
        included), without TVM. Each call builds a new one. ``target``: build it for another target than the
        landscape's (the live machine of ``landscape check``), which compiles its configs."""
        from ..catalog import make_space

        options = self.metadata.space_options
        target = self.target if target is None else target
        try:
            if self.space_name == "microkernel" and "bounds" in options:
                # A benchmark sub-space of the microkernel space: its options carry its catalogue and bounds.
                from ..spaces.microkernel.benchmark import MicrokernelBenchmarkSpace

                return MicrokernelBenchmarkSpace(self.workload, target, **options)
            return make_space(self.space_name, self.workload, target, **options)
        except (TensorgymError, TypeError) as exc:
            raise LandscapeError(f"the {self.space_name} space of {self.workload_label} cannot be built from the "
                                 f"landscape's metadata: {exc}") from None

    def narrowed(self, bounds: Mapping[str, Sequence[int]], notes: Mapping[str, Any] | None = None) -> "Landscape":
        """The landscape of a narrower space: this space with ``bounds`` (coordinate label -> the choices it keeps,
        each a subset of what it keeps here; the others as they are), holding the same measurements of the configs
        that space holds. Nothing is measured: a sub-space of a complete landscape is complete. ``notes`` are added
        to the metadata's."""
        if self.metadata.space_options.get("bounds") is None or self.space_name != "tiles":
            raise LandscapeError(f"only a bounded tiles space's landscape can be narrowed, not {self!r}")
        held = {c.label: list(c.choices) for c in self.space().coordinates}
        unknown = sorted(set(bounds) - set(held))
        if unknown:
            raise LandscapeError(f"the space has no coordinate {unknown[0]!r}; it has {', '.join(held)}")
        for label, values in bounds.items():
            extra = sorted(set(values) - set(held[label]))
            if not values or extra:
                raise LandscapeError(f"the bounds of {label!r} must be a non-empty subset of {held[label]}, "
                                     f"got {list(values)}")
        from ..catalog import make_space

        options = {**self.metadata.space_options,
                   "bounds": {label: [v for v in kept if v in set(bounds.get(label, kept))]
                              for label, kept in held.items()}}
        try:
            configs = make_space(self.space_name, self.workload, self.target, **options).configs()
        except TensorgymError as exc:
            raise LandscapeError(f"the narrowed space of {self.workload_label} cannot be built: {exc}") from None
        rows = [self._index[c] for c in configs if c in self._index]  # a partial landscape stays partial
        columns = {name: [column[i] for i in rows] for name, column in self.to_json()["columns"].items()}
        metadata = replace(self.metadata, space_options=options, configs_in_space=len(configs),
                           notes={**(self.metadata.notes or {}), **(notes or {})})
        return Landscape(metadata, columns)

    # -- looking up ------------------------------------------------------------------
    @cached_property
    def _index(self) -> dict[Config, int]:
        return {config: i for i, config in enumerate(self.configs)}

    def index_of(self, config: Config) -> int:
        """The row of ``config``; raises :class:`NotInLandscape`."""
        row = self._index.get(config) if isinstance(config, Config) else None
        if row is None:
            raise NotInLandscape(f"{getattr(config, 'key', config)!s:.200} is not in the {self.space_name} landscape "
                                 f"of {self.workload_label} ({len(self)} configs)")
        return row

    def __contains__(self, config: object) -> bool:
        return isinstance(config, Config) and config in self._index

    def record(self, row: int, *, latency_s: float | None = None, wall_s: float | None = None) -> Record:
        """The record of row ``row`` as measured (or with another ``latency_s`` and ``wall_s``)."""
        ok = bool(self.ok[row])
        latency = (float(self.latency_s[row]) if latency_s is None else latency_s) if ok else None
        if not ok:
            gflops = None
        elif latency_s is None:
            gflops = float(self.gflops[row]) if not math.isnan(self.gflops[row]) else self.workload.gflops(latency)
        else:
            gflops = self.workload.gflops(latency)
        return Record(
            workload=self.workload_key, target=self.fingerprint, space=self.space_name, config=self.configs[row],
            status=self.status[row], latency_s=latency, latency_cv=_none_if_nan(self.latency_cv[row]),
            samples=self.samples[row], number=int(self.number[row]),
            gflops=gflops, build_s=float(self.build_s[row]),
            run_s=float(self.run_s[row]), wall_s=float(self.wall_s[row]) if wall_s is None else wall_s,
            error=self.error[row], timing=self.timing[row], contention=_none_if_nan(self.contention[row]))

    def records(self) -> list[Record]:
        """Every row's record as measured."""
        return [self.record(i) for i in range(len(self))]

    @cached_property
    def scores(self) -> np.ndarray:
        """The recorded GFLOP/s of every row (its median latency's; 0.0 for a failed config), read-only."""
        out = np.where(self.ok, np.nan_to_num(self.gflops), 0.0)
        out.flags.writeable = False
        return out

    @property
    def optimum(self) -> Record | None:
        """The best correct config's record (None: none ran correctly)."""
        if not self.ok.any():
            return None
        return self.record(int(np.argmax(self.scores)))

    def top_fraction(self, q: float) -> list[Record]:
        """The best ``ceil(q * len(self))`` configs (correct ones only, so maybe fewer), best first: the
        top ``q`` of the space, e.g. ``top_fraction(0.01)`` for its best 1 %."""
        if not isinstance(q, (int, float)) or not 0 < q <= 1:
            raise LandscapeError(f"q is a fraction in (0, 1], got {q!r}")
        k = math.ceil(q * len(self))
        rows = np.argsort(-self.scores, kind="stable")[:k]
        return [self.record(int(i)) for i in rows if self.ok[i]]

    def fraction_better(self, gflops: float) -> float:
        """The share of the landscape's configs faster than ``gflops`` GFLOP/s (0.0: as good as the optimum)."""
        return float(np.count_nonzero(self.scores > gflops)) / max(1, len(self))

    # -- checking --------------------------------------------------------------------
    def problems(self, space: Space | None = None) -> list[str]:
        """What keeps this landscape from standing for its space (empty: nothing): incomplete metadata, a space
        that cannot be rebuilt, configs missing from it or foreign to it."""
        out = self.metadata.problems()
        try:
            space = space if space is not None else self.space()
        except LandscapeError as exc:
            return out + [str(exc)]
        configs = space.configs()
        if len(configs) != self.metadata.configs_in_space:
            out.append(f"the space has {len(configs)} configs, the metadata says {self.metadata.configs_in_space}")
        foreign = [c for c in self.configs if not space.is_valid(c)]
        if foreign:
            out.append(f"{len(foreign)} configs are not in the space, e.g. {foreign[0].key}")
        missing = [c for c in configs if c not in self._index]
        if missing:
            out.append(f"{len(missing)} of {len(configs)} configs of the space are not in the landscape, "
                       f"e.g. {missing[0].key}")
        if len(self._index) != len(self):
            out.append("some configs appear twice")
        return out


_COLUMNS = ("config", "status", "latency_s", "latency_cv", "samples", "sample_count", "number", "gflops", "build_s",
            "run_s", "wall_s", "timing", "contention", "error")


def _kept_samples(samples: Sequence[float]) -> list[float]:
    """Every sample when there are at most MAX_SAMPLES, else MAX_SAMPLES equal-weight quantiles."""
    if len(samples) > MAX_SAMPLES:
        samples = np.quantile(np.asarray(samples, dtype=np.float64), (np.arange(MAX_SAMPLES) + 0.5) / MAX_SAMPLES)
    return [_sig(float(s)) for s in samples]


def _sig(value: float | None) -> float | None:
    """``value`` to :data:`_DIGITS` significant digits (None and NaN: None)."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{_DIGITS}g}")


def _floats(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def _json_floats(array: np.ndarray) -> list[float | None]:
    return [None if math.isnan(v) else v for v in array.tolist()]


def _none_if_nan(value: float) -> float | None:
    return None if math.isnan(value) else float(value)
