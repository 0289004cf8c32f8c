"""From a database of measurements to a landscape file, and to the T4 format.

:func:`export_landscape` gathers the records of every config of a space (measured with
:func:`~tensorgym.landscape.measuring.measure_landscape`) into a
:class:`~tensorgym.landscape.file.Landscape`, with the metadata that says where, when and how they
were measured. A landscape stands for its whole space, so configs the database lacks are refused
(:class:`LandscapeIncomplete`) unless ``allow_partial=True``, and then the metadata says how many of
how many it holds.

:func:`write_t4` writes the same measurements in the T4 results format of the Open Autotuning
Results Schema, which Kernel Tuner writes and the ``autotuning-methodology`` package reads as a
brute-forced search space (``schema_version`` 1.0.0). It is written as Kernel Tuner's own T4 writer
writes it (``file_utils.get_t4_results``): times in milliseconds (``metadata.timeunit``), the
objective ``time`` and a ``GFLOP/s`` measurement, Kernel Tuner's error strings as values of failed
configs. Two tensorgym-specific choices:

* ``configuration`` holds the landscape's free parameters, the knob levels it varies and no implied one
  (``{"f.1": 2, "f.3": 4, ..., "unroll": 64}``, :mod:`tensorgym.landscape.parameters`), since T4 and
  Kernel Tuner parameters are scalars, and another tuner should search exactly the landscape's configs;
* ``times`` are chosen so that the tuning clock is the same in both worlds: ``compilation`` is the
  build's share of the wall clock (``wall_s - run_s``: the parallel build phase divided among its
  batch), ``runtimes`` the kernel's timing samples (seconds per call, the schema's meaning) and
  ``validation`` the rest of the run (correctness check, warm-up, the calls of each sample beyond
  one): so the methodology's ``"all"`` time keys (compilation, runtimes, framework, search_algorithm,
  validation) add up to the ``wall_s`` the tuning clock charges. ``benchmark`` (Kernel Tuner's key)
  holds the whole run, ``run_s``; ``framework`` and ``search_algorithm`` are 0 (the search's own
  time is the tuner's, not the space's).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import statistics
import subprocess
from collections.abc import Sequence
from importlib import metadata as _metadata
from pathlib import Path
from typing import Any

from ..config import Config
from ..database import Database
from ..measure.protocol import TimingProtocol
from ..record import Record, Status, summarize_samples
from ..spaces.base import Space
from .file import Landscape, LandscapeError, LandscapeMetadata
from .parameters import free_parameters, parameter_values
from .shipped import cpu_folder, resolve_workload

T4_SCHEMA_VERSION = "1.0.0"
# tensorgym status -> (T4 invalidity, Kernel Tuner's error string for the objective's value)
_T4_INVALIDITY = {
    Status.OK: ("correct", None),
    Status.BUILD_ERROR: ("compile", "CompilationFailedConfig"),
    Status.RUNTIME_ERROR: ("runtime", "RuntimeFailedConfig"),
    Status.TIMEOUT: ("timeout", "RuntimeFailedConfig"),
    Status.WRONG_RESULT: ("correctness", "RuntimeFailedConfig"),
}


class LandscapeIncomplete(LandscapeError):
    """The database lacks configs of the space: a landscape must hold them all (or say it does not)."""


def combine_rounds(rounds: Sequence[Record]) -> Record:
    """One record of a config measured in several rounds (round 1 first; see
    :func:`tensorgym.landscape.measuring.measure_rounds`).

    A config that failed in any round is that failure: a kernel that fails once is not a kernel to ship
    as correct. Otherwise its latency is the median of the rounds' latencies (each a median of its
    samples), so one round slowed by the machine does not move it; its samples are all rounds' samples
    (what the landscape backend draws from) and its CV theirs. It is ``short`` (a bound) when most rounds
    timed it short. The build, run and wall seconds stay round 1's: a search that tries the config pays
    for one measurement, not for the rounds that made the landscape.
    """
    if not rounds:
        raise ValueError("combine_rounds() needs at least one record")
    first = rounds[0]
    if any(r.config != first.config or r.workload != first.workload or r.space != first.space for r in rounds):
        raise ValueError(f"the rounds of {first.config.key} are records of different configs")
    failed = next((r for r in rounds if not r.ok), None)
    if failed is not None:
        return first if failed is first else dataclasses.replace(first, status=failed.status, error=failed.error,
                                                                 latency_s=None, latency_cv=None, samples=(),
                                                                 gflops=None)
    if len(rounds) == 1:
        return first
    latency = statistics.median(r.latency_s for r in rounds)
    samples = tuple(s for r in rounds for s in (r.samples or (r.latency_s,)))
    _, cv = summarize_samples(list(samples))
    contention = [r.contention for r in rounds if r.contention is not None]
    short = sum(r.short for r in rounds) * 2 > len(rounds)
    return dataclasses.replace(first, latency_s=latency, latency_cv=cv, samples=samples,
                               gflops=first.gflops * first.latency_s / latency if first.gflops else None,
                               timing="short" if short else "full", contention=max(contention, default=None),
                               dropped=sum(r.dropped for r in rounds))


def on_one_scale(records: Sequence[Record], scale_s: float | None = None) -> list[Record]:
    """``records`` with their paired timings (:mod:`tensorgym.measure.paired`) on one scale.

    A paired record's latency is its ratio to the reference times the reference's latency at the start of
    its measuring session; chunks measured hours apart have different starts. Here every paired record's
    latency becomes its ratio times ``scale_s`` (default: the median of their reference latencies), so that
    the landscape ranks configs by their ratios alone. Other records are left as they are.
    """
    scale_s = paired_scale(records) if scale_s is None else scale_s
    if scale_s is None:
        return list(records)
    states = [dict(r.device_state) for r in records]
    out = []
    for record, state in zip(records, states):
        if record.ok and "paired_ratio" in state:
            factor = scale_s / state["reference_s"]
            record = dataclasses.replace(record, latency_s=record.latency_s * factor,
                                         samples=tuple(s * factor for s in record.samples),
                                         gflops=record.gflops / factor if record.gflops else None)
        out.append(record)
    return out


def paired_scale(records: Sequence[Record]) -> float | None:
    """The median reference latency of the paired records among ``records`` (None: none is paired)."""
    scales = [state["reference_s"] for state in (dict(r.device_state) for r in records if r.ok)
              if "paired_ratio" in state]
    return statistics.median(scales) if scales else None


def export_landscape(database: Database, space: Space, *, env_id: str | None = None, allow_partial: bool = False,
                     fma_peak_gflops: float | None = None, protocol: TimingProtocol | None = None,
                     llvm_version: str | None = None, repeats: Sequence[Database] = (),
                     notes: dict[str, Any] | None = None) -> Landscape:
    """The landscape of ``space`` from the records ``database`` holds for it on ``space.target``.

    Args:
        env_id: the Gymnasium id of the layer (default: its suite id, if the workload is a suite layer).
        allow_partial: export what is measured when configs are missing (the metadata says how many of how
            many); otherwise they raise :class:`LandscapeIncomplete`.
        fma_peak_gflops: the CPU's fp32 FMA peak (default: the one measured for the target's microkernel
            catalogue, if it was calibrated; else None).
        protocol: the timing protocol the records were measured with (default: tensorgym's, which the measurer
            uses unless told otherwise; the database does not store it).
        llvm_version: the LLVM TVM was built with (default: asked of TVM, imported for it).
        repeats: the databases of the later measuring rounds (round 2 first): each config's record is then
            :func:`combine_rounds` of its rounds, and a config is missing unless every round holds it.
        notes: more for the metadata's notes (e.g. the rule the benchmark space was chosen by).
    """
    configs = space.configs()

    def final(db: Database) -> list[Record]:
        return [r for r in db.records(space.workload.key, space.target.fingerprint, space.name) if r.final]

    # Paired records of every round on the first round's scale: ranked by their ratios to the reference.
    first = final(database)
    scale_s = paired_scale(first)

    def by_config(records: list[Record]) -> dict[Config, Record]:
        return {r.config: r for r in on_one_scale(records, scale_s)}

    held = by_config(first)
    later = [by_config(final(db)) for db in repeats]
    held = {c: combine_rounds([r, *(rounds[c] for rounds in later)]) for c, r in held.items()
            if all(c in rounds for rounds in later)}
    missing = [c for c in configs if c not in held]
    if missing and not allow_partial:
        raise LandscapeIncomplete(f"{len(missing)} of {len(configs)} configs of the {space.name} space of "
                                  f"{space.workload.label} are not measured in {database.path} on "
                                  f"{space.target.label}, e.g. {missing[0].key}: measure them first (`tensorgym "
                                  f"landscape measure`), or export a partial landscape (allow_partial=True)")
    wanted = set(configs)
    records = [r for c, r in held.items() if c in wanted]
    if not records:
        raise LandscapeIncomplete(f"no config of the {space.name} space of {space.workload.label} is measured in "
                                  f"{database.path} on {space.target.label}")
    # Paired timing is the records' own property (their device state); the file says so, and on what scale.
    paired = {} if scale_s is None else {"paired": {
        "timing": "each kernel timed in alternation with one reference kernel; latency = its ratio to the "
                  "reference x reference_latency_s", "reference_latency_s": scale_s}}
    meta = _landscape_metadata(space, records, env_id=env_id, configs_in_space=len(configs), protocol=protocol,
                               rounds=1 + len(repeats), fma_peak_gflops=fma_peak_gflops, llvm_version=llvm_version,
                               notes={"configs_measured": len(records), "complete": not missing, **paired,
                                      **(notes or {})})
    return Landscape.from_records(records, meta, order=configs)


def export_sample(database: Database, space: Space, configs: Sequence[Config], *, seed: int,
                  env_id: str | None = None, protocol: TimingProtocol | None = None,
                  llvm_version: str | None = None) -> Landscape:
    """The full-space sample ``configs`` (drawn by :func:`tensorgym.landscape.measuring.sample_order` with
    ``seed`` from the whole of ``space``) from the records ``database`` holds, in the landscape file format.

    It is not a landscape of a bounded space: its metadata's ``notes["sample"]`` says how it was drawn, and
    ``configs_in_space`` is the sample's size. Raises :class:`LandscapeIncomplete` while configs are missing.
    """
    held = {r.config: r for r in database.records(space.workload.key, space.target.fingerprint, space.name)
            if r.final}
    missing = [c for c in configs if c not in held]
    if missing:
        raise LandscapeIncomplete(f"{len(missing)} of the {len(configs)} configs of the sample of "
                                  f"{space.workload.label} are not measured in {database.path} on "
                                  f"{space.target.label}: run `tensorgym landscape sample` again to measure them")
    records = [held[c] for c in configs]
    drawn = {"of": f"the whole {space.name} space", "draw": "uniform, distinct configs", "seed": seed,
             "configs": len(configs)}
    meta = _landscape_metadata(space, records, env_id=env_id, configs_in_space=len(configs), protocol=protocol,
                               rounds=1, fma_peak_gflops=None, llvm_version=llvm_version, notes={"sample": drawn})
    return Landscape.from_records(records, meta, order=list(configs))


def _landscape_metadata(space: Space, records: Sequence[Record], *, env_id: str | None, configs_in_space: int,
                        protocol: TimingProtocol | None, rounds: int, fma_peak_gflops: float | None,
                        llvm_version: str | None, notes: dict[str, Any]) -> LandscapeMetadata:
    created = sorted(r.created for r in records if r.created)
    target = space.target
    return LandscapeMetadata(
        workload=space.workload.to_json(), workload_key=space.workload.key, workload_label=space.workload.label,
        space=space.name, space_options=getattr(space, "options", {}) or {},
        target=target.to_json(), cpu_model=target.cpu_model, cpu_folder=cpu_folder(target),
        fingerprint=target.fingerprint, cpu_flags=tuple(target.cpu_flags), cores=target.num_cores,
        tvm_version=target.tvm_version, llvm_version=llvm_version or _llvm_version(),
        tensorgym_version=_tensorgym_version(), git_commit=_git_commit(),
        protocol=_protocol(protocol, rounds=rounds), date=_iso(None), configs_in_space=configs_in_space,
        fma_peak_gflops=fma_peak_gflops if fma_peak_gflops is not None else (
            getattr(space, "peak_gflops", None) or _calibrated_peak(target)),
        env_id=env_id if env_id is not None else resolve_workload(space.workload)[1],
        measured_from=_iso(created[0]) if created else None, measured_to=_iso(created[-1]) if created else None,
        notes=notes,
    )


# -- T4 ----------------------------------------------------------------------------------------------------------
def t4_document(landscape: Landscape) -> dict[str, Any]:
    """The T4 results document of ``landscape`` (see the module docs)."""
    meta = landscape.metadata
    stamp = meta.measured_to or meta.date
    results = []
    parameters = free_parameters(landscape)
    for row, config in enumerate(landscape.configs):
        status = landscape.status[row]
        invalidity, error = _T4_INVALIDITY[status]
        samples_ms = [s * 1e3 for s in landscape.samples[row]] if status is Status.OK else []
        run_ms = float(landscape.run_s[row]) * 1e3
        wall_ms = float(landscape.wall_s[row]) * 1e3
        times = {"compilation": max(0.0, wall_ms - run_ms), "runtimes": samples_ms, "benchmark": run_ms,
                 "framework": 0.0, "search_algorithm": 0.0, "validation": max(0.0, run_ms - sum(samples_ms))}
        if status is Status.OK:
            time_value: Any = float(landscape.latency_s[row]) * 1e3
            gflops_value: Any = float(landscape.scores[row])
        else:
            time_value = gflops_value = error
        results.append({
            "timestamp": stamp, "configuration": parameter_values(config, parameters), "times": times,
            "invalidity": invalidity, "correctness": 0 if status is Status.WRONG_RESULT else 1,
            "measurements": [{"name": "time", "value": time_value, "unit": "ms"},
                             {"name": "GFLOP/s", "value": gflops_value, "unit": ""}],
            "objectives": ["time"],
        })
    info = {"workload": meta.workload_label, "workload_key": meta.workload_key, "space": meta.space,
            "env_id": meta.env_id, "cpu": meta.cpu_model, "cpu_folder": meta.cpu_folder,
            "fingerprint": meta.fingerprint, "tvm": meta.tvm_version, "llvm": meta.llvm_version,
            "tensorgym": meta.tensorgym_version, "date": meta.date, "configs_in_space": meta.configs_in_space}
    return {"schema_version": T4_SCHEMA_VERSION, "metadata": {"timeunit": "milliseconds", "tensorgym": info},
            "results": results}


def write_t4(landscape: Landscape, path: str | os.PathLike) -> Path:
    """Write ``landscape`` as a T4 results file (plain JSON; see the module docs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(t4_document(landscape), separators=(",", ":"), allow_nan=False))
    os.replace(tmp, path)
    return path


