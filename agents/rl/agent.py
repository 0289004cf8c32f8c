"""A trained policy as a tuning agent (``--agent rl --policy policies/r50/best.zip``).

The agent is a search strategy like the others (``ask`` / ``tell``, driven by
:meth:`Tuner.run <tensorgym.tuner.Tuner.run>` or, in a network's rounds, by
:meth:`Tuner.run_round <tensorgym.tuner.Tuner.run_round>`): the policy proposes the configs and
the loop measures them, so the policy is charged trials and seconds exactly
like the search agents and everything it measures lands in the database.

The search plays the env's episodes without an env. The env's rules without
measuring (:class:`~tensorgym.envs.tile_hop.HopRules` for tile hops,
:class:`~tensorgym.envs.microkernel_env.MicrokernelConstruction` for the
microkernel env's constructions), in the layout the policy was trained on,
give the observation and action mask of each state and the config an action
leads to; the search yields that config to the loop and moves its state with
the record it gets back, as the env's ``step`` would (a correct kernel moves
the state there, a failed one leaves it where it was). A policy trained on
other observations or actions is refused before anything is measured
(:class:`~tensorgym.agents.rl.policy.PolicyMismatch`).

* the first episode starts from a random correct config (measured; under
  replay a recorded one), the next ones from the best config measured so
  far; an episode that ends without measuring anything new is followed by
  one from a random config, so a deterministic policy does not repeat itself;
  if :data:`~tensorgym.envs.tile_hop.MAX_START_ATTEMPTS` random starts in a
  row fail, the search has nothing more to propose and ends;
* in each state it takes the policy's best allowed action
  (:func:`~tensorgym.agents.rl.policy.masked_action`), or with probability
  ``epsilon`` a random allowed one;
* moves to configs the run has measured cost nothing: the search answers them
  from its own history without asking the loop; an episode ends after
  :data:`MAX_FREE_STEPS` such steps in a row, and the run after
  :data:`MAX_STALE_EPISODES` episodes in a row that measured nothing new;
* under replay (``backend="replay"``) moves go only between the database's
  recorded configs, through the same hop graph as the env's.

Envs whose episodes build one config each (the microkernel env) run
construction after construction; each complete one is measured.

A policy trained on the **greedy walk** (:mod:`~tensorgym.agents.rl.greedy`, recorded in its
file) tunes by that walk instead: ``starts`` random configs measured as one batch, then a hill
climb from the best of them whose next move is the policy's best allowed move to a config the run
has not measured (with probability ``epsilon`` a random one), the climb moving only to a faster
config, and a restart from a random config at a local optimum. Its observations are the ones it
was trained on (``relative`` features: :func:`~tensorgym.agents.rl.greedy.relative_observation`).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from tensorgym.config import Config
from tensorgym.envs.base import NoWorkingStart
from tensorgym.envs.microkernel_env import MicrokernelConstruction
from tensorgym.envs.tile_hop import MAX_START_ATTEMPTS, HopRules, HopState
from tensorgym.errors import InvalidArgumentError
from tensorgym.record import Record
from tensorgym.spaces.base import Space
from tensorgym.strategy import GeneratorStrategy, Search, SearchHistory
from tensorgym.tuner import TuningCallback, TuningResult

from ..base import SearchAgent
from .greedy import check_walk, relative_observation
from .policy import PolicyMismatch, check_fits, load_policy, masked_action

# Steps in a row that measure nothing new before the agent gives up on the current episode, and episodes
# in a row that measure nothing new before it gives up on the run (replay: every reachable config is known).
MAX_FREE_STEPS = 64
MAX_STALE_EPISODES = 16

# A sub-search that may measure one config: yields ``[config]`` to the loop, returns its result.
Measuring = Generator[list[Config], list[Record], Any]

log = logging.getLogger(__name__)


class _HopEpisode:
    """A tile-hop episode played by the env's rules; the configs its moves reach are measured by the loop."""

    def __init__(self, rules: HopRules, start: Record, max_steps: int):
        self.rules = rules
        self.state = rules.state(start)
        self.max_steps = max_steps
        self.steps = 0

    def observe(self) -> np.ndarray:
        return self.rules.observe(self.state)

    def mask(self) -> np.ndarray:
        return self.rules.mask(self.state)

    def target(self, action: int) -> Config | None:
        """The config ``action`` leads to (to be measured)."""
        return self.rules.target(self.state, action)

    def after(self, tried: Record | None) -> bool:
        """Move on with the record of the step's config, as the env's step does; True when the episode ends."""
        self.steps += 1
        self.state, _ = self.rules.after(self.state, tried)  # the reward is for training, not for tuning
        return self.rules.truncated(self.state, self.steps, self.max_steps)


