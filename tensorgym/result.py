"""What a tuning run returns: its timeline, its rounds, each task's best, and the run's best.

A layer is a network of one task, so one :class:`TuningResult` describes both
runs, and both read the same way:

* ``trials``: one :class:`Trial` per trial, in order: the kernel it measured
  (task, candidate, config, status, GFLOP/s, latency) and the run's best so
  far after it. The run's best is its objective, the estimated network
  latency ``f = sum_i weight_i * m_i`` over the live tasks (``m_i``: the
  task's best latency), as ``best_latency_s``; and as a throughput,
  ``best_gflops``: the best kernel's GFLOP/s for one task, the layers' FLOPs
  (weight x FLOPs) over ``f`` for several. Until every live task has a correct
  kernel there is no estimate (``None``) and the throughput is 0.
* ``rounds``: one :class:`RoundLog` per round a scheduler gave (one for a
  layer run driven by its strategy).
* ``tasks``: one :class:`TaskResult` per task (weight, best latency and
  config, the mapping candidate it came from, trials spent).
* ``best_at`` / ``latency_at`` read the timeline after N trials or T seconds of
  tuning clock; ``trials_to_reach`` tells how many trials a run needed to reach
  a throughput (a share of its own final best, or another run's final).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from .config import Config

_Trial = TypeVar("_Trial")


def last_within(timeline: Sequence[_Trial], trials: int | None = None, seconds: float | None = None) -> _Trial | None:
    """The last trial of a run's timeline within its first ``trials`` trials and/or ``seconds`` of tuning clock
    (None: none was); a timeline is any list of trials with ``index`` and ``elapsed_s``, in order."""
    last = None
    for trial in timeline:
        if (trials is not None and trial.index > trials) or (seconds is not None and trial.elapsed_s > seconds):
            break
        last = trial
    return last


@dataclass(frozen=True)
class Trial:
    """One measured config of a tuning run, and the run's best after it."""

    index: int  # 1-based trial number, over the whole run
    elapsed_s: float  # tuning clock when the trial's result was known
    config: Config | None  # None: a trial of a search tensorgym cannot express as a config (MetaSchedule's)
    status: str
    gflops: float | None  # of this trial's kernel (None: it failed)
    best_gflops: float  # the run's throughput so far (0 until every live task has a correct kernel)
    fresh: bool  # measured now (True) or answered from the database (False)
    task: int = 0  # which task of the run (a layer run has one)
    candidate: int = 0  # which mapping candidate of the task
    latency_s: float | None = None  # of this trial's kernel (None: it failed)
    best_latency_s: float | None = None  # the run's estimated latency so far (None: a live task has no kernel yet)

    def to_json(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "config": self.config.to_json() if self.config is not None else None}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Trial":
        return Trial(**{**data, "config": Config.from_json(data["config"]) if data["config"] is not None else None})


@dataclass(frozen=True)
class RoundLog:
    """One round given to a task: which candidates, how many trials, the run's estimated latency after it."""

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
    """One task (a layer) of the run at its end."""

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
        """weight x best latency: this task's share of the run's estimated latency, in seconds."""
        return None if self.best_latency_s is None else self.weight * self.best_latency_s

    @property
    def best_candidate_name(self) -> str | None:
        return None if self.best_candidate is None else self.candidates[self.best_candidate]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TuningResult:
    """What a tuning run returns (see the module docs): a layer's run, or a network's."""

    agent: str  # what tuned it: the agent, or a network's task scheduler
    workload: str  # label of the layer (e.g. ResNet-50/R5), or the network's name
    workload_key: str  # the layer's key, or the network's (its tasks and weights)
    space: str
    target: str
    seed: int
    budget: int | None
    time_budget: float | None
    trials: list[Trial] = field(default_factory=list)
    best_config: Config | None = None  # the best kernel's config (a network: each task's, in ``tasks``)
    best_gflops: float = 0.0
    best_latency_s: float | None = None  # the best kernel's latency; a network's estimated latency
    best_latency_cv: float | None = None
    measured: int = 0  # trials compiled and timed in this run (simulated: first answers of a landscape)
    reused: int = 0  # trials answered from the database
    simulated: bool = False  # the measurements were simulated: answered from a landscape, nothing compiled
    wall_s: float = 0.0  # real wall time of the run
    extra: dict[str, Any] = field(default_factory=dict)
    tasks: list[TaskResult] = field(default_factory=list)
    rounds: list[RoundLog] = field(default_factory=list)
    search: str = ""  # the search inside each task (a layer run: the agent's own)
    measure_per_round: int | None = None  # trials per round (None: a layer run's one round)

    def best_at(self, trials: int | None = None, seconds: float | None = None) -> float:
        """Best GFLOP/s within the first ``trials`` trials and/or ``seconds`` of tuning clock."""
        trial = last_within(self.trials, trials, seconds)
        return 0.0 if trial is None else trial.best_gflops

    def latency_at(self, trials: int | None = None, seconds: float | None = None) -> float | None:
        """The estimated latency within the first ``trials`` trials and/or ``seconds`` of tuning clock."""
        trial = last_within(self.trials, trials, seconds)
        return None if trial is None else trial.best_latency_s

    def trials_to_reach(self, fraction: float, gflops: float | None = None) -> int | None:
        """The first trial whose best-so-far reaches ``fraction`` of ``gflops`` (default: the run's final best)."""
        goal = fraction * (self.best_gflops if gflops is None else gflops)
        for trial in self.trials:
            if trial.best_gflops >= goal > 0:
                return trial.index
        return None

    def share(self, task: int) -> float | None:
        """Task ``task``'s share of the run's estimated latency."""
        total, weighted = self.best_latency_s, self.tasks[task].weighted_s
        return None if not total or weighted is None or not math.isfinite(total) else weighted / total

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data.update(best_config=self.best_config.to_json() if self.best_config else None,
                    extra=dict(self.extra), trials=[t.to_json() for t in self.trials],
                    tasks=[t.to_json() for t in self.tasks], rounds=[r.to_json() for r in self.rounds])
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> "TuningResult":
        data = dict(data)
        best = data.pop("best_config")
        trials = [Trial.from_json(t) for t in data.pop("trials")]
        tasks = [TaskResult(**t) for t in data.pop("tasks", [])]
        rounds = [RoundLog(**{**r, "candidates": tuple(r["candidates"])}) for r in data.pop("rounds", [])]
        return TuningResult(**data, best_config=Config.from_json(best) if best else None, trials=trials, tasks=tasks,
                            rounds=rounds)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1))
