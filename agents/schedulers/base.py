"""The task-scheduler interface: ``scheduler.tune(network_env, budget=..., seed=...) -> TuningResult``.

A task scheduler shares one measurement budget among the tasks of a network
(and, in spaces with mapping candidates, among each task's candidates) to
minimise the estimated network latency ``f = sum_i weight_i * m_i``.
:class:`TaskScheduler` owns the loop every scheduler shares (the template
method, as :class:`~tensorgym.agents.SearchAgent` does for one workload):

1. build the run's :class:`~tensorgym.tuner.Tuner` from the
   network env (its tasks, spaces, database, measurer and inner search);
2. warm up: one round for every live task, in order, split over all its live
   candidates (Ansor's round-robin warm-up, ``t = (1, ..., 1)``; GTA's
   warm-up that measures every candidate once);
3. until the budget is spent or no task is alive: ask the subclass for the
   next task (:meth:`next_task`) and the candidates that share its round
   (:meth:`candidates`), run the round, tell the subclass (:meth:`on_round`).

Subclasses keep their per-run state in :meth:`start` (a scheduler object runs
one network at a time and can be reused). Everything is deterministic for a
seed (measured values aside): ties are broken by the ``rng`` made from it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from tensorgym.agents.base import _seed
from tensorgym.envs.network_env import unwrap_network_env
from tensorgym.tuner import RoundLog, Tuner, TuningCallback, TuningResult, check_budget


class TaskScheduler(ABC):
    """Gives rounds of measurements to a network's tasks (see the module docs).

    Attributes:
        name: the name it is listed under (``tensorgym.catalog.SCHEDULERS``).
    """

    name: str = ""

    def tune(self, env: gym.Env, budget: int | None = None, time_budget: float | None = None, seed: int = 0,
             measure_per_round: int | None = None,
             callback: TuningCallback | Sequence[TuningCallback] | None = None) -> TuningResult:
        """Tune the network of ``env`` (a network env, e.g. ``gym.make("Network-ResNet18-v0")``).

        ``budget`` counts trials over the whole network and ``time_budget`` seconds of tuning
        clock (at least one); ``measure_per_round`` defaults to Ansor's ``min(64, budget // tasks)``.
        Every measurement lands in the env's database: re-running with the same seed resumes.
        """
        base = unwrap_network_env(env)
        check_budget(budget, time_budget)
        seed = _seed(seed)
        tuner = base.tuner(budget=budget, time_budget=time_budget, measure_per_round=measure_per_round, seed=seed,
                           callback=callback, label=f"{self.name} {base.network.name}")
        try:
            self.schedule(tuner, np.random.default_rng(seed))
        finally:
            tuner.close()
        return tuner.result(self.name, **self.summary())

    def schedule(self, tuner: Tuner, rng: np.random.Generator) -> None:
        """Warm up, then give rounds until ``tuner.exhausted`` (the template; see the module docs)."""
        self.start(tuner, rng)
        for task in tuner.live_tasks:
            if tuner.exhausted:
                return
            if tuner.tasks[task].rounds == 0:
                self.on_round(tuner, tuner.run_round(task, self.warmup_candidates(tuner, task), warmup=True))
        while not tuner.exhausted:
            task = self.next_task(tuner, rng)
            if task is None:
                return
            self.on_round(tuner, tuner.run_round(task, self.candidates(tuner, task, rng)))

    # -- what subclasses decide ---------------------------------------------------------------
    def start(self, tuner: Tuner, rng: np.random.Generator) -> None:  # noqa: B027 - optional hook
        """Set up the per-run state (called once, before the warm-up)."""

    @abstractmethod
    def next_task(self, tuner: Tuner, rng: np.random.Generator) -> int | None:
        """The live task that gets the next round (None: stop)."""

    def warmup_candidates(self, tuner: Tuner, task: int) -> list[int]:
        """The candidates of ``task``'s warm-up round: all its live ones."""
        return tuner.tasks[task].live_candidates

    def candidates(self, tuner: Tuner, task: int, rng: np.random.Generator) -> list[int]:
        """The candidates that share ``task``'s round: by default all its live ones, evenly."""
        return tuner.tasks[task].live_candidates

    def on_round(self, tuner: Tuner, entry: RoundLog) -> None:  # noqa: B027 - optional hook
        """A round has ended (warm-up rounds included)."""

    def summary(self) -> dict[str, Any]:
        """The scheduler's settings, for the result's ``extra``."""
        return {}
