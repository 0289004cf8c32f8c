"""Random search: measure uniformly drawn configs, in batches, until the budget is spent."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError
from tensorgym.tuner import Tuner

from .base import SearchAgent


class RandomAgent(SearchAgent):
    """Draws distinct random configs from the env's space (its own ``sample``) and measures them.

    Works in every space: the draws are whatever the space's sampler draws
    (in the ``microkernel`` space that is seed 003's structured sampler).

    Args:
        batch_size: configs per measurement batch (built in parallel, timed one by one).
    """

    name = "random"
    spaces = None  # any space

    def __init__(self, batch_size: int = 16):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.batch_size = int(batch_size)

    def search(self, tuner: Tuner, rng: np.random.Generator, seed: int) -> dict[str, Any] | None:
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
