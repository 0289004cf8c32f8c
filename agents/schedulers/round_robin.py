"""Round-robin: every live task in turn, one round each (Ansor's ``"round-robin"`` strategy)."""

from __future__ import annotations

import numpy as np

from tensorgym.tuner import Tuner

from .base import TaskScheduler


class RoundRobinScheduler(TaskScheduler):
    """Gives rounds to the live tasks in network order, cyclically, skipping dead ones.

    Each round is split evenly over all the task's live candidates. The
    reference the other schedulers are measured against: how many trials they
    need to reach round-robin's final network latency.
    """

    name = "round-robin"

    def start(self, tuner: Tuner, rng: np.random.Generator) -> None:
        self._last = -1

    def next_task(self, tuner: Tuner, rng: np.random.Generator) -> int | None:
        live = tuner.live_tasks
        if not live:
            return None
        task = next((i for i in live if i > self._last), live[0])
        self._last = task
        return task
