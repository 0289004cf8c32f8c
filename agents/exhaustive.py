"""Exhaustive profiling (seed 001, Bolt): measure every config of a small space, in its own order."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgym.errors import InvalidArgumentError
from tensorgym.config import Config

from .base import SearchAgent


class ExhaustiveAgent(SearchAgent):
    """Measures the space's configs (``space.configs()``) in order, in batches, until the budget ends.

    Bolt profiles every candidate template of a workload; so does this agent, in any space
    small enough to list itself (the ``cutlass`` space). A budget smaller than the space
    measures its first configs; a resumed run finds the measured ones in the database.

    Args:
        batch_size: configs per measurement batch (built in parallel, timed one by one).
    """

    name = "exhaustive"
    spaces = None  # any space that can list its configs

    def __init__(self, batch_size: int = 32):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.batch_size = int(batch_size)

    @property
    def env_space(self) -> str:
        return "cutlass"

    def start(self, space, rng, seed=0, database=None) -> None:
        super().start(space, rng, seed, database)
        self.configs = space.configs()
        self.next = 0

    def ask(self, n: int | None = None) -> list[Config]:
        batch = self.configs[self.next:self.next + self.batch_size]
        self.next += len(batch)
        return batch

    def summary(self) -> dict[str, Any]:
        return {"space_size": len(self.configs)}
