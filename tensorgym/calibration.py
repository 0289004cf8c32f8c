"""Calibration: measure this machine's FMA peak and every candidate microkernel (seed 003, B.5.1).

Once per machine (``tensorgym microkernels calibrate``):

1. enumerate the candidates that fit the register file
   (:func:`~tensorgym.spaces.microkernel.catalogue.enumerate_microkernels`);
2. measure the machine's fp32 FMA peak with an FMA-chain kernel on every core
   (:class:`FmaChain`), not a data-sheet number;
3. measure every candidate in isolation: the microkernel and its reuse loop
   ``T_{512,c}`` on a matching problem (one per core, in parallel), repeated
   over the same data so that the caches are hot (:class:`MicrokernelBenchmark`);
4. keep those within ``threshold`` of the measured peak (seed 003: 80 %) and
   group them into *classes*: microkernels identical except for ``h``.

Calibration is a measuring job above the spaces and the measurer: the
:class:`~tensorgym.spaces.microkernel.MicrokernelSpace` only loads the catalogue it
writes (and raises :class:`~tensorgym.spaces.microkernel.CatalogueMissing` without
one), so no space ever compiles or times anything. The peak kernel and the
microkernel benchmarks are workloads and spaces like any other, with their
:class:`~tensorgym.spaces.builder.KernelBuilder`, built in the
:class:`~tensorgym.measure.Measurer`'s builder pool and checked against NumPy and
timed one at a time by its runner, with tensorgym's timing protocol.

The catalogue is stored as JSON under the cache directory, keyed by the target
fingerprint, and reused: a second calibration on the same machine measures
nothing. All measurements are stored, so the threshold can change without
re-measuring. On 2 cores a full calibration takes about 4 minutes and
``--quick`` about 10 seconds. :func:`stored_or_quick_catalogue` is the first-use
path of the microkernel env and of ``tensorgym tune --space microkernel``: the
stored catalogue, or a quick one measured now.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from .checks import integer
from .config import Config
from .measure.measurer import Measurer
from .measure.protocol import TimingProtocol
from .record import Record
from .spaces.base import Space, SpaceError
from .spaces.builder import KernelBuilder
from .spaces.microkernel.catalogue import (
    DEFAULT_THRESHOLD, Catalogue, CatalogueEntry, CatalogueMissing, EnumerationRules, Microkernel, catalogue_path,
    enumerate_microkernels, load_catalogue,
)
from .spaces.microkernel.codegen import (
    ALL_PACKED, REPEAT, Plan, build_prim_func, pack_conv2d, unpack_conv2d, vector_blocks,
)
from .target import Target, resolve_target
from .workloads import Conv2d, Loop, Workload

log = logging.getLogger(__name__)

BENCH_REUSE = 512  # seed 003: a microkernel is benchmarked under T_{512,c}
BENCH_TARGET_SECONDS = 150e-6  # per-core work of one benchmark call (launch overhead stays ~1 %)
PEAK_RETRIES = 4  # extra peak measurements when a microkernel beat the measured peak
PEAK_CHAINS = 24  # independent FMA chains per core in the peak kernel (latency 4 x 2 pipes needs >= 8)
PEAK_SPARE_REGISTERS = 4  # the multiplier, the addend and room for LLVM: more chains than the rest would spill
# Steps per call: about 1.3 ms on a core at 32 FLOP/cycle, so the thread pool's launch costs under 1 %. At 20,000
# (0.13 ms) the kernel read 1-4 % below its long calls with AVX-512 and 4-7 % with AVX2 (bench/bench_peak.py).
PEAK_ITERATIONS = 200_000

# -- the FMA peak: a workload like any other ---------------------------------------------------
@dataclass(frozen=True)
class FmaChain(Workload):
    """``cores`` parallel blocks of ``chains`` independent vector FMA chains, ``iterations`` steps each.

    ``x[t] <- x[t] * a + b`` with ``a`` just below 1 converges (no overflow, no
    denormals) to the fixed point ``b / (1 - a) = 1``, and every step depends on
    the previous one, so no compiler can fold the loop away. FLOPs:
    ``2 * lanes * chains * iterations * cores``.
    """

    op: ClassVar[str] = "fma_chain"
    A: ClassVar[float] = 0.999
    B: ClassVar[float] = 0.001

    lanes: int
    cores: int
    iterations: int = PEAK_ITERATIONS
    chains: int = PEAK_CHAINS
    dtype: str = "float32"

    @property
    def flops(self) -> int:
        return 2 * self.lanes * self.chains * self.iterations * self.cores

    @property
    def loops(self) -> tuple[Loop, ...]:
        return (Loop("t", self.cores, "spatial"), Loop("step", self.iterations, "reduction"))

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return (self.cores, self.chains * self.lanes), (2, self.lanes)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.cores, self.chains * self.lanes)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        x = np.random.default_rng(seed).uniform(0.0, 1.0, size=self.input_shapes[0]).astype("float32")
        ab = np.stack([np.full(self.lanes, self.A, "float32"), np.full(self.lanes, self.B, "float32")])
        return [x, ab]

    def reference(self, x: np.ndarray, ab: np.ndarray) -> np.ndarray:
        decay = self.A ** self.iterations
        return x.astype(np.float64) * decay + (1.0 - decay)

    def prim_func(self):
        """The kernel as a TIR ``PrimFunc`` named ``main`` (needs TVM)."""
        from tvm.script.ir_builder import IRBuilder
        from tvm.script.ir_builder import tirx as T

        lanes, n = self.lanes, self.chains * self.lanes
        with IRBuilder() as ib:
            with T.prim_func():
                T.func_name("main")
                T.func_attr({"global_symbol": "main", "tirx.noalias": True})
                x = T.arg("x", T.buffer((self.cores, n), "float32"))
                ab = T.arg("ab", T.buffer((2, lanes), "float32"))
                out = T.arg("out", T.buffer((self.cores, n), "float32"))
                with T.parallel(0, self.cores) as t:
                    acc = T.alloc_buffer((n,), "float32", scope="local")
                    for j in range(self.chains):
                        T.buffer_store(acc, x[t, T.ramp(j * lanes, 1, lanes)], [T.ramp(j * lanes, 1, lanes)])
                    a = ab[0, T.ramp(0, 1, lanes)]
                    b = ab[1, T.ramp(0, 1, lanes)]
                    with T.serial(0, self.iterations):
                        for j in range(self.chains):
                            slot = T.ramp(j * lanes, 1, lanes)
                            T.buffer_store(acc, acc[slot] * a + b, [slot])
                    for j in range(self.chains):
                        T.buffer_store(out, acc[T.ramp(j * lanes, 1, lanes)], [t, T.ramp(j * lanes, 1, lanes)])
        return ib.get()

    def describe(self) -> str:
        return f"fp32 FMA chains: {self.chains} x {self.lanes} lanes x {self.iterations} steps on {self.cores} cores"


class _MeasurementOnly(Space):
    """A space of kernels that are measured but never searched: no sampling, moves or encoding."""

    def sample(self, rng: np.random.Generator) -> Config:
        raise SpaceError(f"{type(self).__name__} is measured during calibration, not searched")

    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        raise SpaceError(f"{type(self).__name__} is measured during calibration, not searched")

    @property
    def encoding_size(self) -> int:
        return 0

    def encode(self, config: Config) -> np.ndarray:
        return np.zeros(0, dtype=np.float32)


class PeakBuilder(KernelBuilder):
    """Builds the :class:`FmaChain` kernel (its workload is its kernel: the config is empty)."""

    def apply(self, config: Config):
        import tvm

        return tvm.IRModule({"main": self.workload.prim_func()})


class PeakKernel(_MeasurementOnly):
    """The :class:`FmaChain` kernel of the target; its one config is ``{}``."""

    name = "fma-peak"
    builder_class = PeakBuilder

    def __init__(self, target: Target, iterations: int = PEAK_ITERATIONS, chains: int | None = None):
        # As many chains as the register file holds: 24 on AVX-512 (32 registers); 12 on AVX2, where 24 chains
        # in 16 registers spill and measured half the machine's peak. ``chains`` overrides it
        # (bench/bench_peak.py measures whether more or fewer reach more).
        most = target.vector_registers - PEAK_SPARE_REGISTERS
        chains = min(PEAK_CHAINS, most) if chains is None else integer("chains", chains, minimum=1, maximum=most)
        iterations = integer("iterations", iterations, minimum=1)
        super().__init__(FmaChain(target.vector_lanes_fp32, target.num_cores, iterations, chains,
                                  suite="calibration", name="fma-peak"), target)

    def check(self, config: Config) -> None:
        if len(config):
            raise SpaceError("the peak kernel has no knobs: its config is {}")


# -- one microkernel in isolation -------------------------------------------------------------------
def benchmark_workload(mk: Microkernel, lanes: int, cores: int) -> Conv2d:
    """The matching problem of a microkernel: one output tile per core, ``C = 512 * c`` (``T_{512,c}``)."""
    return Conv2d(N=cores, C=BENCH_REUSE * mk.c, H=mk.h + mk.r - 1, W=mk.w + mk.s - 1, F=lanes * mk.vec,
                  R=mk.r, S=mk.s, stride=1, padding=0, suite="microkernel", name=mk.label)


def benchmark_repeats(mk: Microkernel, fma_per_core_s: float) -> int:
    """Repetitions of the same tile per call, so that one call keeps each core busy ~150 microseconds."""
    fmas = mk.fmas(1) * BENCH_REUSE  # vector FMAs of one tile
    return max(1, math.ceil(BENCH_TARGET_SECONDS * fma_per_core_s / fmas))


class MicrokernelBenchmarkBuilder(KernelBuilder):
    """Builds a :class:`MicrokernelBenchmark`: the tile ``repeats`` times per call, every tensor pre-packed."""

    def plan(self, config: Config) -> Plan:
        space = self.space
        mk, lanes, cores, repeats = space.microkernel, self.target.vector_lanes_fp32, self.target.num_cores, \
            config["repeats"]
        sizes = (("f", mk.vec), ("y", mk.h), ("x", mk.w), ("rc", mk.c), ("ry", mk.r), ("rx", mk.s))
        stack = (("n", cores), (REPEAT, repeats)) if repeats > 1 else (("n", cores),)
        return Plan("conv2d", sizes, None, BENCH_REUSE, stack, (0, 1) if cores > 1 else (0, 0), lanes,
                    packing=ALL_PACKED)

    def apply(self, config: Config):
        import tvm

        self.space.check(config)
        return tvm.IRModule({"main": build_prim_func(self.workload, self.plan(config))})

    def kernel_arguments(self, config: Config, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        wl, lanes = self.workload, self.target.vector_lanes_fp32
        packed_data, packed_kernel = pack_conv2d(wl, lanes, *inputs)
        out = np.zeros((wl.N, vector_blocks(wl.F, lanes), wl.OH, wl.OW, lanes), dtype="float32")
        return [packed_data, packed_kernel, out]

    def canonical_output(self, config: Config, arguments: Sequence[np.ndarray]) -> np.ndarray:
        return unpack_conv2d(self.workload, arguments[-1]) / config["repeats"]


class MicrokernelBenchmark(_MeasurementOnly):
    """One microkernel and its reuse loop on :func:`benchmark_workload`, the tile repeated per call.

    A config is ``{"repeats": n}``: the tile is computed ``n`` times per call
    (accumulating), so the kernel's output is ``n`` times the convolution; the
    check compares it divided by ``n``. The throughput of a record of this
    space counts one convolution per call: multiply by ``repeats``
    (:func:`microkernel_gflops`).
    """

    name = "microkernel-benchmark"
    builder_class = MicrokernelBenchmarkBuilder

    def __init__(self, mk: Microkernel, target: Target):
        super().__init__(benchmark_workload(mk, target.vector_lanes_fp32, target.num_cores), target)
        self.microkernel = mk

    def check(self, config: Config) -> None:
        if set(config) != {"repeats"} or not isinstance(config["repeats"], int) or config["repeats"] < 1:
            raise SpaceError(f"a microkernel benchmark config is {{'repeats': n >= 1}}, got {config!r}")


def microkernel_gflops(record: Record, space: MicrokernelBenchmark) -> float | None:
    """GFLOP/s of a benchmark record: every repeat of the tile counts."""
    if not record.ok or not record.latency_s:
        return None
    return record.config["repeats"] * space.workload.flops / record.latency_s / 1e9


@dataclass
class CalibrationResult:
    """What :func:`calibrate` did: the catalogue, and whether it measured anything."""

    catalogue: Catalogue
    path: Path
    measured: int  # microkernels measured by this call (0: reused from the cache)
    reused: bool
    seconds: float


def calibrate(target: Target | str | None = None, *, quick: bool = False, paper: bool = False,
              threshold: float = DEFAULT_THRESHOLD,
              force: bool = False, cache_dir: str | Path | None = None, progress: bool = True,
              protocol: TimingProtocol | None = None, rules: EnumerationRules | None = None,
              chunk: int = 16, timeout: float = 120.0) -> CalibrationResult:
    """Measure (or reuse) this machine's microkernel catalogue; see the module docs.

    Args:
        quick: measure the small ``--quick`` subset (CI); a stored full catalogue also answers it.
        paper: measure seed 003's unpruned enumeration (``r, s`` in 1, 3, 5, 7; ``c`` in 1..16; ~2000
            candidates, about 2.5x the default's time).
        threshold: fraction of the measured peak a microkernel needs to be kept (stored as the default).
        force: re-measure even if a catalogue for this machine is stored.
        cache_dir: where catalogues live (default :func:`default_cache_dir`), or a ``.json`` file path.
        rules: override the enumeration (default :meth:`EnumerationRules.for_target`); a stored
            catalogue is reused only if it was measured with the same rules.
        chunk: candidates built together before they are timed one by one.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold is a fraction of the peak in [0, 1], got {threshold!r}")
    if quick and paper:
        raise ValueError("choose quick or paper, not both")
    target = resolve_target(target)
    if target.kind != "llvm":
        raise ValueError(f"microkernel calibration needs an LLVM CPU target, got {target.kind!r}")
    path = catalogue_path(target, cache_dir)
    t_start = time.monotonic()
    if path.exists() and not force:
        try:
            stored = Catalogue.load(path)
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            log.warning("ignoring unreadable catalogue %s (%s); re-calibrating", path, exc)
        else:
            answers = stored.rules == rules if rules is not None else stored.satisfies(quick, paper)
            if stored.fingerprint == target.fingerprint and answers:
                if stored.threshold != threshold:
                    stored = dataclasses.replace(stored, threshold=threshold)
                    stored.save(path)
                return CalibrationResult(stored, path, 0, True, time.monotonic() - t_start)

    default_rules = EnumerationRules.for_target(target, quick=quick, paper=paper)
    rules = rules or default_rules
    candidates = enumerate_microkernels(rules)
    if not candidates:
        raise ValueError(f"the enumeration rules {rules} allow no microkernel")
    mode = "quick" if quick else "paper" if paper else "full"
    if rules != default_rules:
        mode = "custom"
    protocol = protocol or TimingProtocol()
    entries, peak = _measure_all(target, candidates, protocol, progress, chunk, timeout, threshold)
    catalogue = Catalogue(
        fingerprint=target.fingerprint, target_label=target.label, lanes=target.vector_lanes_fp32,
        registers=target.vector_registers, peak_gflops=peak, mode=mode, rules=rules,
        entries=tuple(entries), threshold=threshold, created=time.time(),
        calibration_s=time.monotonic() - t_start,
    )
    catalogue.save(path)
    kept = len(catalogue.kept())
    log.info("calibrated %d microkernels in %.0f s: peak %.1f GFLOP/s, %d kept at >= %.0f %%; saved to %s",
             len(entries), catalogue.calibration_s, peak, kept, 100 * threshold, path)
    return CalibrationResult(catalogue, path, len(entries), False, time.monotonic() - t_start)


