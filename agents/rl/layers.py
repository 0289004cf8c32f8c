"""Many layers behind one Gymnasium env, so one policy trains on all of them.

:class:`LayerSampledEnv` holds one tensorgym env per layer and runs each
episode on one of them, drawn at ``reset`` with its seeded RNG. The layers'
envs must share their observation and action spaces: the tile-hop env does
with ``observation="common"``; the microkernel env's actions depend on the layer's
divisors, so a microkernel policy trains on layers of one action size.

:func:`layer_env_factory` builds the function a ``DummyVecEnv`` or
``SubprocVecEnv`` calls to make one such env (in its own process for the
latter, where it opens its own database connection).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.utils import seeding
import numpy as np

from tensorgym.database import Database
from tensorgym.envs.base import TuningEnv
from tensorgym.envs.registration import make_env
from tensorgym.errors import InvalidArgumentError
from tensorgym.workloads import Workload


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
            for env in self.envs:
                env.np_random, _ = seeding.np_random(int(self.np_random.integers(2**31)))
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


def layer_env_factory(workloads: Sequence[Workload], *, db: str | Path, space: str = "tiles",
                      backend: str = "replay", max_steps: int = 32, measurer=None,
                      monitor: bool = True) -> Callable[[], gym.Env]:
    """A function that builds a :class:`LayerSampledEnv` over ``workloads`` (in the calling process).

    Tile-hop envs use the common layout. ``measurer`` (tvm backend) is shared by the layers; without
    one, the env starts its own (and stops it when closed). ``monitor`` wraps the env in SB3's ``Monitor``
    (episode returns and lengths for the training log).
    """
    workloads = list(workloads)

    def build() -> gym.Env:
        database = Database(db)
        owned: list[Any] = [database]
        shared = measurer
        if backend == "tvm" and shared is None:
            from tensorgym.measure import Measurer

            shared = Measurer()
            owned.insert(0, shared)
        options: dict[str, Any] = {"observation": "common"} if space == "tiles" else {}
        envs = [make_env(wl, space=space, db=database, backend=backend, max_steps=max_steps,
                         measurer=shared, **options) for wl in workloads]
        env: gym.Env = LayerSampledEnv(envs, owned=owned)
        if monitor:
            from stable_baselines3.common.monitor import Monitor

            env = Monitor(env)
        return env

    return build
