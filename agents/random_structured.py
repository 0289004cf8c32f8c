"""Random-structured search (seed 003): plain random sampling of the microkernel space, no cost model.

Seed 003's claim is that the structure of the space -- calibrated
microkernels, the reuse loop around them, strictly divisible tiles -- does
the work, so uniform random draws come close to the best kernel of the
space within 10-20 measurements. Each draw is
:meth:`MicrokernelSpace.sample <tensorgym.spaces.MicrokernelSpace.sample>`
(B.5.2): a selection uniformly among single microkernels and λ-combinations
that fit, a uniform divisor for the reuse loop, then uniform draws over
(loop, trip count) pairs until every loop is covered (with tensorgym's rule
for the parallel loops). Draws are distinct within a run; they are measured
in batches by the :class:`~tensorgym.tuner.Tuner`'s loop, so every measurement
lands in the database and counts against the budget.
"""

from __future__ import annotations

from typing import Any

from .random_search import RandomAgent


class RandomStructuredAgent(RandomAgent):
    """Seed 003's random sampler over the microkernel space (:class:`RandomAgent` in that space).

    Args:
        batch_size: configs per measurement batch (built in parallel, timed one by one).
    """

    name = "random-structured"
    spaces = ("microkernel",)

    def summary(self) -> dict[str, Any]:
        return {"combination_draws": sum(len(config["h"]) == 4 for config in self.drawn)}
