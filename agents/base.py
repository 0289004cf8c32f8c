"""The agent interface: ``agent.tune(env, budget=..., time_budget=..., seed=...) -> TuningResult``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import gymnasium as gym
import numpy as np

from ..envs.base import TuningEnv
from ..tuner import Tuner, TuningResult


def tuning_env(env: gym.Env) -> TuningEnv:
    """The tensorgym env under any Gymnasium wrappers."""
    base = env.unwrapped
    if not isinstance(base, TuningEnv):
        raise TypeError(f"agents tune tensorgym environments; got {type(base).__name__}")
    return base


class Agent(ABC):
    """A search agent. Subclasses set ``name`` and implement :meth:`search`.

    Agents are deterministic for a seed (measured values aside): all their
    randomness comes from the ``rng`` passed to :meth:`search`.
    """

    name: str = ""
    spaces: tuple[str, ...] = ("tiles",)  # the search spaces the agent works in

    def tune(self, env: gym.Env, budget: int | None = 64, time_budget: float | None = None, seed: int = 0,
             progress: bool = False) -> TuningResult:
        """Search ``env``'s space within the budget; every measurement is stored in the env's database."""
        base = tuning_env(env)
        if base.search_space.name not in self.spaces:
            raise ValueError(f"agent {self.name!r} works in the {', '.join(self.spaces)} space(s), not in "
                             f"{base.search_space.name!r}; make the env with space={self.spaces[0]!r}")
        tuner = Tuner(base.evaluator, budget=budget, time_budget=time_budget, progress=progress,
                      label=f"{self.name} {base.workload.label}")
        extra = self.search(tuner, np.random.default_rng(seed)) or {}
        return tuner.result(self.name, seed, **extra)

    @abstractmethod
    def search(self, tuner: Tuner, rng: np.random.Generator) -> dict[str, Any] | None:
        """Measure configs through ``tuner`` until ``tuner.exhausted``; may return extra facts for the result."""
