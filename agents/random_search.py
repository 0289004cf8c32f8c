"""Random search: measure uniformly drawn configs, in batches, until the budget is spent."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..spaces.base import Config
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

    def search(self, tuner: Tuner, rng: np.random.Generator) -> dict[str, Any] | None:
        drawn: list[Config] = []
        while not tuner.exhausted:
            n = self.batch_size if tuner.remaining is None else min(self.batch_size, tuner.remaining)
            batch = tuner.sample(rng, n)
            if not batch:
                break  # every config of the space was drawn
            drawn += batch
            tuner.measure(batch)
        return self._summary(drawn)

    def _summary(self, drawn: list[Config]) -> dict[str, Any] | None:
        """Extra facts for the result, from every config drawn (in order); subclasses add theirs."""
        return None
