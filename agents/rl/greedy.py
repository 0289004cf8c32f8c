"""The greedy walk: training episodes shaped like the ``rl`` agent's tuning runs with a small budget.

The tile-hop env's episode is a walk: every correct move is taken, better or worse, and an
episode's return is ``log2(final / start)``. Tuning keeps the *best* config found, and with 32
measurements what matters is which neighbour of the best config to try next. The greedy walk
trains and tunes for exactly that:

* **start**: ``starts`` random correct configs are measured (as one batch when tuning); the walk
  climbs from the best of them;
* **step**: the policy picks a neighbour of the climb's config that the run has not measured (moves
  to measured configs are masked); it is measured; if it is faster the climb moves there, else the
  climb stays where it was (a hill climb whose order of moves the policy chooses);
* **restart**: when every neighbour of the climb is measured (a local optimum), the climb restarts
  from a random unmeasured correct config (one measurement);
* **reward**: the improvement of the run's best so far, ``log2(new best / old best)`` (0 when a
  step finds nothing better): the return is ``log2(final best / best start)``, scale-free, so the
  layers of one training run weigh alike whatever their GFLOP/s;
* an episode is ``max_steps`` steps (a tuning budget of ``starts + max_steps`` measurements).

**Features** (``features=``). ``"env"``: the env's observation (the config, its throughput and the
best, on the env's absolute log scale, and the layer's shape). ``"relative"``: what carries from
one layer to another: the two throughput slots hold the climb's throughput as a share of the run's
best (``log2`` over :data:`RATIO_OCTAVES` octaves, mapped to [0, 1]) and 0, and the layer's shape
(absolute sizes) reads 0, so the policy is one function of the config's place in its space and its
analytical features, whatever the layer.

:class:`GreedyLandscapeEnv` is that walk over a landscape env (its hop table, observations and
seeded draws); :func:`relative_observation` is the ``"relative"`` observation, which the ``rl``
agent (:mod:`.agent`) applies the same way when it tunes.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from tensorgym.envs.landscape_env import LandscapeHopEnv
from tensorgym.envs.tile_hop import INVALID_ACTION_PENALTY, gflops_scale
from tensorgym.errors import InvalidArgumentError

WALKS = ("episodes", "greedy")
FEATURES = ("env", "relative")
RATIO_OCTAVES = 4.0  # log2(climb / best) in [-4, 0] maps onto [0, 1]
MAX_RESTARTS = 64  # random restarts tried in a row before the walk lets measured neighbours be chosen again


def check_walk(walk: str, features: str, starts: int) -> None:
    """Refuse an unknown walk or features, or a start count below 1 (one line)."""
    if walk not in WALKS:
        raise InvalidArgumentError(f"walk must be one of {WALKS}, got {walk!r}")
    if features not in FEATURES:
        raise InvalidArgumentError(f"features must be one of {FEATURES}, got {features!r}")
    if features == "relative" and walk != "greedy":
        raise InvalidArgumentError("features='relative' observes the greedy walk's climb against its best: "
                                   "use walk='greedy'")
    if not isinstance(starts, int) or isinstance(starts, bool) or starts < 1:
        raise InvalidArgumentError(f"starts must be a positive integer, got {starts!r}")


def relative_observation(observation: np.ndarray, climb_gflops: float | None, best_gflops: float | None,
                         n_shape: int) -> np.ndarray:
    """``observation`` (a tile-hop observation: config part, two throughputs, ``n_shape`` shape features) with
    the throughputs replaced by the climb's share of the best and 0, and the shape zeroed (see the module docs)."""
    out = np.array(observation, dtype=np.float32, copy=True)
    at = out.size - 2 - n_shape
    ratio = climb_gflops / best_gflops if climb_gflops and best_gflops and best_gflops > 0 else 0.0
    out[at] = float(np.clip(1.0 + math.log2(ratio) / RATIO_OCTAVES, 0.0, 1.0)) if ratio > 0 else 0.0
    out[at + 1] = 0.0
    if n_shape:
        out[-n_shape:] = 0.0
    return out


