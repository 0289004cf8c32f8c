"""Many layers behind one Gymnasium env, so one policy trains on all of them.

:class:`LayerSampledEnv` holds one tensorgym env per layer and runs each
episode on one of them, drawn at ``reset`` with its seeded RNG. The layers'
envs must share their observation and action spaces: the tile-hop env does
with ``observation="common"``; the microkernel env's actions depend on the layer's
divisors, so a microkernel policy trains on layers of one action size.

:func:`layer_env_factory` builds the function a ``DummyVecEnv`` or
``SubprocVecEnv`` calls to make one such env (in its own process for the
latter, where it opens its own database connection, or loads its own
landscapes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from tensorgym.checks import choice
from tensorgym.context import TuningContext
from tensorgym.database import Database
from tensorgym.envs.base import BACKENDS, TuningEnv
from tensorgym.envs.registration import make_env
from tensorgym.errors import InvalidArgumentError
from tensorgym.measure.measurer import Measurer
from tensorgym.workloads import Workload

from .greedy import GreedyLandscapeEnv, check_walk

# ``landscape=``: a CPU folder (or a file, or a Landscape) for every layer, or one per layer by workload key.
Landscapes = Any


def landscape_of(landscape: Landscapes, workload: Workload) -> Any:
    """The ``landscape=`` argument of ``workload``'s env: ``landscape[workload.key]`` when ``landscape`` maps
    workload keys to landscapes (leave-one-layer-out over given landscapes), else ``landscape`` itself."""
    if isinstance(landscape, Mapping):
        if workload.key not in landscape:
            raise InvalidArgumentError(f"no landscape is given for {workload.label}; the mapping has "
                                       f"{len(landscape)} layer(s)")
        return landscape[workload.key]
    return landscape


class LayerSampledEnv(gym.Env):
    """Several layers' envs as one: each episode runs on a layer drawn uniformly at ``reset``.

    ``reset(options={"layer": i})`` picks layer ``i``; ``info["layer"]`` names the layer
    of the episode. The env closes the layer envs (and a database it was given to own).
    """

    metadata = {"render_modes": []}

    def __init__(self, envs: Sequence[TuningEnv], owned: Sequence[Any] = ()):
        if not envs:
            raise InvalidArgumentError("give at least one layer env")
        first = envs[0]
        for env in envs[1:]:
            if env.observation_space != first.observation_space or env.action_space != first.action_space:
                raise InvalidArgumentError(
                    f"{env.workload.label} and {first.workload.label} have different observation or action spaces "
                    f"({env.observation_space.shape}/{env.action_space} vs {first.observation_space.shape}/"
                    f"{first.action_space}); train them separately (tile-hop envs share one with observation='common')")
        self.envs = list(envs)
        self.observation_space = first.observation_space
        self.action_space = first.action_space
        self._current: TuningEnv | None = None
        self._owned = list(owned)
        self._seeded = False

    @property
    def current(self) -> TuningEnv | None:
        """The env of the running episode."""
        return self._current

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        layer = options.pop("layer", None)
        index = int(self.np_random.integers(len(self.envs))) if layer is None else int(layer)
        self._current = self.envs[index]
        if seed is not None or not self._seeded:
            # each layer env draws from its own stream, derived from this env's (without a reset, which
            # would measure a start config of every layer)
            self._seeded = True
            for env in self.envs:  # under the landscape backend, the evaluator's draws too
                env.reseed(int(self.np_random.integers(2**31)))
        obs, info = self._current.reset(options=options or None)
        info["layer"] = self._current.workload.label
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self._current.step(action)
        info["layer"] = self._current.workload.label
        return obs, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """The running layer's action mask (for MaskablePPO)."""
        return self._current.action_masks()

    def close(self) -> None:
        for env in self.envs:
            env.close()
        for resource in self._owned:
            resource.close()
        self._owned = []
        super().close()


def layer_env_factory(workloads: Sequence[Workload], *, db: str | Path | None = None, space: str = "tiles",
                      backend: str = "replay", max_steps: int = 32, context: TuningContext | None = None,
                      measurer: Measurer | None = None, landscape: Landscapes = None,
                      monitor: bool = True, walk: str = "episodes", features: str = "env",
                      starts: int = 1) -> Callable[[], gym.Env]:
    """A function that builds a :class:`LayerSampledEnv` over ``workloads`` (in the calling process).

    Tile-hop envs use the common layout. By backend:

    * ``replay``: each env built opens ``db`` and its layer envs replay it (the env closes it);
    * ``tvm``: the layer envs measure through ``context`` (it stays open), or through a context of
      their own over ``db`` (:meth:`TuningContext.local`: with ``measurer`` if given, else a measurer
      started on first use), which the env closes;
    * ``landscape``: each layer's landscape, ``landscape`` naming its CPU folder (default: this
      machine's), or mapping each workload key to its landscape (a file or a
      :class:`~tensorgym.landscape.Landscape`); no database, nothing measured.

    ``walk="greedy"`` (landscape backend only) wraps each layer env in the greedy walk
    (:class:`~tensorgym.agents.rl.greedy.GreedyLandscapeEnv`, ``starts`` random starts, ``max_steps``
    steps, ``features``).

    ``monitor`` wraps the env in SB3's ``Monitor`` (episode returns and lengths for the training log).
    """
    workloads = list(workloads)
    choice("backend", backend, BACKENDS)
    if backend == "replay" and db is None:
        raise InvalidArgumentError("the replay backend trains on a dataset: give db=")
    if backend == "tvm" and db is None and context is None:
        raise InvalidArgumentError("the tvm backend stores its measurements: give db= or context=")
    if context is not None and backend != "tvm":
        raise InvalidArgumentError(f"context= is for the tvm backend (it measures); backend={backend!r} does not")
    check_walk(walk, features, starts)
    if walk == "greedy" and backend != "landscape":
        raise InvalidArgumentError("the greedy walk trains on landscapes (it reads their hop table): "
                                   "use backend='landscape'")

    def build() -> gym.Env:
        options: dict[str, Any] = {"observation": "common"} if space == "tiles" else {}
        owned: list[Any] = []
        if backend == "replay":
            database = Database(db)
            owned.append(database)
            options["db"] = database
        elif backend == "tvm":
            shared = context if context is not None else TuningContext.local(None, db, measurer=measurer)
            if context is None:
                owned.append(shared)
            options["context"] = shared
        try:
            envs = [_layer_env(wl, space, backend, max_steps, options, landscape, walk, features, starts)
                    for wl in workloads]
        except BaseException:
            for resource in owned:
                resource.close()
            raise
        env: gym.Env = LayerSampledEnv(envs, owned=owned)
        if monitor:
            from stable_baselines3.common.monitor import Monitor

            env = Monitor(env)
        return env

    return build


def _layer_env(workload: Workload, space: str, backend: str, max_steps: int, options: dict[str, Any],
               landscape: Landscapes, walk: str, features: str, starts: int) -> gym.Env:
    """One layer's env of :func:`layer_env_factory` (its landscape picked, wrapped in the greedy walk if asked)."""
    if backend == "landscape" and landscape_of(landscape, workload) is not None:
        options = {**options, "landscape": landscape_of(landscape, workload)}
    env = make_env(workload, space=space, backend=backend, max_steps=max_steps, **options)
    if walk == "greedy":
        return GreedyLandscapeEnv(env, starts=starts, max_steps=max_steps, features=features)
    return env