class _ConstructionEpisode:
    """A microkernel construction played by the env's rules; the complete config is measured by the loop."""

    def __init__(self, construction: MicrokernelConstruction, max_steps: int):
        self.construction = construction
        self.max_steps = max_steps
        self.steps = 0
        construction.begin()

    def observe(self) -> np.ndarray:
        return self.construction.observe()

    def mask(self) -> np.ndarray:
        return self.construction.action_masks()

    def target(self, action: int) -> Config | None:
        """Take ``action``; the built config once it completes the construction (to be measured), else None."""
        self.construction.take(action)
        return self.construction.config if self.construction.complete else None

    def after(self, tried: Record | None) -> bool:
        """True when the episode ends: its config was measured, or it ran out of steps (the env truncates)."""
        self.steps += 1
        return tried is not None or self.steps >= self.max_steps


class RLAgent(SearchAgent, GeneratorStrategy):
    """Tune with a trained stable-baselines3 policy (see the module docs).

    Args:
        policy: a policy file written by ``tensorgym train`` (``best.zip``).
        epsilon: probability of a random allowed action instead of the policy's best (exploration).
        episode_steps: steps per episode (default: the episode length the policy was trained with).
        replay: walk only between the configs the run's database holds, as the env's replay backend does
            (:meth:`tune` sets it from the env's backend; set it for a search driven over a replaying
            evaluator by hand or in rounds).
        walk: ``"episodes"`` or ``"greedy"`` (default: the walk the policy was trained on; see the module docs).
        starts: random configs the greedy walk measures before it climbs (default: the policy's).
    """

    name = "rl"
    # What spawn() copies into a fresh run: the options. The model is shared: acting does not change it.
    _OPTIONS = ("policy_path", "model", "info", "epsilon", "episode_steps", "replay", "spaces", "walk", "starts")

    def __init__(self, policy: str | Path | None = None, *, epsilon: float = 0.1, episode_steps: int | None = None,
                 replay: bool = False, walk: str | None = None, starts: int | None = None):
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
        self.replay = bool(replay)
        self.spaces = (self.info.space,)
        self.walk = walk if walk is not None else self.info.walk
        self.starts = starts if starts is not None else self.info.starts
        check_walk(self.walk, self.info.features, self.starts)

    @property
    def env_space(self) -> str:
        return self.info.space

    def check_space(self, space: str) -> None:
        if space != self.info.space:
            raise PolicyMismatch(f"the policy {self.policy_path} was trained on the {self.info.space} env; "
                                 f"make the env with space={self.info.space!r}")

    def spawn(self) -> "RLAgent":
        """A fresh copy for one run: the options, sharing the policy's model (a deep copy of it would cost
        seconds and memory for nothing: acting only reads it)."""
        clone = object.__new__(type(self))
        options = {k: v for k, v in vars(self).items() if k in self._OPTIONS}
        clone.__dict__.update(copy.deepcopy(options, {id(self.model): self.model}))
        return clone

    def tune(self, env: gym.Env, budget: int | None = 64, time_budget: float | None = None, seed: int = 0,
             callback: TuningCallback | Sequence[TuningCallback] | None = None) -> TuningResult:
        base, tuner, seed = self.start_tuner(env, budget, time_budget, seed, callback)
        strategy = self.spawn()
        strategy.replay = base.backend == "replay"  # the env's backend decides which configs the walk may reach
        try:
            extra = tuner.run(strategy, seed)  # its start refuses a policy that does not fit
        except BaseException:
            tuner.result(self.name, seed)  # ends the callbacks' run (progress bar) before the error shows
            raise
        return tuner.result(self.name, seed, **extra)

    # -- the strategy ------------------------------------------------------------------------
    def start(self, space: Space, rng: np.random.Generator, seed: int = 0, database: Any = None) -> None:
        self.check_space(space.name)
        if self.walk == "greedy" and (self.replay or space.name == "microkernel"):
            raise InvalidArgumentError("the greedy walk climbs tile hops over a whole space: tune with the "
                                       "landscape or tvm backend (not replay, not the microkernel env)")
        self.rules = self._rules(space, database)  # before the run: a policy that does not fit measures nothing
        self.episodes = 0
        super().start(space, rng, seed, database)

    def _rules(self, space: Space, database: Any) -> HopRules | MicrokernelConstruction:
        """The env's rules over ``space`` in the policy's layout (raises :class:`PolicyMismatch` if it does not fit)."""
        source = f"the policy {self.policy_path}"
        if space.name == "microkernel":
            if self.replay:
                raise InvalidArgumentError("replay walks recorded tile hops; the microkernel env measures every "
                                           "config it builds (use the tvm backend)")
            rules: HopRules | MicrokernelConstruction = MicrokernelConstruction(space)
        elif space.name == "mapping":  # its candidate switches are the mapping env's own moves, not tile hops
            raise PolicyMismatch(f"{source}: the rl agent proposes tile hops (tiles, cutlass) and microkernel "
                                 f"constructions, not the mapping env's moves")
        else:
            rules = HopRules(space, self.info.observation or "layer")
        check_fits(self.info, rules, source)
        if self.replay:
            if database is None:
                raise InvalidArgumentError("replay walks the records of a database; the evaluator has none")
            workload = space.workload
            graph = rules.use_records(database.records(workload.key, space.target.fingerprint, space.name))
            if not len(graph.starts):
                raise NoWorkingStart(f"replay needs recorded configs of {workload.label} in {database.path} with a "
                                     f"recorded 1-hop neighbour; it holds {len(graph)} record(s) and none qualifies")
        return rules

    def search(self, history: SearchHistory, rng: np.random.Generator) -> Search:
        if self.walk == "greedy":
            return (yield from self._greedy(history, rng))
        episode = yield from self._episode(history, rng, restart_at=None)
        stale_episodes = free = 0
        trials_at_start = len(history)
        while episode is not None and stale_episodes < MAX_STALE_EPISODES:
            mask = episode.mask()
            done = not mask.any()
            if not done:
                action = masked_action(self.model, episode.observe(), mask, rng, self.epsilon)
                before = len(history)
                target = episode.target(action)
                tried = None
                if target is not None:
                    tried = yield from self._measure(history, target)
                    if tried is None:  # the run is over
                        return None
                done = episode.after(tried)
                free = free + 1 if len(history) == before else 0
                done = done or free >= MAX_FREE_STEPS
            if done:
                self.episodes += 1
                stale = len(history) == trials_at_start
                stale_episodes = stale_episodes + 1 if stale else 0
                # After an episode that found something, go on from the best; after a stale one, from a random
                # config (a deterministic policy would repeat the stale episode).
                restart_at = history.best if isinstance(self.rules, HopRules) and not stale else None
                episode = yield from self._episode(history, rng, restart_at)
                trials_at_start, free = len(history), 0
        if episode is not None:
            log.info("rl: %d episodes in a row found nothing new; stopping after %d trials", stale_episodes,
                     len(history))
        return None

    def _episode(self, history: SearchHistory, rng: np.random.Generator,
                 restart_at: Record | None) -> Measuring:
        """The next episode, as the env's reset starts it (None: the run is over, or no start works)."""
        rules = self.rules
        if isinstance(rules, MicrokernelConstruction):
            return _ConstructionEpisode(rules, self.episode_steps)
        graph = rules.graph
        if restart_at is not None and (graph is None or graph.movable[graph.index[restart_at.config]]):
            return _HopEpisode(rules, restart_at, self.episode_steps)
        if graph is not None:  # replay: a recorded correct config that is not a dead end
            starts = graph.starts
            config = graph.records[int(starts[int(rng.integers(len(starts)))])].config
            record = yield from self._measure(history, config)
            return None if record is None else _HopEpisode(rules, record, self.episode_steps)
        failures = []
        for _ in range(MAX_START_ATTEMPTS):
            record = yield from self._measure(history, self.space.sample(rng))
            if record is None:
                return None
            if record.ok:
                return _HopEpisode(rules, record, self.episode_steps)
            failures.append(record.status.value)
        log.warning("rl: %d random start configs of %s in a row failed (%s); the search stops", MAX_START_ATTEMPTS,
                    self.space.workload.label, ", ".join(failures))
        return None

    # -- the greedy walk ----------------------------------------------------------------------
    def _greedy(self, history: SearchHistory, rng: np.random.Generator) -> Search:
        """The greedy walk (see the module docs): climb from the best start, the policy ordering the moves."""
        climb = yield from self._climb_start(history, rng, self.starts)
        while climb is not None:
            state = HopState(climb, history.best or climb, self.rules.state(climb).node)
            mask, targets = self._fresh_moves(state, history)
            if not mask.any():  # a local optimum: every neighbour is measured
                self.episodes += 1
                climb = yield from self._climb_start(history, rng, 1)
                continue
            action = masked_action(self.model, self._observe(state), mask, rng, self.epsilon)
            record = yield from self._measure(history, targets[action])
            if record is None:
                return None
            if record.ok and record.gflops > climb.gflops:
                climb = record
        return None

    def _climb_start(self, history: SearchHistory, rng: np.random.Generator, n: int) -> Measuring:
        """The best correct one of ``n`` random unmeasured configs, measured as one batch (None: the run is over,
        or :data:`~tensorgym.envs.tile_hop.MAX_START_ATTEMPTS` batches in a row had no correct config)."""
        for _ in range(MAX_START_ATTEMPTS):
            configs = history.sample(rng, n)
            if not configs:
                return None
            records = yield configs
            if self.finishing or not records:
                return None
            correct = [r for r in records if r.ok]
            if correct:
                return max(correct, key=lambda r: r.gflops)
        return None

    def _fresh_moves(self, state: HopState, history: SearchHistory) -> tuple[np.ndarray, dict[int, Config]]:
        """The allowed actions at ``state`` that lead to configs the run has not measured, and those configs."""
        allowed = self.rules.mask(state)
        targets: dict[int, Config] = {}
        for action in np.flatnonzero(allowed):
            config = self.rules.target(state, int(action))
            if config is not None and history.seen(config) is None:
                targets[int(action)] = config
        mask = np.zeros_like(allowed)
        mask[list(targets)] = True
        return mask, targets

    def _observe(self, state: HopState) -> np.ndarray:
        """What the policy sees at ``state``, in the features it was trained on."""
        observation = self.rules.observe(state)
        if self.info.features == "relative":
            return relative_observation(observation, state.record.gflops, state.best.gflops,
                                        len(self.rules.shape_features))
        return observation

    def _measure(self, history: SearchHistory, config: Config) -> Measuring:
        """The record of ``config``: from the run's history if it has one (free), else measured by the loop.
        None when the run is over (the budget is spent, or the driver is finishing)."""
        record = history.seen(config)
        if record is not None:
            return record
        records = yield [config]
        if self.finishing or not records:
            return None
        return records[0]

    def summary(self) -> dict[str, Any]:
        out = {"policy": self.policy_path, "algo": self.info.algo, "episodes": getattr(self, "episodes", 0),
               "epsilon": self.epsilon}
        return {**out, "walk": self.walk, "starts": self.starts} if self.walk == "greedy" else out