# -- Kernel Tuner's cache -------------------------------------------------------------------------------------------
def kernel_tuner_cache(landscape: Landscape) -> dict[str, Any]:
    """``landscape`` as a Kernel Tuner cache file, the format its simulation mode replays
    (``kernel_tuner.tune_cache``, or ``tune_kernel(..., cache=FILE, simulation_mode=True)``).

    Its tunable parameters are the landscape's free parameters (:mod:`.parameters`), one cache entry per config,
    keyed by their values joined with commas as Kernel Tuner keys them. ``time`` is the latency in milliseconds
    (Kernel Tuner's error string for a failed kernel, so its restrictions leave the config out), ``times`` the
    samples, and ``compile_time`` + ``benchmark_time`` the wall milliseconds tensorgym's tuning clock charges for
    the config, so Kernel Tuner's simulated time budget spends what a live search would. ``cache`` is the last
    key, as Kernel Tuner requires.
    """
    meta = landscape.metadata
    stamp = meta.measured_to or meta.date
    parameters = free_parameters(landscape)
    entries = {}
    for row, config in enumerate(landscape.configs):
        values = parameter_values(config, parameters)
        status = landscape.status[row]
        run_ms = float(landscape.run_s[row]) * 1e3
        wall_ms = float(landscape.wall_s[row]) * 1e3
        ok = status is Status.OK
        entries[",".join(str(v) for v in values.values())] = {
            **values,
            "time": float(landscape.latency_s[row]) * 1e3 if ok else _T4_INVALIDITY[status][1],
            "times": [s * 1e3 for s in landscape.samples[row]] if ok else [],
            "GFLOP/s": float(landscape.scores[row]) if ok else 0.0,
            "compile_time": max(0.0, wall_ms - run_ms), "verification_time": 0.0, "benchmark_time": run_ms,
            "strategy_time": 0, "framework_time": 0, "timestamp": stamp,
        }
    return {
        "device_name": meta.cpu_model, "kernel_name": f"{meta.workload_label} {meta.space}",
        "problem_size": [len(landscape)], "tune_params_keys": list(parameters), "tune_params": parameters,
        "objective": "time",
        "tensorgym": {"env_id": meta.env_id, "workload_key": meta.workload_key, "cpu_folder": meta.cpu_folder,
                      "fingerprint": meta.fingerprint, "measured": stamp, "tvm": meta.tvm_version,
                      "problem_size": "the landscape's config count (Kernel Tuner asks for one; it is not a grid)"},
        "cache": entries,
    }


