"""Random search: measure uniformly drawn configs, in batches, until the budget is spent."""

from __future__ import annotations

import numpy as np

from ..tuner import Tuner
from .base import Agent


class RandomAgent(Agent):
    """Draws distinct random configs from the space (its own ``sample``) and measures them.

    Args:
        batch_size: configs per measurement batch (built in parallel, timed one by one).
    """

    name = "random"

    def __init__(self, batch_size: int = 16):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size

    def search(self, tuner: Tuner, rng: np.random.Generator) -> None:
        while not tuner.exhausted:
            n = self.batch_size if tuner.remaining is None else min(self.batch_size, tuner.remaining)
            batch = tuner.sample(rng, n)
            if not batch:
                return  # the space is exhausted
            tuner.measure(batch)