def stored_or_quick_catalogue(target: Target | str | None = None, cache_dir: str | Path | None = None, *,
                              auto_calibrate: bool = True, progress: bool = True) -> Catalogue:
    """This machine's stored catalogue; a quick one measured now (and stored) if there is none.

    The first-use path of the microkernel env and of ``tensorgym tune --space microkernel``: a
    machine that was never calibrated gets the quick catalogue (22 microkernels, about 10 seconds
    on 2 cores, with a progress bar and a note on how to run the full calibration). With
    ``auto_calibrate=False`` the :class:`~tensorgym.spaces.microkernel.CatalogueMissing` of
    :func:`~tensorgym.spaces.microkernel.load_catalogue` is raised instead; it names the command.
    """
    target = resolve_target(target)
    try:
        return load_catalogue(target, cache_dir)
    except CatalogueMissing:
        if not auto_calibrate:
            raise
    log.warning("this machine has no microkernel catalogue: measuring a quick one now (about 10 s); "
                "`tensorgym microkernels calibrate` measures the full one (about 4 minutes)")
    return calibrate(target, quick=True, cache_dir=cache_dir, progress=progress).catalogue


def _measure_all(target: Target, candidates: Sequence[Microkernel], protocol: TimingProtocol, progress: bool,
                 chunk: int, timeout: float, threshold: float) -> tuple[list[CatalogueEntry], float]:
    """The peak, the candidates (built ``chunk`` at a time in a pool, then timed one by one), the peak again.

    Noise on a shared machine only ever slows a kernel down, so the peak is the
    best of the peak measurements (taken again while a microkernel beats it),
    and a candidate that misses the threshold is measured a second time and
    keeps its better result. A calibration on a machine that stays busy still
    under-rates microkernels: calibrate on a quiet machine.
    """
    bar = None
    with Measurer(target, protocol=protocol, build_timeout=timeout, run_timeout=timeout) as measurer:
        try:
            peak = _peak(measurer, target)
            log.info("measured fp32 FMA peak: %.1f GFLOP/s on %d cores", peak, target.num_cores)
            fma_per_core_s = peak * 1e9 / (2 * target.vector_lanes_fp32) / target.num_cores
            spaces = {mk: MicrokernelBenchmark(mk, target) for mk in candidates}
            configs = {mk: Config({"repeats": benchmark_repeats(mk, fma_per_core_s)}) for mk in candidates}
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=len(candidates), desc="microkernels", unit="kernel", dynamic_ncols=True)
            results: dict[Microkernel, CatalogueEntry] = {}
            best = [0.0]

            def measured(entry: CatalogueEntry) -> None:
                if entry.gflops:
                    best[0] = max(best[0], entry.gflops)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"best {100 * best[0] / peak:.0f} % of {peak:.0f} GFLOP/s", refresh=False)

            for entry in _measure_batch(measurer, candidates, spaces, configs, chunk, measured):
                results[entry.microkernel] = entry
            # A microkernel cannot beat the FMA peak: if one did, the peak measurement was disturbed.
            peak = max(peak, _peak(measurer, target))
            for _ in range(PEAK_RETRIES):
                if best[0] <= peak:
                    break
                peak = max(peak, _peak(measurer, target))
            if best[0] > peak:
                log.warning("the best microkernel (%.1f GFLOP/s) beat every peak measurement (%.1f); the machine was "
                            "busy while the peak was measured. Using the microkernel as the peak.", best[0], peak)
                peak = best[0]
            retry = [mk for mk, e in results.items() if e.status == "ok" and e.gflops < threshold * peak]
            if retry:
                log.info("re-measuring %d microkernels below %.0f %% of peak (noise only slows kernels down)",
                         len(retry), 100 * threshold)
                if bar is not None:
                    bar.total += len(retry)
                    bar.set_description("microkernels (second chance)")
                for entry in _measure_batch(measurer, retry, spaces, configs, chunk, measured):
                    first = results[entry.microkernel]
                    if entry.status == "ok" and entry.gflops > (first.gflops or 0.0):
                        results[entry.microkernel] = entry
            return [results[mk] for mk in candidates], peak
        finally:
            if bar is not None:
                bar.close()


