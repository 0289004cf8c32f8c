"""MetaSchedule's simplified gradient task scheduler (the ``metaschedule-gradient`` scheduler).

TVM MetaSchedule's ``GradientBased`` task scheduler, a second reference
beside Ansor's: after the round-robin warm-up, each round goes to the live
task with the largest::

    g_i = w_i * ( alpha * (m_i[n - 1 - w] - m_i[n - 1]) / w  +  (1 - alpha) * m_i[n - 1] / n )

where ``m_i[k]`` is task ``i``'s best latency after its ``k``-th round
(:data:`~tensorgym.tuner.FAILED_LATENCY_S` without a correct
kernel), ``n`` its number of rounds and the first term 0 until ``n >= 1 + w``.
There is no similar-task term. Ties go to the lowest index; when all are
equal, a uniformly random live task. Constants: MetaSchedule's defaults,
``alpha = 0.2`` and window ``w = 3`` rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorgym.errors import InvalidArgumentError
from tensorgym.tuner import Tuner

from .base import TaskScheduler
from .gradient import pick


def metaschedule_gradient(weight: float, history: Sequence[float], *, alpha: float, window: int) -> float:
    """MetaSchedule's gradient of one task (>= 0; larger is picked first)."""
    n = len(history)
    if n < 1:
        raise InvalidArgumentError("a task's gradient needs at least one round (the warm-up)")
    best = history[n - 1]
    g1 = (history[n - 1 - window] - best) / window if n >= 1 + window else 0.0
    g2 = best / n
    return weight * (alpha * g1 + (1 - alpha) * g2)


class MetaScheduleGradientScheduler(TaskScheduler):
    """MetaSchedule's ``GradientBased`` task scheduler (see the module docs).

    Args:
        alpha: weight of the measured improvement against ``best / n`` (0.2).
        window: the backward window, in rounds of the task (3).
    """

    name = "metaschedule-gradient"

    def __init__(self, alpha: float = 0.2, window: int = 3):
        if not 0.0 <= alpha <= 1.0:
            raise InvalidArgumentError(f"alpha must be in [0, 1], got {alpha!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise InvalidArgumentError(f"window must be a positive integer (rounds), got {window!r}")
        self.alpha = float(alpha)
        self.window = int(window)

    def gradients(self, tuner: Tuner) -> dict[int, float]:
        """MetaSchedule's gradient of every live task."""
        return {i: metaschedule_gradient(tuner.tasks[i].weight, tuner.tasks[i].history, alpha=self.alpha,
                                         window=self.window) for i in tuner.live_tasks}

    def next_task(self, tuner: Tuner, rng: np.random.Generator) -> int | None:
        return pick(self.gradients(tuner), rng, largest=True)

    def summary(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "window": self.window}
