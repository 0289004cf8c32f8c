"""The agent interface: ``agent.tune(env, budget=..., time_budget=..., seed=...) -> TuningResult``.

* :class:`Agent` is the interface: anything that tunes an environment's
  workload and reports a :class:`~tensorgym.tuner.TuningResult`.
* :class:`SearchAgent` is an agent that is a search strategy
  (:class:`~tensorgym.strategy.SearchStrategy`: ``ask(n)`` / ``tell(records)``).
  Its :meth:`SearchAgent.tune` checks the space, builds the budgeted
  :class:`~tensorgym.tuner.Tuner` over the env's evaluator and lets the
  Tuner's loop drive a fresh copy of the strategy (:meth:`Tuner.run
  <tensorgym.tuner.Tuner.run>`), so every measurement lands in the database
  and counts against the budget the same way for every agent, and a network
  scheduler can drive the same strategies round by round.
  Searches written as a loop subclass :class:`~tensorgym.strategy.GeneratorStrategy`
  too and ``yield`` their batches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from tensorgym.envs.base import tuning_env
from tensorgym.errors import InvalidArgumentError
from tensorgym.strategy import SearchStrategy
from tensorgym.tuner import Tuner, TuningCallback, TuningResult, check_budget


class Agent(ABC):
    """Something that tunes an environment's workload within a budget.

    Attributes:
        name: the name the agent is listed under (``tensorgym.catalog.AGENTS``).
    """

    name: str = ""

    @property
    def env_space(self) -> str:
        """The space of the environment the command line and ``compare`` open for this agent."""
        return "tiles"

    def check_space(self, space: str) -> None:  # noqa: B027 - by default an agent tunes an env of any space
        """Raise :class:`~tensorgym.errors.InvalidArgumentError` if the agent cannot tune an env of ``space``."""

    @abstractmethod
    def tune(self, env: gym.Env, budget: int | None = 64, time_budget: float | None = None, seed: int = 0,
             callback: TuningCallback | Sequence[TuningCallback] | None = None) -> TuningResult:
        """Tune ``env``'s workload; every measurement is stored in the env's database.

        ``budget`` counts measurements, ``time_budget`` seconds of tuning clock (at least one
        of them must be given); ``callback`` sees every trial (e.g. a progress bar).
        """

    def start_tuner(self, env: gym.Env, budget: int | None, time_budget: float | None, seed: Any,
                    callback: TuningCallback | Sequence[TuningCallback] | None) -> tuple[Any, Tuner, int]:
        """What every :meth:`tune` through a Tuner starts with: check the arguments, then open the Tuner.

        Returns the unwrapped tuning env, the budgeted :class:`~tensorgym.tuner.Tuner` over its
        evaluator, and the checked seed.
        """
        base = tuning_env(env)
        self.check_space(base.search_space.name)
        check_budget(budget, time_budget)
        seed = _seed(seed)
        base.evaluator.seed(seed)  # a simulated evaluator's noise follows the run's seed, as the search does
        tuner = Tuner(base.evaluator, budget=budget, time_budget=time_budget, callback=callback,
                      label=f"{self.name} {base.workload.label}")
        return base, tuner, seed


class SearchAgent(Agent, SearchStrategy):
    """A search strategy over the env's own space, driven by the :class:`~tensorgym.tuner.Tuner`'s loop.

    Subclasses set ``name`` and ``spaces`` and implement the strategy
    (``ask`` / ``tell``, or ``search`` as a generator with
    :class:`~tensorgym.strategy.GeneratorStrategy`). A search is deterministic for
    a seed (measured values aside): all its randomness comes from the ``rng``
    :meth:`~tensorgym.strategy.SearchStrategy.start` gives it. The agent object
    holds options only: every run drives a fresh copy (:meth:`spawn`).

    Attributes:
        spaces: the names of the spaces the search works in (``None``: any space).
    """

    spaces: tuple[str, ...] | None = None

    @property
    def env_space(self) -> str:
        return self.spaces[0] if self.spaces else "tiles"

    def check_space(self, space: str) -> None:
        if self.spaces is not None and space not in self.spaces:
            raise InvalidArgumentError(f"agent {self.name!r} works in the {', '.join(self.spaces)} space(s), not "
                                       f"in {space!r}; make the env with space={self.spaces[0]!r}")

    def tune(self, env: gym.Env, budget: int | None = 64, time_budget: float | None = None, seed: int = 0,
             callback: TuningCallback | Sequence[TuningCallback] | None = None) -> TuningResult:
        _, tuner, seed = self.start_tuner(env, budget, time_budget, seed, callback)
        extra = tuner.run(self.spawn(), seed)
        return tuner.result(self.name, seed, **extra)


def _seed(seed: Any) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgumentError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)
