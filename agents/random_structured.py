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
in batches through the :class:`~tensorgym.tuner.Tuner`, so every measurement
lands in the database and counts against the budget.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tuner import Tuner
from .base import Agent


class RandomStructuredAgent(Agent):
    """Seed 003's random sampler over the microkernel space.

    Args:
        batch_size: configs per measurement batch (built in parallel, timed one by one).
    """

    name = "random-structured"
    spaces = ("microkernel",)

    def __init__(self, batch_size: int = 16):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size

    def search(self, tuner: Tuner, rng: np.random.Generator) -> dict[str, Any]:
        combinations = 0
        while not tuner.exhausted:
            n = self.batch_size if tuner.remaining is None else min(self.batch_size, tuner.remaining)
            batch = tuner.sample(rng, n)
            if not batch:
                break  # every config of the space was drawn
            combinations += sum(len(config["h"]) == 4 for config in batch)
            tuner.measure(batch)
        return {"combination_draws": combinations}
