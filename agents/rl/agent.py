"""A trained policy as a tuning agent (``--agent rl --policy policies/r50/best.zip``).

The agent runs the policy's episodes in the env it is given, with every
measurement going through a :class:`~tensorgym.tuner.Tuner`, so the policy is
charged trials and seconds exactly like the search agents and everything it
measures lands in the database:

* it builds a second env of the same class over the same workload, database
  and backend, whose record source is the Tuner (:class:`TunerRecords`), in
  the layout the policy was trained on; a policy trained on other
  observations or actions is refused (:class:`~tensorgym.agents.rl.policy.PolicyMismatch`);
* the first episode starts from a random correct config (measured; under
  replay a recorded one), the next ones from the best config measured so
  far; an episode that ends without measuring anything new is followed by
  one from a random config, so a deterministic policy does not repeat itself;
* in each state it takes the policy's best allowed action
  (:func:`~tensorgym.agents.rl.policy.masked_action`), or with probability
  ``epsilon`` a random allowed one;
* moves to configs it has measured cost nothing (the Tuner answers them);
  the run ends when the budget (trials or seconds) is spent.

Envs whose episodes build one config each (the microkernel env) run
episode after episode from their own reset.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from tensorgym.envs.tile_hop import TileHopEnv
from tensorgym.errors import InvalidArgumentError, TensorgymError
from tensorgym.record import Record
from tensorgym.tuner import Tuner, TuningCallback, TuningResult

from ..base import Agent
from .policy import PolicyMismatch, check_fits, load_policy, masked_action

# Steps in a row that measure nothing new before the agent gives up on the current episode, and episodes
# in a row that measure nothing new before it gives up on the run (replay: every reachable config is known).
MAX_FREE_STEPS = 64
MAX_STALE_EPISODES = 16

log = logging.getLogger(__name__)


class BudgetSpent(TensorgymError):
    """The Tuner's budget is spent: the agent's run is over."""


class TunerRecords:
    """An evaluator's interface over a :class:`~tensorgym.tuner.Tuner`: what an env measures through it is
    a trial of the run (configs the run has measured are free)."""

    def __init__(self, tuner: Tuner):
        self.tuner = tuner
        self.space = tuner.space
        self.database = getattr(tuner.evaluator, "database", None)

    @property
    def measured(self) -> int:
        return self.tuner.measured

    @property
    def reused(self) -> int:
        return self.tuner.reused

    def lookup(self, config) -> Record | None:
        return self.tuner.seen(config) or self.tuner.evaluator.lookup(config)

    def evaluate(self, configs) -> list[Record]:
        if self.tuner.exhausted and any(self.tuner.seen(c) is None for c in configs):
            raise BudgetSpent("the tuning budget is spent")
        records = self.tuner.measure(configs)
        if len(records) < len(dict.fromkeys(configs)):
            raise BudgetSpent("the tuning budget is spent")
        return records


class RLAgent(Agent):
    """Tune with a trained stable-baselines3 policy (see the module docs).

    Args:
        policy: a policy file written by ``tensorgym train`` (``best.zip``).
        epsilon: probability of a random allowed action instead of the policy's best (exploration).
        episode_steps: steps per episode (default: the episode length the policy was trained with).
    """

    name = "rl"

    def __init__(self, policy: str | Path | None = None, *, epsilon: float = 0.1, episode_steps: int | None = None):
        if policy is None:
            raise InvalidArgumentError("the rl agent needs a trained policy: --policy PATH on the command line, "
                                       "policy= in Python (train one with `tensorgym train`)")
        if not 0.0 <= epsilon <= 1.0:
            raise InvalidArgumentError(f"epsilon must be in [0, 1], got {epsilon!r}")
        if episode_steps is not None and (not isinstance(episode_steps, int) or episode_steps < 1):
            raise InvalidArgumentError(f"episode_steps must be a positive integer, got {episode_steps!r}")
        self.policy_path = str(policy)
        self.model, self.info = load_policy(policy)
        self.epsilon = float(epsilon)
        self.episode_steps = episode_steps or self.info.max_steps

    @property
    def env_space(self) -> str:
        return self.info.space

    def check_space(self, space: str) -> None:
        if space != self.info.space:
            raise PolicyMismatch(f"the policy {self.policy_path} was trained on the {self.info.space} env; "
                                 f"make the env with space={self.info.space!r}")

    def tune(self, env: gym.Env, budget: int | None = 64, time_budget: float | None = None, seed: int = 0,
             callback: TuningCallback | Sequence[TuningCallback] | None = None) -> TuningResult:
        base, tuner, seed = self.start_tuner(env, budget, time_budget, seed, callback)
        try:
            walker = self._walker(base, TunerRecords(tuner))  # refuses a policy that does not fit
        except BaseException:
            tuner.result(self.name, seed)  # ends the callbacks' run (progress bar) before the error shows
            raise
        rng = np.random.default_rng(seed)
        episodes = 0
        try:
            episodes = self._run(walker, tuner, rng, seed)
        except BudgetSpent:
            pass
        finally:
            walker.close()
        return tuner.result(self.name, seed, policy=self.policy_path, algo=self.info.algo, episodes=episodes,
                            epsilon=self.epsilon)

    def _walker(self, base, records: TunerRecords):
        """An env like ``base`` (its class, space, database, backend) over ``records``, in the policy's layout."""
        options: dict[str, Any] = {"observation": self.info.observation} if isinstance(base, TileHopEnv) else {}
        walker = type(base)(base.workload, evaluator=records, db=base.database, backend=base.backend,
                            max_steps=self.episode_steps, **options)
        try:
            check_fits(self.info, walker, f"the policy {self.policy_path}")
        except PolicyMismatch:
            walker.close()
            raise
        return walker

    def _run(self, walker, tuner: Tuner, rng: np.random.Generator, seed: int) -> int:
        hops = isinstance(walker, TileHopEnv)
        obs, _ = walker.reset(seed=seed)
        episodes = stale_episodes = 0
        trials_at_start = len(tuner.trials)
        free = 0
        while not tuner.exhausted and stale_episodes < MAX_STALE_EPISODES:
            mask = walker.action_masks()
            done = not mask.any()
            if not done:
                action = self._act(obs, mask, rng)
                before = len(tuner.trials)
                obs, _, terminated, truncated, _ = walker.step(action)
                free = free + 1 if len(tuner.trials) == before else 0
                done = terminated or truncated or free >= MAX_FREE_STEPS
            if done:
                episodes += 1
                stale = len(tuner.trials) == trials_at_start
                stale_episodes = stale_episodes + 1 if stale else 0
                if hops and tuner.best is not None and not stale:
                    obs, _ = walker.reset(options={"config": tuner.best.config})
                else:
                    obs, _ = walker.reset()  # a random start (tile hop) or the next construction
                trials_at_start, free = len(tuner.trials), 0
        if stale_episodes >= MAX_STALE_EPISODES:
            log.info("rl: %d episodes in a row found nothing new; stopping after %d trials", stale_episodes,
                     len(tuner.trials))
        return episodes

    def _act(self, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        return masked_action(self.model, obs, mask, rng, self.epsilon)