def write_kernel_tuner_cache(landscape: Landscape, path: str | os.PathLike) -> Path:
    """Write ``landscape`` as a Kernel Tuner cache file (:func:`kernel_tuner_cache`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(kernel_tuner_cache(landscape), allow_nan=False))
    os.replace(tmp, path)
    return path


# -- metadata ------------------------------------------------------------------------------------------------------
def _protocol(protocol: TimingProtocol | None, rounds: int = 1) -> dict[str, Any]:
    protocol = protocol or TimingProtocol()
    return {"name": f"{TimingProtocol.__module__}.{TimingProtocol.__name__}",
            "settings": dataclasses.asdict(protocol), "rounds": rounds,
            "summary": "warm-up, then samples of at least min_repeat_ms each until their robust spread is within "
                       "target_spread or max_timing_ms is spent; busy rounds retaken; latency = median of the "
                       "samples; kernels far slower than the best known timed short (one sample); every kernel "
                       "checked against NumPy once; builds in parallel (one process per core), timing serial"
                       + ("" if rounds == 1 else
                          f"; every config measured in {rounds} rounds, each in its own shuffled order, latency = "
                          f"median of the rounds' latencies, samples = all rounds' samples")}


def _calibrated_peak(target) -> float | None:
    from ..spaces.microkernel.catalogue import CatalogueMissing, load_catalogue

    try:
        catalogue = load_catalogue(target)
    except (CatalogueMissing, OSError, ValueError, KeyError):
        return None
    return float(catalogue.peak_gflops) if catalogue.mode != "unmeasured" else None


def _llvm_version() -> str:
    try:
        import tvm

        return str(tvm.target.codegen.llvm_version_major())
    except Exception:  # noqa: BLE001 - a version we cannot read is "unknown", not an error
        return "unknown"


def _tensorgym_version() -> str:
    try:
        return _metadata.version("tensorgym")
    except _metadata.PackageNotFoundError:
        return "0+unknown"


def _git_commit() -> str | None:
    """The commit of the source tree tensorgym runs from (``+dirty`` with uncommitted changes), or None."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _iso(timestamp: float | None) -> str:
    moment = _dt.datetime.now(_dt.timezone.utc) if timestamp is None else \
        _dt.datetime.fromtimestamp(timestamp, _dt.timezone.utc)
    return moment.isoformat(timespec="seconds")
