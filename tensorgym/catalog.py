"""The composition root: every search space, environment class and agent, by name.

Each entry is a lazy ``"module:Class"`` reference, imported the first time
its name is asked for, so listing names imports nothing and optional
dependencies (Optuna, stable-baselines3, ...) load only for the agents that
need them. This is the only module of the core that points up to
``tensorgym.envs``, ``tensorgym.agents`` and ``tensorgym.baselines``; adding a
space, env, agent or task scheduler means adding one line here (a test checks
that each entry's class carries the name it is listed under).

The network env (:mod:`tensorgym.envs.network_env`) is not in ``ENVS``: that
registry maps a search space to its single-workload env, and a network env
works over any space; its Gymnasium ids are registered with the others.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from typing import Any

from .errors import InvalidArgumentError, UnknownNameError

# Search spaces: name -> class (``Space.name``).
SPACES: dict[str, str] = {
    "tiles": "tensorgym.spaces.tiles:TilesSpace",
    "microkernel": "tensorgym.spaces.microkernel:MicrokernelSpace",
    "mapping": "tensorgym.spaces.mapping:MappingSpace",
    "metaschedule": "tensorgym.baselines.metaschedule:MetaScheduleSpace",
    "cutlass": "tensorgym.spaces.cutlass:CutlassSpace",
}

# Environment classes: the name of the space they work in -> class (``TuningEnv.space_name``).
ENVS: dict[str, str] = {
    "tiles": "tensorgym.envs.tile_hop:TileHopEnv",
    "microkernel": "tensorgym.envs.microkernel_env:MicrokernelEnv",
    "mapping": "tensorgym.envs.mapping_env:MappingEnv",
    "cutlass": "tensorgym.envs.cutlass_env:CutlassEnv",
}

# Agents: name -> class (``Agent.name``).
AGENTS: dict[str, "str | type"] = {
    "random": "tensorgym.agents.random_search:RandomAgent",
    "ga": "tensorgym.agents.ga:GAAgent",
    "dgd": "tensorgym.agents.dgd:DGDAgent",
    "ga-random-model": "tensorgym.agents.ga:GARandomModelAgent",
    "dgd-random-model": "tensorgym.agents.dgd:DGDRandomModelAgent",
    "optuna": "tensorgym.agents.optuna_agent:OptunaAgent",
    "random-structured": "tensorgym.agents.random_structured:RandomStructuredAgent",
    "metaschedule": "tensorgym.baselines.metaschedule:MetaScheduleAgent",
    "rl": "tensorgym.agents.rl.agent:RLAgent",
    "one-shot": "tensorgym.agents.oneshot.agent:OneShotAgent",
    "exhaustive": "tensorgym.agents.exhaustive:ExhaustiveAgent",
}

# Each learned agent's ablation: the same search with its cost model's scores replaced by uniform random ones, so
# that the difference between the two is what the model contributes.
ABLATIONS: dict[str, str] = {"ga": "ga-random-model", "dgd": "dgd-random-model"}

# Task schedulers of networks: name -> class (``name`` attribute); ``tune(network_env, budget, ...)``.
SCHEDULERS: dict[str, str] = {
    "round-robin": "tensorgym.agents.schedulers.round_robin:RoundRobinScheduler",
    "gradient": "tensorgym.agents.schedulers.gradient:GradientScheduler",
    "metaschedule-gradient": "tensorgym.agents.schedulers.metaschedule_gradient:MetaScheduleGradientScheduler",
    "dual-task": "tensorgym.agents.schedulers.dual_task:DualTaskScheduler",
    "metaschedule": "tensorgym.baselines.metaschedule.network:MetaScheduleNetworkTuner",
}

# kind -> (registry, what its names are called in messages)
_KINDS = {"space": (SPACES, "space"), "env": (ENVS, "space with an environment"), "agent": (AGENTS, "agent"),
          "scheduler": (SCHEDULERS, "scheduler")}


def load(entry: str) -> Any:
    """Import ``"module:Class"`` and return the class (Python caches the module)."""
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)


def lookup(kind: str, name: str) -> Any:
    """The class listed as ``name`` under ``kind`` (``"space"``, ``"env"``: by space name, ``"agent"``)."""
    registry, what = _KINDS[kind]
    if not isinstance(name, str) or name not in registry:
        close = difflib.get_close_matches(str(name), registry, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownNameError(f"unknown {kind if kind != 'env' else 'space'} {name!r}{hint}; {what}s: "
                               f"{', '.join(sorted(registry))}")
    entry = registry[name]
    return load(entry) if isinstance(entry, str) else entry


def space_class(name: str) -> type:
    return lookup("space", name)


def env_class(space: str) -> type:
    """The environment class that works in the space named ``space``."""
    return lookup("env", space)


def agent_class(name: str) -> type:
    return lookup("agent", name)


def scheduler_class(name: str) -> type:
    return lookup("scheduler", name)


def make_space(name: str, workload, target, **options: Any):
    """The space named ``name`` over ``workload`` on ``target``, built with ``options`` (its own keyword arguments).

    A space with an implementation per target kind gives the one of ``target``'s kind (the ``tiles``
    space of a CUDA target is a GPU sketch, :meth:`~tensorgym.spaces.base.Space.for_target`), and
    ``options`` are checked against that implementation's.
    """
    cls = space_class(name).for_target(target)
    _check_options(f"space {name!r}", cls, options, skip=("workload", "target"))
    return cls(workload, target, **options)


def make_agent(name: str, **options: Any):
    """The agent named ``name``, built with ``options`` (its constructor's keyword arguments)."""
    cls = agent_class(name)
    _check_options(f"agent {name!r}", cls, options)
    return cls(**options)


def register_agent(name: str, agent: "type | str") -> None:
    """List a search strategy of your own as agent ``name``: a class (a
    :class:`~tensorgym.agents.SearchAgent`) or its ``"module:Class"`` entry. Like ``gymnasium.register``
    for envs, so that ``make_agent``, ``compare`` and the command line (through ``-m`` or an import) take
    it beside the bundled agents; a bundled name cannot be taken. Processes that build agents from
    names (Ray workers) must import the module that registers it, as with Gymnasium's ids."""
    if not isinstance(name, str) or not name.strip() or "," in name:
        raise InvalidArgumentError(f"an agent name is a non-empty string without commas, got {name!r}")
    if not isinstance(agent, (str, type)):
        raise InvalidArgumentError(f"register a class or a 'module:Class' entry, got {type(agent).__name__}")
    if name in _BUNDLED_AGENTS:
        raise InvalidArgumentError(f"{name!r} is a bundled agent; register yours under another name")
    AGENTS[name] = agent  # a class is kept as it is: a script's classes need not be importable by name


_BUNDLED_AGENTS = frozenset(AGENTS)


def make_scheduler(name: str, **options: Any):
    """The task scheduler named ``name``, built with ``options`` (its constructor's keyword arguments)."""
    cls = scheduler_class(name)
    _check_options(f"scheduler {name!r}", cls, options)
    return cls(**options)


def _check_options(what: str, cls: type, options: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
    accepted = [p for p in inspect.signature(cls).parameters if p not in skip]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InvalidArgumentError(f"{what} takes no option {', '.join(map(str, unknown))}; "
                                   f"its options: {', '.join(accepted) or 'none'}")
