"""Gymnasium ids of tensorgym, registered on ``import tensorgym``.

* ``{Op}-{Suite}-{Layer}-v0`` for every suite layer, e.g. ``Conv2d-ResNet-R5-v0``,
  ``Conv2d-YOLO-Y9-v0``, ``Matmul-BERT-M3-v0``, ``Conv2d-ResNet18-C4-v0``;
* ``tensorgym/Conv2d-v0`` and ``tensorgym/Matmul-v0`` for shapes of your own:
  ``gym.make("tensorgym/Matmul-v0", M=256, N=256, K=512)``;
* ``Network-{name}-v0`` for every built-in network (:mod:`tensorgym.networks`), e.g.
  ``Network-ResNet18-v0``, and ``tensorgym/Network-v0`` with ``network=`` a network of your
  own: the network env (:mod:`.network_env`), which takes ``space=``, ``dtype=`` and its own
  keywords.

Every id takes the env keyword arguments: ``space=`` (a space that has an env class in
:mod:`tensorgym.catalog`: ``"tiles"``, the tile-hop env, ``"microkernel"``, the
microkernel-construction env, or ``"mapping"``, the intrinsic-mapping env), ``dtype=``
(``"float32"``, the default; ``"int8"`` and ``"bf16"`` in the ``mapping`` space), ``context=`` (a
:class:`~tensorgym.context.TuningContext`) or ``target=``, ``db=``, ``measurer=``, then
``max_steps=``, ``render_mode=``, ``backend=`` (``"tvm"``, ``"replay"``, or ``"landscape"`` in the tiles
space, with ``landscape=``: :mod:`.landscape_env`, and in the microkernel space:
:mod:`.landscape_microkernel_env`), and the chosen space's own options.

**Episode length.** Every id is registered with ``max_episode_steps`` (64, :data:`~.base.DEFAULT_MAX_STEPS`;
a network id: 4 steps per live task), so ``gym.make`` wraps the env in Gymnasium's ``TimeLimit``,
which truncates episodes; the env under it (``env.unwrapped``) has no step limit of its own.
``gym.make(id, max_episode_steps=N)`` changes the limit (``-1``: none). ``max_steps=N`` is kept: the
entry point wraps a ``TimeLimit`` of ``N`` around the env, inside the registered one, so episodes end
after ``min(N, max_episode_steps)`` steps (give ``max_episode_steps`` too for longer ones).
:func:`make_env` builds an env directly (no ``TimeLimit``): that env truncates itself after
``max_steps`` steps (64 by default).

:func:`workload_of` answers "which workload is this id (with this shape)?" without
building an environment.
"""

from __future__ import annotations

import difflib
import fnmatch
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.wrappers import TimeLimit

from tensorgym.catalog import env_class
from tensorgym.errors import InvalidArgumentError, UnknownNameError
from tensorgym.networks import NETWORKS
from tensorgym.suites import all_suite_workloads
from tensorgym.target import Target, resolve_target
from tensorgym.workloads import CHANNEL_BLOCK, Conv2d, Workload, conv2d, matmul

from .base import DEFAULT_MAX_STEPS, TuningEnv, check_max_steps, target_of
from .landscape_env import LandscapeHopEnv
from .landscape_microkernel_env import LandscapeMicrokernelEnv
from .microkernel_env import MicrokernelEnv
from .tile_hop import TileHopEnv


def make_env(workload: Workload, *, space: str = "tiles", dtype: str | None = None, layout: str | None = None,
             **kwargs: Any) -> TuningEnv:
    """The environment over ``workload`` in the named search space: in ``dtype`` if given (``"float32"``,
    ``"int8"``, ``"bf16"``), and for a conv2d laid out in ``layout`` (``"NHWC"`` or ``"NCHWc"``) if given
    (``gym.make("Conv2d-ResNet-R5-v0", layout="NHWC")``). Built directly, without ``TimeLimit``: it
    truncates its episodes itself after ``max_steps`` (default 64)."""
    if dtype is not None and dtype != workload.dtype:
        workload = workload.with_dtype(dtype)
    if layout:
        workload = with_layout(workload, layout, target_of(kwargs))
    cls = env_class(space)
    if kwargs.get("backend") == "landscape":  # the env over a landscape (the other envs refuse the backend)
        cls = {TileHopEnv: LandscapeHopEnv, MicrokernelEnv: LandscapeMicrokernelEnv}.get(cls, cls)
    return cls(workload, **kwargs)


