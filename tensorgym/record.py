"""The result of measuring one config: the unit the database stores."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from .config import Config


class Status(str, Enum):
    """What happened to a candidate kernel."""

    OK = "ok"
    BUILD_ERROR = "build_error"  # the schedule could not be applied or compiled
    RUNTIME_ERROR = "runtime_error"  # it crashed the runner process or raised while running
    TIMEOUT = "timeout"  # building or running did not finish in time
    WRONG_RESULT = "wrong_result"  # it ran, but its output differs from the NumPy reference

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Record:
    """One measured (workload, target, space, config).

    ``latency_s`` is the median of ``samples`` (seconds per kernel call, one
    sample per timing repeat, each the mean of ``number`` calls); ``latency_cv``
    is their coefficient of variation (std / mean). ``build_s`` is the compile
    time of this kernel in its builder process and ``run_s`` the wall time of
    its check and timing; ``wall_s`` is what the measurement added to the wall
    clock of the run that made it (its share of the parallel build phase plus
    ``run_s``): tuning clocks charge it, also when a record is replayed.
    ``device_state`` holds what the runner read from the device while timing, as
    sorted ``(name, value)`` pairs (a GPU's SM and memory clocks in MHz, temperature,
    power, NVML's clock-event reasons; empty on a CPU): ``dict(record.device_state)``.
    """

    workload: str
    target: str
    space: str
    config: Config
    status: Status
    latency_s: float | None = None
    latency_cv: float | None = None
    samples: tuple[float, ...] = ()
    number: int = 0
    gflops: float | None = None
    build_s: float = 0.0
    run_s: float = 0.0
    wall_s: float = 0.0
    error: str = ""
    created: float = 0.0
    device_state: tuple[tuple[str, float], ...] = ()
    id: int | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def score(self) -> float:
        """GFLOP/s of a correct kernel, 0.0 otherwise (failed, or no throughput): what searches maximise."""
        return float(self.gflops) if self.ok and self.gflops else 0.0

    def with_id(self, record_id: int) -> "Record":
        return replace(self, id=record_id)


def summarize_samples(samples: list[float]) -> tuple[float, float]:
    """(median, coefficient of variation) of timing samples."""
    ordered = sorted(samples)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
    mean = sum(ordered) / n
    var = sum((s - mean) ** 2 for s in ordered) / (n - 1) if n > 1 else 0.0
    return median, (math.sqrt(var) / mean if mean > 0 else 0.0)
