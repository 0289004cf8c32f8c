"""The result of measuring one config: the unit the database stores."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from .config import Config

# A timing round in which the timing process lost more than this share of its cores' time to other
# processes was taken on a busy machine (see tensorgym.measure.contention, which uses the same value).
BUSY_SHARE = 0.02


class Status(str, Enum):
    """What happened to a candidate kernel.

    Every status but ``infra_error`` is final: the database answers the config with it from then
    on. ``infra_error`` records say that the measurement failed for a reason outside the kernel;
    the :class:`~tensorgym.evaluator.Evaluator` measures such a config again the next time it is
    asked for, and the new record replaces the old one.
    """

    OK = "ok"
    BUILD_ERROR = "build_error"  # the schedule could not be applied or compiled
    RUNTIME_ERROR = "runtime_error"  # it crashed the runner process or raised while running
    TIMEOUT = "timeout"  # building or running did not finish in time
    WRONG_RESULT = "wrong_result"  # it ran, but its output differs from the NumPy reference
    # The machine failed, not the kernel (an external kill or the OOM killer, a full or failing disk,
    # a runner that keeps dying before it reaches a kernel): the config is measured again later.
    INFRA_ERROR = "infra_error"

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

    How the latency was measured: ``timing`` is ``"full"`` (the whole timing
    protocol) or ``"short"`` (one sample: the kernel was already several times
    slower than the fastest one known, or its checked call alone took ten times
    as long and is the sample; see :mod:`tensorgym.measure.protocol`). A short
    record is a correct kernel measured as slow: searches learn from it like any
    other, and it is completed (timed in full) when it would become a run's best.
    ``contention`` is the largest share of the cores' time that other processes
    took while the samples were taken (None: not known); above
    :data:`BUSY_SHARE` the record was timed on a busy machine (:attr:`busy`).
    ``dropped`` counts samples set aside because they were taken under contention.
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
    timing: str = "full"
    contention: float | None = None
    dropped: int = 0
    device_state: tuple[tuple[str, float], ...] = ()
    id: int | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def final(self) -> bool:
        """Whether the record answers its config for good (every status but ``infra_error``)."""
        return self.status is not Status.INFRA_ERROR

    @property
    def busy(self) -> bool:
        """Timed while other processes took more than :data:`BUSY_SHARE` of the cores."""
        return self.contention is not None and self.contention > BUSY_SHARE

    @property
    def short(self) -> bool:
        """Timed with one sample only, or stopped after its checked call (a kernel far slower than the best known)."""
        return self.timing == "short"

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