def with_layout(workload: Workload, layout: str, target: "str | Target | None" = None) -> Workload:
    """``workload`` laid out in ``layout`` (conv2d only; see :mod:`tensorgym.workloads`). ``"NCHWc"`` blocks
    channels by ``target``'s fp32 lanes (nChw16c on AVX-512, nChw8c on AVX2); ``"NCHW8c"`` names its block."""
    if not isinstance(workload, Conv2d):
        raise InvalidArgumentError(f"only conv2d workloads have a layout; {workload.label} is a {workload.op}")
    block = None
    if layout == "NCHWc":
        resolved = resolve_target(target)
        block = resolved.vector_lanes_fp32 if resolved.kind == "llvm" else CHANNEL_BLOCK
    return workload.with_layout(layout, block)


def conv2d_workload(*, C: int, H: int, F: int, R: int, W: int | None = None, S: int | None = None, N: int = 1,
                    stride: int = 1, padding: int | str = "same") -> Workload:
    """The workload of ``tensorgym/Conv2d-v0``: a conv2d of your own shapes (W, S default to H, R)."""
    return conv2d(N, C, H, W if W is not None else H, F, R, S if S is not None else R, stride, padding)


def matmul_workload(*, M: int, N: int, K: int) -> Workload:
    """The workload of ``tensorgym/Matmul-v0``: ``C[M, N] = A[M, K] @ B[K, N]``."""
    return matmul(M, N, K)


# The ids that take a shape: their workload builder and an example shape (for messages and --help).
PARAMETRIC_IDS: dict[str, tuple[Any, str]] = {
    "tensorgym/Conv2d-v0": (conv2d_workload, "C=64,H=56,F=64,R=3"),
    "tensorgym/Matmul-v0": (matmul_workload, "M=512,N=768,K=3072"),
}


def _split_shape(builder, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    names = {name for name, p in inspect.signature(builder).parameters.items() if p.kind is p.KEYWORD_ONLY}
    return {k: v for k, v in kwargs.items() if k in names}, {k: v for k, v in kwargs.items() if k not in names}


def time_limited(env: gym.Env, max_steps: Any) -> gym.Env:
    """``env`` in a ``TimeLimit`` of ``max_steps`` (None: ``env`` as it is).

    What the entry points do with ``max_steps=`` given to ``gym.make``: the env they build has no step
    limit of its own, and this wrapper (inside the id's registered ``TimeLimit``) ends its episodes;
    ``env.unwrapped`` is still the env."""
    max_steps = check_max_steps(max_steps)
    return env if max_steps is None else TimeLimit(env, max_steps)


def make_registered_env(**kwargs: Any) -> gym.Env:
    """Entry point of the suite ids (``workload=`` in their registered kwargs), for ``gym.make``: the env
    without a step limit of its own (the id's ``TimeLimit`` cuts episodes), ``max_steps`` as a TimeLimit."""
    max_steps = check_max_steps(kwargs.pop("max_steps", None))  # refused before anything is built
    return time_limited(make_env(**kwargs, max_steps=None), max_steps)


def make_conv2d_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``tensorgym/Conv2d-v0``: shape keywords, then the env's."""
    shape, rest = _split_shape(conv2d_workload, kwargs)
    return make_registered_env(workload=workload_of("tensorgym/Conv2d-v0", shape), **rest)


def make_matmul_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``tensorgym/Matmul-v0``: shape keywords, then the env's."""
    shape, rest = _split_shape(matmul_workload, kwargs)
    return make_registered_env(workload=workload_of("tensorgym/Matmul-v0", shape), **rest)


NETWORK_ID = "tensorgym/Network-v0"  # the network env over a network of your own (network=...)


def register_envs() -> None:
    from .network_env import default_episode_steps

    for env_id, workload in all_suite_workloads().items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="tensorgym.envs.registration:make_registered_env",
                         kwargs={"workload": workload}, max_episode_steps=DEFAULT_MAX_STEPS)
    if "tensorgym/Conv2d-v0" not in gym.registry:
        gym.register(id="tensorgym/Conv2d-v0", entry_point="tensorgym.envs.registration:make_conv2d_env",
                     max_episode_steps=DEFAULT_MAX_STEPS)
    if "tensorgym/Matmul-v0" not in gym.registry:
        gym.register(id="tensorgym/Matmul-v0", entry_point="tensorgym.envs.registration:make_matmul_env",
                     max_episode_steps=DEFAULT_MAX_STEPS)
    # The network env continues its tuning session from one episode to the next (see its docs): an episode's
    # start depends on the episodes before it, so its ids are nondeterministic (Gymnasium's checker then
    # does not expect equal observations from two resets with one seed).
    for net in NETWORKS.values():
        if net.env_id not in gym.registry:
            gym.register(id=net.env_id, entry_point="tensorgym.envs.network_env:make_network_env",
                         kwargs={"network": net.name}, max_episode_steps=default_episode_steps(net),
                         nondeterministic=True)
    if NETWORK_ID not in gym.registry:
        # Its network, hence its episode length, is known only in gym.make: the entry point adds the TimeLimit.
        gym.register(id=NETWORK_ID, entry_point="tensorgym.envs.network_env:make_custom_network_env",
                     nondeterministic=True)


