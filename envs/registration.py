"""Gymnasium ids of tensorgym, registered on ``import tensorgym``.

* ``{Op}-{Suite}-{Layer}-v0`` for every suite layer, e.g. ``Conv2d-ResNet-R5-v0``,
  ``Conv2d-YOLO-Y9-v0``, ``Matmul-BERT-M3-v0``, ``Conv2d-ResNet18-C4-v0``;
* ``tensorgym/Conv2d-v0`` and ``tensorgym/Matmul-v0`` for shapes of your own:
  ``gym.make("tensorgym/Matmul-v0", M=256, N=256, K=512)``; on the command line
  ``--shape M=256,N=256,K=512`` (:func:`shape_kwargs`).

Every id takes the env keyword arguments: ``space=`` (``"tiles"``, the tile-hop env, or
``"microkernel"``, the microkernel-construction env), ``target=``, ``db=``, ``measurer=``,
``max_steps=``, ``render_mode=``, ``backend=``, and the chosen space's own options.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from ..registry import lookup
from ..suites import all_suite_workloads
from ..workloads import Workload, conv2d, matmul
from .base import TuningEnv
from .microkernel_env import MicrokernelEnv
from .tile_hop import TileHopEnv

ENV_CLASSES: dict[str, type[TuningEnv]] = {"tiles": TileHopEnv, "microkernel": MicrokernelEnv}


def make_env(workload: Workload, *, space: str = "tiles", **kwargs: Any) -> TuningEnv:
    """The environment over ``workload`` in the named search space."""
    return lookup(ENV_CLASSES, space, "space")(workload, **kwargs)


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


# The ids that take a shape, and an example of one (for error messages and --help).
PARAMETRIC_IDS: dict[str, tuple[Any, str]] = {
    "tensorgym/Conv2d-v0": (make_conv2d_env, "C=64,H=56,F=64,R=3"),
    "tensorgym/Matmul-v0": (make_matmul_env, "M=512,N=768,K=3072"),
}


def parse_shape(text: str) -> dict[str, int | str]:
    """``"M=512,N=768,K=3072"`` -> ``{"M": 512, "N": 768, "K": 3072}`` (values that are not integers,
    such as ``padding=same``, stay strings)."""
    shape: dict[str, int | str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"a shape is comma-separated NAME=VALUE pairs, e.g. M=512,N=768,K=3072; got {text!r}")
        value = value.strip()
        shape[key.strip()] = int(value) if value.lstrip("-").isdigit() else value
    return shape


def shape_kwargs(env_id: str, shape: Mapping[str, Any] | None) -> dict[str, Any]:
    """The shape keyword arguments ``gym.make(env_id, ...)`` needs: ``shape`` for a parametric id,
    nothing for a suite layer. Raises ``ValueError`` saying what is unknown, missing or extra."""
    try:
        gym.spec(env_id)
    except gym.error.Error as exc:
        raise ValueError(f"{exc}. Run `tensorgym list` to see the environment ids.") from None
    if env_id not in PARAMETRIC_IDS:
        if shape:
            raise ValueError(f"{env_id} has a fixed shape; a shape is for {' and '.join(PARAMETRIC_IDS)}")
        return {}
    entry, example = PARAMETRIC_IDS[env_id]
    if not shape:
        raise ValueError(f"{env_id} tunes a shape of your own: give one (command line: --shape {example})")
    parameters = {name: p for name, p in inspect.signature(entry).parameters.items() if p.kind is p.KEYWORD_ONLY}
    missing = [name for name, p in parameters.items() if p.default is p.empty and name not in shape]
    unknown = [name for name in shape if name not in parameters]
    if missing or unknown:
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(unknown)}"] if unknown else [])
        raise ValueError(f"shape of {env_id}: {'; '.join(problems)} (it takes {', '.join(parameters)}; "
                         f"e.g. {example})")
    return dict(shape)
