"""What a network tuning run returns: per-task bests and the estimated network latency over time.

:class:`NetworkResult` is to a network what :class:`~tensorgym.tuner.TuningResult`
is to one workload: the run's timeline (one :class:`NetworkTrial` per trial,
with the estimated network latency ``f = sum_i weight_i * m_i`` after it),
its rounds, and one :class:`TaskResult` per layer (weight, best latency, the
candidate it came from, trials spent). ``estimate_at`` reads the timeline
after N trials or T seconds of tuning clock; ``trials_to_reach`` tells how
many trials a run needed to reach a latency (e.g. another scheduler's final).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

_Trial = TypeVar("_Trial")


def last_within(timeline: Sequence[_Trial], trials: int | None = None, seconds: float | None = None) -> _Trial | None:
    """The last trial of a run's timeline within its first ``trials`` trials and/or ``seconds`` of tuning clock
    (None: none was). What a layer run's best-so-far and a network run's estimate "after N trials or T seconds"
    both read; a timeline is any list of trials with ``index`` and ``elapsed_s``, in order."""
    last = None
    for trial in timeline:
        if (trials is not None and trial.index > trials) or (seconds is not None and trial.elapsed_s > seconds):
            break
        last = trial
    return last


@dataclass(frozen=True)
class NetworkTrial:
    """One trial of a network run."""

    index: int  # 1-based, over the whole run
    elapsed_s: float  # network tuning clock when the result was known
    task: int
    candidate: int
    status: str
    latency_s: float | None  # of this trial's kernel (None: it failed)
    estimate_s: float | None  # estimated network latency after this trial (None: a live task has no kernel yet)
    fresh: bool  # measured now (True) or answered from the database

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RoundLog:
    """One round a scheduler gave to a task: which candidates, how many trials, the estimate after it."""

    index: int  # 1-based
    task: int
    candidates: tuple[int, ...]
    trials: int
    elapsed_s: float
    estimate_s: float | None
    warmup: bool = False

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "candidates": list(self.candidates)}


@dataclass
class TaskResult:
    """One layer of the network at the end of a run."""

    label: str
    workload_key: str
    weight: float
    gflop: float
    candidates: list[str]
    best_latency_s: float | None = None
    best_latency_cv: float | None = None
    best_config: dict[str, Any] | None = None
    best_candidate: int | None = None
    trials: int = 0
    rounds: int = 0
    candidate_trials: list[int] = field(default_factory=list)
    candidate_best_s: list[float | None] = field(default_factory=list)
    dead: bool = False
    note: str = ""

    @property
    def weighted_s(self) -> float | None:
        """weight x best latency: this layer's share of ``f`` in seconds."""
        return None if self.best_latency_s is None else self.weight * self.best_latency_s

    @property
    def best_candidate_name(self) -> str | None:
        return None if self.best_candidate is None else self.candidates[self.best_candidate]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NetworkResult:
    """A network tuning run: its timeline, rounds and per-task results (see the module docs)."""

    scheduler: str
    network: str
    space: str
    target: str
    seed: int
    budget: int | None
    time_budget: float | None
    measure_per_round: int
    agent: str  # the search inside each task
    tasks: list[TaskResult] = field(default_factory=list)
    trials: list[NetworkTrial] = field(default_factory=list)
    rounds: list[RoundLog] = field(default_factory=list)
    measured: int = 0  # trials compiled and timed in this run
    reused: int = 0  # trials answered from the database
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def estimate_s(self) -> float | None:
        """The final estimated network latency: sum of weight x best latency over the live tasks."""
        total = 0.0
        for task in self.tasks:
            if task.weight > 0:
                if task.best_latency_s is None:
                    return None
                total += task.weight * task.best_latency_s
        return total

    def estimate_at(self, trials: int | None = None, seconds: float | None = None) -> float | None:
        """The estimated network latency after the first ``trials`` trials and/or ``seconds`` of tuning clock."""
        trial = last_within(self.trials, trials, seconds)
        return None if trial is None else trial.estimate_s

    def trials_to_reach(self, latency_s: float) -> int | None:
        """The first trial after which the estimate is at most ``latency_s`` (None: never)."""
        for trial in self.trials:
            if trial.estimate_s is not None and trial.estimate_s <= latency_s * (1 + 1e-12):
                return trial.index
        return None

    def seconds_to_reach(self, latency_s: float) -> float | None:
        """Seconds of tuning clock until the estimate is at most ``latency_s`` (None: never)."""
        index = self.trials_to_reach(latency_s)
        return None if index is None else self.trials[index - 1].elapsed_s

    def share(self, task: int) -> float | None:
        """Task ``task``'s share of the estimated network latency."""
        total, weighted = self.estimate_s, self.tasks[task].weighted_s
        return None if not total or weighted is None or not math.isfinite(total) else weighted / total

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tasks"] = [t.to_json() for t in self.tasks]
        data["trials"] = [t.to_json() for t in self.trials]
        data["rounds"] = [r.to_json() for r in self.rounds]
        data["estimate_s"] = self.estimate_s
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> "NetworkResult":
        data = dict(data)
        data.pop("estimate_s", None)
        tasks = [TaskResult(**t) for t in data.pop("tasks")]
        trials = [NetworkTrial(**t) for t in data.pop("trials")]
        rounds = [RoundLog(**{**r, "candidates": tuple(r["candidates"])}) for r in data.pop("rounds")]
        return NetworkResult(**data, tasks=tasks, trials=trials, rounds=rounds)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1))