class GreedyLandscapeEnv(gym.Env):
    """The greedy walk (see the module docs) over a :class:`~tensorgym.envs.landscape_env.LandscapeHopEnv`.

    The landscape env gives the hop table, each config's observation and the seeded draws of the
    throughputs (:meth:`reseed` draws them again, as the env's own); the walk keeps its own state.
    ``info`` has the climb's and the best's GFLOP/s.
    """

    metadata = {"render_modes": []}

    def __init__(self, env: LandscapeHopEnv, *, starts: int = 8, max_steps: int = 24, features: str = "relative"):
        if not isinstance(env, LandscapeHopEnv):
            raise InvalidArgumentError(f"the greedy walk trains on a landscape env, got {type(env).__name__}")
        check_walk("greedy", features, starts)
        if not isinstance(max_steps, int) or max_steps < 1:
            raise InvalidArgumentError(f"max_steps must be a positive integer, got {max_steps!r}")
        self.env = env
        self.workload = env.workload
        self.starts, self.max_steps, self.features = starts, max_steps, features
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        walk = env.walk
        self._moves = walk.moves
        self._ok = np.asarray(walk.ok, dtype=bool)
        self._starts = np.asarray(walk.starts, dtype=np.int64)
        self._observations = walk.observations
        self._n_shape = len(env.rules.shape_features)
        self._gflops = np.asarray(env.scores, dtype=np.float64)
        self._visited = np.zeros(len(self._ok), dtype=bool)
        self._climb = self._best = -1
        self._steps = 0

    # -- seeding -------------------------------------------------------------------------------------
    def reseed(self, seed: int) -> None:
        """Seed the starts and the landscape's draws, without an episode (as the landscape env's ``reseed``)."""
        self.env.reseed(seed)
        self.np_random = np.random.default_rng([int(seed), 0x6E5D])
        self._gflops = np.asarray(self.env.scores, dtype=np.float64)

    # -- gymnasium API -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.env.reseed(seed)
            self._gflops = np.asarray(self.env.scores, dtype=np.float64)
        if not len(self._starts):
            raise InvalidArgumentError(f"the landscape of {self.workload.label} has no correct config with a "
                                       f"correct neighbour to start from")
        rows = self.np_random.choice(self._starts, size=min(self.starts, len(self._starts)), replace=False)
        self._visited[:] = False
        self._visited[rows] = True
        self._climb = self._best = int(rows[int(np.argmax(self._gflops[rows]))])
        self._steps = 0
        self._restart_if_stuck()
        return self._observe(), self._info()

    def step(self, action):
        if self._climb < 0:
            raise gym.error.ResetNeeded("call reset() before step()")
        action = int(action)
        if not 0 <= action < self.action_space.n:
            raise InvalidArgumentError(f"action {action} is outside Discrete({self.action_space.n})")
        self._steps += 1
        to = int(self._moves[self._climb, action])
        if to < 0:
            reward = INVALID_ACTION_PENALTY
        elif self._visited[to]:
            reward = 0.0  # nothing new: tuning masks such a move, training lets it cost a step
        else:
            reward = self._visit(to)
        truncated = self._steps >= self.max_steps
        if not truncated:
            reward += self._restart_if_stuck()
            truncated = self._steps >= self.max_steps
        return self._observe(), reward, False, truncated, self._info()

    def action_masks(self) -> np.ndarray:
        """The moves from the climb's config to configs of the landscape this episode has not visited."""
        if self._climb < 0:
            raise gym.error.ResetNeeded("call reset() before action_masks()")
        targets = self._moves[self._climb]
        mask = targets >= 0
        fresh = mask.copy()
        fresh[mask] = ~self._visited[targets[mask]]
        return fresh if fresh.any() else mask

    def close(self) -> None:
        self.env.close()
        super().close()

    # -- the walk --------------------------------------------------------------------------------------
    def _visit(self, row: int) -> float:
        """Measure ``row``: the climb moves there if it is faster; the reward is the best's improvement."""
        self._visited[row] = True
        if not self._ok[row]:
            return 0.0
        gflops = self._gflops
        if gflops[row] > gflops[self._climb]:
            self._climb = row
        if gflops[row] > gflops[self._best]:
            reward = math.log2(gflops[row] / gflops[self._best])
            self._best = row
            return reward
        return 0.0

    def _restart_if_stuck(self) -> float:
        """At a local optimum (every neighbour visited), climb again from a random unvisited start (one step)."""
        reward = 0.0
        for _ in range(MAX_RESTARTS):
            if self._steps >= self.max_steps:
                return reward
            targets = self._moves[self._climb]
            allowed = targets[targets >= 0]
            if not len(allowed) or not self._visited[allowed].all():
                return reward
            fresh = self._starts[~self._visited[self._starts]]
            if not len(fresh):
                return reward
            row = int(fresh[int(self.np_random.integers(len(fresh)))])
            self._steps += 1
            self._climb = row
            reward += self._visit(row)
        return reward

    def _observe(self) -> np.ndarray:
        observation = self._observations[self._climb]
        climb, best = float(self._gflops[self._climb]), float(self._gflops[self._best])
        if self.features == "relative":
            return relative_observation(observation, climb, best, self._n_shape)
        out = observation.copy()
        at = out.size - 2 - self._n_shape
        out[at], out[at + 1] = gflops_scale(climb), gflops_scale(best)
        return out

    def _info(self) -> dict[str, Any]:
        return {"gflops": float(self._gflops[self._climb]), "best_gflops": float(self._gflops[self._best]),
                "steps": self._steps}
