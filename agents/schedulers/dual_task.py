"""GTA's dual-task scheduling (seed 002, Algorithm 1): the ``dual-task`` scheduler.

Two levels:

1. **Main task** (a layer): Ansor's gradient pick (:mod:`.gradient`), over
   ``m_i = min_k m_ik``, the best latency over the task's candidates.
2. **Sub-tasks** (the task's mapping candidates): the round of the chosen
   task is split evenly over the candidates ``probability_sample`` kept for
   it after its previous round; after the round, the kept set is drawn again
   from every live candidate's best latency:

   * ``P(k) = (1 / m_ik) / sum_j (1 / m_ij)``: faster candidates are likelier
     (a candidate without a correct kernel has ``P = 0``);
   * ``P'(k) ~ (1 + beta) P(k)`` for the candidates that were *not* tuned in
     the round just run (dropped last time), ``P(k)`` for the others,
     normalised: the exploration boost, by which a dropped candidate whose
     best latency is within a factor ``1 + beta`` of a kept one's takes its
     place (and, being tuned again, loses the boost next time);
   * keep the top ``ceil(kappa * |R|)`` candidates by ``P'`` (``R``: the
     task's live candidates; ties to the lower index).

The warm-up gives every task one round split over *all* its candidates (GTA's
"warm-up for the sub-task": every candidate measured once). In spaces with a
single candidate per task this is exactly Ansor's gradient scheduler.

**Fixes to the printed listing** (the paper's Algorithm 1): trials are
counted for every round (also for tasks without candidates; the listing
counts them only inside its ``if``); the kept set is per task (the listing
mixes ``C_samples`` and ``C_sample``); a task's best is compared with *its*
best (``B_latency[tid]``); a round's ``MEASURE_NUM`` trials are split over the
kept candidates rather than spent on each (so a round costs what a round of
the other schedulers costs). The objective is ``sum_i w_i * min_k m_ik``
(Eq. 1 as printed is not a latency).

**Constants**: ``kappa = 0.2`` (GTA's default "GTA-0.2"; the paper also runs
0.4, 0.6 and 1.0), ``beta = 0.2`` (GTA gives no value), ``selection="top"``
(Eq. 3's deterministic Top-N; ``"sample"`` draws the kept set without
replacement with probabilities ``P'`` instead, the paper's prose reading);
the gradient's constants are Ansor's (``alpha = 0.2``, ``theta = 2``,
``dt = 3``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgym.candidate_sampling import SELECTIONS, probability_sample
from tensorgym.errors import InvalidArgumentError
from tensorgym.tuner import RoundLog, Tuner

from .gradient import GradientScheduler


class DualTaskScheduler(GradientScheduler):
    """GTA's dual-task scheduler (see the module docs).

    Args:
        kappa: the sampling rate: the share of a task's candidates kept for its next round (0.2).
        beta: the exploration boost of candidates dropped last round (0.2).
        selection: ``"top"`` (Eq. 3) or ``"sample"``.
        alpha, theta, window, similarity_log_base: the first level's, as :class:`GradientScheduler`.
    """

    name = "dual-task"

    def __init__(self, kappa: float = 0.2, beta: float = 0.2, selection: str = "top", alpha: float = 0.2,
                 theta: float = 2.0, window: int = 3, similarity_log_base: float = 1.618):
        super().__init__(alpha=alpha, theta=theta, window=window, similarity_log_base=similarity_log_base)
        if not 0.0 < kappa <= 1.0:
            raise InvalidArgumentError(f"kappa (the sampling rate) must be in (0, 1], got {kappa!r}")
        if not beta >= 0:
            raise InvalidArgumentError(f"beta must be >= 0, got {beta!r}")
        if selection not in SELECTIONS:
            raise InvalidArgumentError(f"selection must be one of {SELECTIONS}, got {selection!r}")
        self.kappa = float(kappa)
        self.beta = float(beta)
        self.selection = selection

    def start(self, tuner: Tuner, rng: np.random.Generator) -> None:
        super().start(tuner, rng)
        self._kept: dict[int, list[int]] = {}  # task -> the candidates of its next round
        self._rng = rng

    def kept(self, task: int) -> list[int] | None:
        """The candidates ``probability_sample`` kept for ``task``'s next round (None before its warm-up)."""
        return self._kept.get(task)

    def candidates(self, tuner: Tuner, task: int, rng: np.random.Generator) -> list[int]:
        live = set(tuner.tasks[task].live_candidates)
        kept = [k for k in self._kept.get(task, []) if k in live]
        if not kept:  # the kept ones died: draw again among the live ones
            kept = self._sample(tuner, task, boosted=set())
        return kept

    def on_round(self, tuner: Tuner, entry: RoundLog) -> None:
        super().on_round(tuner, entry)
        live = tuner.tasks[entry.task].live_candidates
        self._kept[entry.task] = self._sample(tuner, entry.task, boosted=set(live) - set(entry.candidates))

    def _sample(self, tuner: Tuner, task: int, boosted: set[int]) -> list[int]:
        state = tuner.tasks[task]
        latencies = {k: state.candidates[k].latency_s for k in state.live_candidates}
        return probability_sample(latencies, boosted, kappa=self.kappa, beta=self.beta, selection=self.selection,
                                  rng=self._rng)

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), "kappa": self.kappa, "beta": self.beta, "selection": self.selection,
                "kept": {str(k): v for k, v in getattr(self, "_kept", {}).items()}}
