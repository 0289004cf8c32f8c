"""Gymnasium ids of tensorgym, registered on ``import tensorgym``.

* ``{Op}-{Suite}-{Layer}-v0`` for every suite layer, e.g. ``Conv2d-ResNet-R5-v0``,
  ``Conv2d-YOLO-Y9-v0``, ``Matmul-BERT-M3-v0``, ``Conv2d-ResNet18-C4-v0``;
* ``tensorgym/Conv2d-v0`` and ``tensorgym/Matmul-v0`` for shapes of your own:
  ``gym.make("tensorgym/Matmul-v0", M=256, N=256, K=512)``.

Every id takes the env keyword arguments: ``space=`` (``"tiles"``, the tile-hop env, or
``"microkernel"``, the microkernel-construction env), ``target=``, ``db=``, ``measurer=``,
``max_steps=``, ``render_mode=``, ``backend=``, and the chosen space's own options.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from ..suites import all_suite_workloads
from ..workloads import Workload, conv2d, matmul
from .base import TuningEnv
from .microkernel_env import MicrokernelEnv
from .tile_hop import TileHopEnv

ENV_CLASSES: dict[str, type[TuningEnv]] = {"tiles": TileHopEnv, "microkernel": MicrokernelEnv}


def make_env(workload: Workload, *, space: str = "tiles", **kwargs: Any) -> TuningEnv:
    """The environment over ``workload`` in the named search space."""
    try:
        cls = ENV_CLASSES[space]
    except KeyError:
        raise ValueError(f"unknown space {space!r}; available: {sorted(ENV_CLASSES)}") from None
    return cls(workload, **kwargs)


def make_conv2d_env(*, C: int, H: int, F: int, R: int, W: int | None = None, S: int | None = None, N: int = 1,
                    stride: int = 1, padding: int | str = "same", **kwargs: Any) -> TuningEnv:
    """Entry point of ``tensorgym/Conv2d-v0``: a conv2d of your own shapes (W, S default to H, R)."""
    return make_env(conv2d(N, C, H, W if W is not None else H, F, R, S if S is not None else R, stride, padding),
                    **kwargs)


def make_matmul_env(*, M: int, N: int, K: int, **kwargs: Any) -> TuningEnv:
    """Entry point of ``tensorgym/Matmul-v0``: ``C[M, N] = A[M, K] @ B[K, N]``."""
    return make_env(matmul(M, N, K), **kwargs)


def register_envs() -> None:
    for env_id, workload in all_suite_workloads().items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="tensorgym.envs.registration:make_env", kwargs={"workload": workload})
    if "tensorgym/Conv2d-v0" not in gym.registry:
        gym.register(id="tensorgym/Conv2d-v0", entry_point="tensorgym.envs.registration:make_conv2d_env")
    if "tensorgym/Matmul-v0" not in gym.registry:
        gym.register(id="tensorgym/Matmul-v0", entry_point="tensorgym.envs.registration:make_matmul_env")
