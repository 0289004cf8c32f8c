"""Cheap stand-ins for the measurer, for unit tests of search logic.

:class:`SyntheticEvaluator` answers configs with records whose GFLOP/s come
from a formula instead of a compiled kernel, with the same interface as
:class:`tensorgym.evaluator.Evaluator` (``space``, ``lookup``, ``evaluate``,
``measured``, ``reused``). Tests that check what an agent *does* (budgets,
determinism, moves) use it; tests that check what a kernel *is* use the real
measurer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from tensorgym.evaluator import Evaluator
from tensorgym.measure import Measurer
from tensorgym.record import Record, Status
from tensorgym.spaces import Config, Space, TilesSpace
from tensorgym.spaces.tiles.builder import TilesBuilder
from tensorgym.target import constructed_cpu, resolve_target
from tensorgym.tuner import Trial, Tuner, TuningResult
from tensorgym.workloads import matmul


def peak_at(space: TilesSpace, optimum: Config, peak: float = 100.0) -> Callable[[Config], float]:
    """A smooth landscape: ``peak`` GFLOP/s at ``optimum``, halving per unit of coordinate distance."""
    target = space.encode(optimum)
    scale = np.array([max(1, len(c.choices) - 1) for c in space.coordinates], dtype=float)

    def perf(config: Config) -> float:
        distance = np.abs((space.encode(config) - target) * scale).sum()
        return float(peak * 0.5 ** distance)

    return perf


class SyntheticEvaluator(Evaluator):
    """An Evaluator whose measurements are ``perf(config)`` GFLOP/s (``None``: a failed build)."""

    database = None  # its records are kept here, in memory

    def __init__(self, space: Space, perf: Callable[[Config], float | None]):
        self.space = space
        self.perf = perf
        self.measured = 0
        self.reused = 0
        self._records: dict[Config, Record] = {}
        self.requests: list[Config] = []  # every config evaluate() was asked, in order

    def lookup(self, config: Config) -> Record | None:
        return self._records.get(config)

    def evaluate(self, configs: Sequence[Config]) -> list[Record]:
        out = []
        for config in configs:
            self.requests.append(config)
            record = self._records.get(config)
            if record is None:
                gflops = self.perf(config)
                wl = self.space.workload
                if gflops is None:
                    record = Record(wl.key, self.space.target.fingerprint, self.space.name, config,
                                    Status.BUILD_ERROR, error="synthetic failure", wall_s=0.01)
                else:
                    latency = wl.flops / (gflops * 1e9)
                    record = Record(wl.key, self.space.target.fingerprint, self.space.name, config, Status.OK,
                                    latency_s=latency, latency_cv=0.0, samples=(latency,), number=1,
                                    gflops=gflops, wall_s=0.01)
                self._records[config] = record
                self.measured += 1
            else:
                self.reused += 1
            out.append(record)
        return out


# Synthetic landscapes need no real CPU: their space is built for a constructed one, so that what the
# searches meet (the divisors, the features, the vector lanes) is the same whatever CPU runs the tests.
SYMBOLIC_CPU = constructed_cpu("znver4")


def small_matmul_space() -> TilesSpace:
    return TilesSpace(matmul(64, 64, 64, name="mm64"), SYMBOLIC_CPU)


def synthetic_tuner(space: TilesSpace | None = None, perf: Callable[[Config], float | None] | None = None,
                    budget: int | None = 64, time_budget: float | None = None) -> Tuner:
    """A Tuner over a synthetic landscape (default: a peak at a fixed config of a 64^3 matmul)."""
    space = space or small_matmul_space()
    if perf is None:
        perf = peak_at(space, space.sample(np.random.default_rng(1234)))
    return Tuner(SyntheticEvaluator(space, perf), budget=budget, time_budget=time_budget)  # type: ignore[arg-type]


class WrongMatmulBuilder(TilesBuilder):
    """Builds matmuls that skip the last step of the reduction: deliberately wrong results."""

    def apply(self, config: Config):
        import tvm
        from tvm import te

        wl = self.workload
        a = te.placeholder((wl.M, wl.K), wl.dtype, name="A")
        b = te.placeholder((wl.K, wl.N), wl.dtype, name="B")
        k = te.reduce_axis((0, wl.K - 1), name="k")  # the bug
        c = te.compute((wl.M, wl.N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
        return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


class WrongMatmulSpace(TilesSpace):
    """A tiles space whose kernels skip the last step of the reduction: deliberately wrong results."""

    builder_class = WrongMatmulBuilder


def run_search(agent, tuner: Tuner, seed: int = 0):
    """``agent.tune`` without an env: search ``tuner`` with the agent and return the TuningResult."""
    extra = tuner.run(agent, seed) or {}
    return tuner.result(agent.name, seed, **extra)


def synthetic_record(space: Space, config: Config, gflops: float | None) -> Record:
    """The record a measurement of ``gflops`` GFLOP/s (None: a failed build) would give."""
    wl = space.workload
    if gflops is None:
        return Record(wl.key, space.target.fingerprint, space.name, config, Status.BUILD_ERROR,
                      error="synthetic failure", wall_s=0.001, created=time.time())
    latency = wl.flops / (gflops * 1e9)
    return Record(wl.key, space.target.fingerprint, space.name, config, Status.OK, latency_s=latency,
                  latency_cv=0.0, samples=(latency,), number=1, gflops=gflops, wall_s=0.001, created=time.time())


def smooth_perf(space: TilesSpace, seed: int = 0, optimum: Config | None = None) -> Callable[[Config], float]:
    """A landscape every config of which is within 13x of its peak, 100 GFLOP/s at ``optimum`` (default: a
    config drawn with ``seed``): 100 / (1 + L1 index distance / 4)."""
    target = space.encode(optimum if optimum is not None else space.sample(np.random.default_rng(seed)))
    scale = np.array([max(1, len(c.choices) - 1) for c in space.coordinates], dtype=float)
    return lambda config: float(100.0 / (1.0 + np.abs((space.encode(config) - target) * scale).sum() / 4.0))


def smooth_gflops(space: Space, config: Config) -> float:
    """:func:`smooth_perf` of the space's workload (its optimum drawn with seed 0), as a measurer's landscape."""
    key = (space.workload.key, space.name)
    if key not in _SMOOTH:
        _SMOOTH[key] = smooth_perf(space)
    return _SMOOTH[key](config)


_SMOOTH: dict = {}


def synthetic_gflops(space: Space, config: Config) -> float:
    """A deterministic landscape over any config: GFLOP/s from a hash of the workload and config (1..100)."""
    import hashlib

    digest = hashlib.sha256(f"{space.workload.key}|{config.key}".encode()).digest()
    return 1.0 + 99.0 * int.from_bytes(digest[:4], "little") / 2**32


class SyntheticMeasurer(Measurer):
    """A :class:`~tensorgym.measure.Measurer` that compiles nothing and starts no process: each config
    "runs" at ``perf(space, config)`` GFLOP/s (``None``: a failed build). For tests of the layers above
    measuring (envs, schedulers, the command line, datasets, fuzzing) that must not spend minutes
    compiling; use it with a real :class:`~tensorgym.database.Database` to test what is stored and reused.
    ``measured`` lists every (workload key, config) it was asked to measure; ``interrupt_after`` raises
    KeyboardInterrupt once that many configs were measured (an interrupted run)."""

    def __init__(self, perf: Callable[[Space, Config], float | None] = synthetic_gflops, *,
                 interrupt_after: int | None = None, target=None, **_ignored):
        self.perf = perf
        self.interrupt_after = interrupt_after
        self.target = resolve_target(target)
        self.kernels_built = self.kernels_run = 0
        self.faults = {}
        self.measured: list[tuple[str, Config]] = []

    def close(self) -> None:
        pass

    def __del__(self):
        pass

    @property
    def runner_restarts(self) -> int:
        return 0

    def measure_pairs(self, kernels, *, check=True, on_record=None, incumbents=None):
        records = []
        for space, config in kernels:
            if self.interrupt_after is not None and len(self.measured) >= self.interrupt_after:
                raise KeyboardInterrupt
            self.measured.append((space.workload.key, config))
            record = synthetic_record(space, config, self.perf(space, config))
            self.kernels_built += 1
            self.kernels_run += 1
            if on_record is not None:
                on_record(record)
            records.append(record)
        return records


class CandidateTilesSpace(TilesSpace):
    """A tiles space with one mapping candidate per ``unroll`` choice, for scheduler tests.

    ``restricted(k)`` is the tiles space whose only unroll choice is the k-th: the same name, and its
    configs are configs of this space, so records are shared, as the candidate contract asks.
    """

    @property
    def candidates(self) -> tuple[str, ...]:
        return tuple(f"unroll{u}" for u in self.unroll_choices)

    def candidate_of(self, config: Config) -> int:
        return self.unroll_choices.index(config["unroll"])

    def restricted(self, candidate: int) -> TilesSpace:
        return TilesSpace(self.workload, self.target, unroll_choices=(self.unroll_choices[candidate],),
                          max_innermost=self.max_innermost)


def synthetic_result(agent: str, gflops: list[float], seed: int) -> TuningResult:
    """A TuningResult whose trials measured ``gflops`` in order, half a second apart (for boards and plots)."""
    trials, best = [], 0.0
    for i, g in enumerate(gflops):
        best = max(best, g)
        trials.append(Trial(i + 1, 0.5 * (i + 1), None, "ok", g, best, True))
    return TuningResult(agent, "w", "w", "tiles", "t", seed, len(gflops), None, trials, None, best)


def synthetic_default_measurers(monkeypatch, make: Callable[..., Measurer]) -> list[Measurer]:
    """Make the measurers of the process's default contexts with ``make(target=...)`` (a synthetic measurer class)
    for one test; returns the list of those started, filled as they start."""
    from tensorgym.context import DEFAULT_CONTEXTS

    started: list[Measurer] = []

    def factory(target):
        started.append(make(target=target))
        return started[-1]

    monkeypatch.setattr(DEFAULT_CONTEXTS, "measurer_factory", factory)
    return started