def time_microkernels(microkernels: Sequence[Microkernel], target: Target | str | None = None, *,
                      rounds: int = 2, protocol: TimingProtocol | None = None,
                      timeout: float = 120.0) -> list[tuple[float, list[CatalogueEntry]]]:
    """Time chosen microkernels as the calibration does, whether or not its register rules allow them: per round,
    the FMA peak measured around them and one entry per microkernel (its GFLOP/s on all cores, or why it failed).
    Rounds repeat the whole set, so a busy stretch shows as a round that disagrees. Nothing is stored."""
    rounds = integer("rounds", rounds, minimum=1)
    if not microkernels:
        raise ValueError("no microkernel to time")
    target = resolve_target(target)
    if target.kind != "llvm":
        raise ValueError(f"timing microkernels needs an LLVM CPU target, got {target.kind!r}")
    out = []
    for _ in range(rounds):  # a second chance only re-times what the threshold (0 here) would drop: none
        entries, peak = _measure_all(target, list(microkernels), protocol or TimingProtocol(), False, 16, timeout, 0.0)
        out.append((peak, entries))
    return out


def _peak(measurer: Measurer, target: Target, tries: int = 3) -> float:
    """The FMA peak kernel measured once more (checked every time: it is cheap).

    A measurement the measurer knows was taken while other processes took the
    cores (``Record.busy``) is taken again, up to ``tries`` times in all: a peak
    measured on a busy machine under-rates every microkernel compared with it.
    """
    space = PeakKernel(target)
    best = None
    for _ in range(tries):
        record = measurer.measure(space, [Config({})], check=best is None)[0]
        if not record.ok:
            raise RuntimeError(f"measuring the FMA peak failed ({record.status}): {record.error[:800]}")
        best = record if best is None or record.gflops > best.gflops else best
        if not record.busy:
            return float(record.gflops)
    log.warning("the FMA peak was measured while other processes took %.0f %% of the cores: %.1f GFLOP/s "
                "under-rates this machine; calibrate on a quiet machine", 100 * (best.contention or 0), best.gflops)
    return float(best.gflops)


def _measure_batch(measurer: Measurer, candidates: Sequence[Microkernel], spaces, configs, chunk: int, on_entry):
    for start in range(0, len(candidates), chunk):
        batch = candidates[start:start + chunk]
        records = measurer.measure_pairs([(spaces[mk], configs[mk]) for mk in batch])
        for mk, record in zip(batch, records):
            entry = CatalogueEntry(mk, record.status.value, microkernel_gflops(record, spaces[mk]),
                                   record.latency_s, record.error[:500])
            on_entry(entry)
            yield entry
