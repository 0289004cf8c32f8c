"""Random search: uniformly drawn configs, distinct within a run, in batches (an ask/tell strategy)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError

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

    def start(self, space, rng, seed=0, database=None) -> None:
        super().start(space, rng, seed, database)
        self.drawn: list[Config] = []

    def ask(self, n: int | None = None) -> list[Config]:
        batch = self.history.sample(self.rng, self.batch_size if n is None else min(self.batch_size, n))
        self.drawn += batch  # empty: every config of the space was drawn
        return batch

    def summary(self) -> dict[str, Any]:
        """Extra facts for the result, from every config drawn (in order); subclasses add theirs."""
        return {}
