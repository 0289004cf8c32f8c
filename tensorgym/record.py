"""The result of measuring one config: the unit the database stores."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from .spaces.base import Config


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

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "workload": self.workload, "target": self.target, "space": self.space,
            "config": self.config.to_json(), "status": self.status.value, "latency_s": self.latency_s,
            "latency_cv": self.latency_cv, "samples": list(self.samples), "number": self.number,
            "gflops": self.gflops, "build_s": self.build_s, "run_s": self.run_s, "wall_s": self.wall_s,
            "error": self.error,
            "created": self.created,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Record":
        return Record(
            workload=data["workload"], target=data["target"], space=data["space"],
            config=Config.from_json(data["config"]), status=Status(data["status"]),
            latency_s=data.get("latency_s"), latency_cv=data.get("latency_cv"),
            samples=tuple(data.get("samples") or ()), number=int(data.get("number") or 0),
            gflops=data.get("gflops"), build_s=float(data.get("build_s") or 0.0),
            run_s=float(data.get("run_s") or 0.0), wall_s=float(data.get("wall_s") or 0.0),
            error=data.get("error") or "",
            created=float(data.get("created") or 0.0), id=data.get("id"),
        )


def summarize_samples(samples: list[float]) -> tuple[float, float]:
    """(median, coefficient of variation) of timing samples."""
    ordered = sorted(samples)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
    mean = sum(ordered) / n
    var = sum((s - mean) ** 2 for s in ordered) / (n - 1) if n > 1 else 0.0
    return median, (math.sqrt(var) / mean if mean > 0 else 0.0)
