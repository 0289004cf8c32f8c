"""Cheap stand-ins for the measurer, for unit tests of search logic.

:class:`SyntheticEvaluator` answers configs with records whose GFLOP/s come
from a formula instead of a compiled kernel, with the same interface as
:class:`tensorgym.evaluator.Evaluator` (``space``, ``lookup``, ``evaluate``,
``measured``, ``reused``). Tests that check what an agent *does* (budgets,
determinism, moves) use it; tests that check what a kernel *is* use the real
measurer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tensorgym.record import Record, Status
from tensorgym.spaces import Config, Space, TilesSpace
from tensorgym.target import local_cpu
from tensorgym.tuner import Tuner
from tensorgym.workloads import matmul


def peak_at(space: TilesSpace, optimum: Config, peak: float = 100.0) -> Callable[[Config], float]:
    """A smooth landscape: ``peak`` GFLOP/s at ``optimum``, halving per unit of coordinate distance."""
    target = space.encode(optimum)
    scale = np.array([max(1, len(c.choices) - 1) for c in space.coordinates], dtype=float)

    def perf(config: Config) -> float:
        distance = np.abs((space.encode(config) - target) * scale).sum()
        return float(peak * 0.5 ** distance)

    return perf


class SyntheticEvaluator:
    """An Evaluator whose measurements are ``perf(config)`` GFLOP/s (``None``: a failed build)."""

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


def small_matmul_space() -> TilesSpace:
    return TilesSpace(matmul(64, 64, 64, name="mm64"), local_cpu())


def synthetic_tuner(space: TilesSpace | None = None, perf: Callable[[Config], float | None] | None = None,
                    budget: int | None = 64, time_budget: float | None = None) -> Tuner:
    """A Tuner over a synthetic landscape (default: a peak at a fixed config of a 64^3 matmul)."""
    space = space or small_matmul_space()
    if perf is None:
        perf = peak_at(space, space.sample(np.random.default_rng(1234)))
    return Tuner(SyntheticEvaluator(space, perf), budget=budget, time_budget=time_budget)  # type: ignore[arg-type]


class WrongMatmulSpace(TilesSpace):
    """A tiles space whose kernels skip the last step of the reduction: deliberately wrong results."""

    def apply(self, config: Config):
        import tvm
        from tvm import te

        wl = self.workload
        a = te.placeholder((wl.M, wl.K), wl.dtype, name="A")
        b = te.placeholder((wl.K, wl.N), wl.dtype, name="B")
        k = te.reduce_axis((0, wl.K - 1), name="k")  # the bug
        c = te.compute((wl.M, wl.N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
        return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def run_search(agent, tuner: Tuner, seed: int = 0):
    """``agent.tune`` without an env: search ``tuner`` with the agent and return the TuningResult."""
    extra = agent.search(tuner, np.random.default_rng(seed), seed) or {}
    return tuner.result(agent.name, seed, **extra)


def synthetic_record(space: Space, config: Config, gflops: float | None) -> Record:
    """The record a measurement of ``gflops`` GFLOP/s (None: a failed build) would give."""
    wl = space.workload
    if gflops is None:
        return Record(wl.key, space.target.fingerprint, space.name, config, Status.BUILD_ERROR,
                      error="synthetic failure", wall_s=0.01)
    latency = wl.flops / (gflops * 1e9)
    return Record(wl.key, space.target.fingerprint, space.name, config, Status.OK, latency_s=latency,
                  latency_cv=0.0, samples=(latency,), number=1, gflops=gflops, wall_s=0.01)


def smooth_perf(space: TilesSpace, seed: int = 0, optimum: Config | None = None) -> Callable[[Config], float]:
    """A landscape every config of which is within 13x of its peak, 100 GFLOP/s at ``optimum`` (default: a
    config drawn with ``seed``): 100 / (1 + L1 index distance / 4)."""
    target = space.encode(optimum if optimum is not None else space.sample(np.random.default_rng(seed)))
    scale = np.array([max(1, len(c.choices) - 1) for c in space.coordinates], dtype=float)
    return lambda config: float(100.0 / (1.0 + np.abs((space.encode(config) - target) * scale).sum() / 4.0))


class SyntheticMeasurer:
    """A Measurer (``measure(space, configs, on_record=...)``) whose GFLOP/s come from :func:`smooth_perf`
    of each space; ``interrupt_after`` raises KeyboardInterrupt once that many configs were measured."""

    def __init__(self, interrupt_after: int | None = None):
        self.measured: list[Config] = []
        self.interrupt_after = interrupt_after
        self._perf: dict[str, Callable[[Config], float]] = {}

    def measure(self, space: Space, configs: Sequence[Config], *, check: bool = True, on_record=None) -> list[Record]:
        perf = self._perf.setdefault(space.workload.key, smooth_perf(space))
        out = []
        for config in configs:
            if self.interrupt_after is not None and len(self.measured) >= self.interrupt_after:
                raise KeyboardInterrupt
            self.measured.append(config)
            record = synthetic_record(space, config, perf(config))
            if on_record is not None:
                on_record(record)
            out.append(record)
        return out

    def close(self) -> None:
        pass