def env_ids() -> list[str]:
    """Every tensorgym id: the suite layers, then the parametric ids."""
    return [*all_suite_workloads(), *PARAMETRIC_IDS]


def matching_env_ids(patterns: str | Sequence[str]) -> list[str]:
    """The suite ids matching shell-style patterns (``"Conv2d-ResNet-R*"``; a comma-separated string or a list),
    in registry order; raises :class:`~tensorgym.errors.UnknownNameError` for a pattern that matches none."""
    items = [p.strip() for p in (patterns.split(",") if isinstance(patterns, str) else patterns) if p.strip()]
    if not items:
        raise InvalidArgumentError("give at least one env id or pattern, e.g. 'Conv2d-ResNet-R*'")
    suite_ids = list(all_suite_workloads())
    out: dict[str, None] = {}
    for pattern in items:
        found = [i for i in suite_ids if fnmatch.fnmatchcase(i, pattern)]
        if not found:
            close = difflib.get_close_matches(pattern, suite_ids, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownNameError(f"no environment id matches {pattern!r}{hint}; `tensorgym list` shows the ids")
        out.update(dict.fromkeys(found))
    return list(out)


def workload_of(env_id: str, shape: Mapping[str, Any] | None = None) -> Workload:
    """The workload of a tensorgym id: a suite layer's, the ``shape`` of a parametric id, or the
    ``workload`` of an id you registered yourself with ``entry_point="tensorgym.envs.registration:make_env"``.

    Raises :class:`~tensorgym.errors.UnknownNameError` for an id tensorgym does not
    register and :class:`~tensorgym.errors.InvalidArgumentError` for a shape that is
    missing, unknown, given to a fixed layer, or cannot be computed.
    """
    suite = all_suite_workloads()
    if isinstance(env_id, str) and env_id not in suite and env_id not in PARAMETRIC_IDS and env_id in gym.registry:
        registered = gym.registry[env_id].kwargs.get("workload")  # an id of your own over make_env
        if isinstance(registered, Workload):
            if shape:
                raise InvalidArgumentError(f"{env_id} has a fixed shape; a shape is for {' and '.join(PARAMETRIC_IDS)}")
            return registered
    if not isinstance(env_id, str) or (env_id not in suite and env_id not in PARAMETRIC_IDS):
        close = difflib.get_close_matches(str(env_id), env_ids(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownNameError(f"unknown environment id {env_id!r}{hint}; `tensorgym list` shows the ids")
    if env_id in suite:
        if shape:
            raise InvalidArgumentError(f"{env_id} has a fixed shape; a shape is for {' and '.join(PARAMETRIC_IDS)}")
        return suite[env_id]
    builder, example = PARAMETRIC_IDS[env_id]
    if not shape:
        raise InvalidArgumentError(f"{env_id} tunes a shape of your own: give one (command line: --shape {example})")
    parameters = {name: p for name, p in inspect.signature(builder).parameters.items() if p.kind is p.KEYWORD_ONLY}
    missing = [name for name, p in parameters.items() if p.default is p.empty and name not in shape]
    unknown = [name for name in shape if name not in parameters]
    if missing or unknown:
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(map(str, unknown))}"] if unknown else [])
        raise InvalidArgumentError(f"shape of {env_id}: {'; '.join(problems)} (it takes {', '.join(parameters)}; "
                                   f"e.g. {example})")
    return builder(**shape)
