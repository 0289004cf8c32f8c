"""Ansor's gradient task scheduler (the ``gradient`` scheduler; GTA's first level, seed 002 Eq. 2).

After the round-robin warm-up, each round goes to the live task whose
objective ``f = sum_i w_i * m_i`` is expected to fall fastest per unit of
tuning time, i.e. the task with the most negative estimated gradient::

    dF/dt_i ~ w_i * ( alpha * backward_i + (1 - alpha) * forward_i )

    backward_i = (m_i(t_i) - m_i(t_i - dt)) / dt          (0 until task i has had dt + 1 rounds)
    forward_i  = min( m_i - m_i / t_i ,  theta * C_i / max_{j in N(i)} V_j ) - m_i

with ``t_i`` the rounds task ``i`` has had, ``m_i`` its best latency after
each round (:data:`~tensorgym.tuner.FAILED_LATENCY_S` without a
correct kernel), ``w_i`` its weight (``dF/dm_i`` of the weighted sum), ``C_i``
its FLOPs and ``V_j = C_j / m_j`` the throughput of task ``j``. The first
forward term assumes that the latency keeps falling like ``1/t``; the second
that a task can reach ``1/theta`` of the best throughput of its *similar*
tasks ``N(i)`` (the ``theta * 1e30`` of Ansor when it has none). All
gradients are <= 0; the task with the smallest is picked (the largest
|gradient|), ties to the lowest index, and a uniformly random live task when
all are equal.

**Similar tasks** (Ansor's ``derive_similarity_tag``): the same operator, the
same dtype and the same ``int(log_1.618(FLOPs + 1))``. A task leaves its
group for good once it has had more than 5 rounds more than every other
member and still runs below ``1/theta`` of the group's best throughput.

**Constants** (TVM's Ansor ``TaskScheduler`` defaults; GTA gives none and
says it follows Ansor): ``alpha = 0.2``, ``theta = 2`` (Ansor's ``beta``),
backward window ``dt = 3`` rounds, log base 1.618 for the FLOP buckets.
GTA's Eq. 2 writes ``(1 - eta)`` for the forward weight; with ``eta = alpha``
it is Ansor's formula, which this is. Dead tasks (a round that gave them no
new trial) are never picked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorgym.tuner import RoundLog, TaskState, Tuner
from tensorgym.errors import InvalidArgumentError

from .base import TaskScheduler

NO_GROUP_FORWARD = 1e30  # Ansor: a task without similar tasks has theta * 1e30 as its second forward term


def ansor_gradient(weight: float, history: Sequence[float], best: float, flops: float,
                   best_similar_throughput: float | None, *, alpha: float, theta: float, window: int) -> float:
    """Ansor's estimate of ``dF/dt_i`` for one task (<= 0; see the module docs).

    ``history`` is the task's best latency after each of its rounds (``t_i = len(history)``),
    ``best`` its best latency now, ``best_similar_throughput`` ``max_{j in N(i)} C_j / m_j``
    (None when the task has no similar task).
    """
    t = len(history)
    if t < 1:
        raise InvalidArgumentError("a task's gradient needs at least one round (the warm-up)")
    backward = (history[t - 1] - history[t - 1 - window]) / window if t - 1 - window >= 0 else 0.0
    next_1 = best - best / t
    next_2 = theta * NO_GROUP_FORWARD if not best_similar_throughput else theta * flops / best_similar_throughput
    forward = min(next_1, next_2) - best
    return weight * (alpha * backward + (1 - alpha) * forward)


class GradientScheduler(TaskScheduler):
    """Ansor's gradient task scheduler (see the module docs).

    Args:
        alpha: weight of the backward (measured) term against the forward (predicted) one (0.2).
        theta: how close to its similar tasks' best throughput a task is expected to get (2).
        window: the backward window ``dt``, in rounds of the task (3).
        similarity_log_base: the base of the FLOP buckets of similar tasks (1.618).
    """

    name = "gradient"

    def __init__(self, alpha: float = 0.2, theta: float = 2.0, window: int = 3, similarity_log_base: float = 1.618):
        if not 0.0 <= alpha <= 1.0:
            raise InvalidArgumentError(f"alpha must be in [0, 1], got {alpha!r}")
        if not theta > 0:
            raise InvalidArgumentError(f"theta must be > 0, got {theta!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise InvalidArgumentError(f"window must be a positive integer (rounds), got {window!r}")
        if not similarity_log_base > 1:
            raise InvalidArgumentError(f"similarity_log_base must be > 1, got {similarity_log_base!r}")
        self.alpha = float(alpha)
        self.theta = float(theta)
        self.window = int(window)
        self.similarity_log_base = float(similarity_log_base)

    # -- similar tasks ---------------------------------------------------------------------------
    def similarity_tag(self, state: TaskState) -> str:
        """Ansor's tag: the operator (and dtype) and the FLOP bucket."""
        workload = state.task.workload
        bucket = int(math.log(workload.flops + 1, self.similarity_log_base))
        return f"{workload.op}_{workload.dtype}_{bucket}"

    def start(self, tuner: Tuner, rng: np.random.Generator) -> None:
        self._groups: dict[int, list[int]] = {}  # task -> the members of its group (itself included)
        by_tag: dict[str, list[int]] = {}
        for i in tuner.live_tasks:
            by_tag.setdefault(self.similarity_tag(tuner.tasks[i]), []).append(i)
        for members in by_tag.values():
            for i in members:
                self._groups[i] = members  # one shared list per group

    def similar(self, task: int) -> list[int]:
        """The tasks similar to ``task`` (itself included), as the scheduler currently groups them."""
        return self._groups.get(task, [task])

    def best_similar_throughput(self, tuner: Tuner, task: int) -> float | None:
        """``max_{j in N(i)} C_j / m_j`` over the group of ``task``, None if it has no similar task."""
        members = self.similar(task)
        if len(members) <= 1:
            return None
        return max(tuner.tasks[j].flops / tuner.tasks[j].cost_s for j in members)

    # -- the choice --------------------------------------------------------------------------------
    def gradients(self, tuner: Tuner) -> dict[int, float]:
        """The estimated ``dF/dt_i`` of every live task (<= 0)."""
        out = {}
        for i in tuner.live_tasks:
            state = tuner.tasks[i]
            out[i] = ansor_gradient(state.weight, state.history, state.cost_s, state.flops,
                                    self.best_similar_throughput(tuner, i), alpha=self.alpha, theta=self.theta,
                                    window=self.window)
        return out

    def next_task(self, tuner: Tuner, rng: np.random.Generator) -> int | None:
        grads = self.gradients(tuner)
        return pick(grads, rng, largest=False)

    def on_round(self, tuner: Tuner, entry: RoundLog) -> None:
        self._adjust_group(tuner, entry.task)

    def _adjust_group(self, tuner: Tuner, task: int) -> None:
        """Ansor's ``_adjust_similarity_group``: a task tuned much longer than its group that stays far slower
        than the group's best is not similar after all; it leaves the group."""
        members = self._groups.get(task)
        if members is None or len(members) <= 1:
            return
        best_group = max(tuner.tasks[j].flops / tuner.tasks[j].cost_s for j in members)
        own = tuner.tasks[task].flops / tuner.tasks[task].cost_s
        others = max(tuner.tasks[j].rounds for j in members if j != task)
        if own < best_group / self.theta and tuner.tasks[task].rounds > 5 + others:
            members.remove(task)
            self._groups[task] = [task]

    def summary(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "theta": self.theta, "window": self.window,
                "similarity_log_base": self.similarity_log_base}


def pick(values: dict[int, float], rng: np.random.Generator, *, largest: bool) -> int | None:
    """The key of the largest (or smallest) value, lowest key on ties; a random key when all values are equal."""
    if not values:
        return None
    keys = sorted(values)
    if len({values[k] for k in keys}) == 1:
        return keys[int(rng.integers(len(keys)))]
    sign = -1.0 if largest else 1.0
    return min(keys, key=lambda k: (sign * values[k], k))
