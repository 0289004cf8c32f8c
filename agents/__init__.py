"""Search agents (``import tensorgym.agents``); :func:`make_agent` builds one by name."""

from __future__ import annotations

import inspect
from typing import Any

from ..registry import lookup

from .base import Agent, tuning_env
from .cost_model import CostModel
from .dgd import DGDAgent
from .ga import GAAgent
from .optuna_agent import OptunaAgent
from .random_search import RandomAgent
from .random_structured import RandomStructuredAgent

# Name -> agent class, or "module:Class" for agents imported on first use (the MetaSchedule
# peer lives in tensorgym.baselines, which imports this package).
AGENTS: dict[str, type[Agent] | str] = {
    "random": RandomAgent,
    "ga": GAAgent,
    "dgd": DGDAgent,
    "optuna": OptunaAgent,
    "random-structured": RandomStructuredAgent,
    "metaschedule": "tensorgym.baselines.metaschedule:MetaScheduleAgent",
}


def agent_class(name: str) -> type[Agent]:
    """The class registered as ``name``."""
    return lookup(AGENTS, name, "agent")


def make_agent(name: str, **options: Any) -> Agent:
    """The agent registered as ``name``, built with ``options`` (its constructor's keyword arguments)."""
    cls = agent_class(name)
    accepted = inspect.signature(cls).parameters
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"agent {name!r} takes no option {', '.join(unknown)}; "
                         f"its options: {', '.join(accepted) or 'none'}")
    return cls(**options)


__all__ = ["AGENTS", "Agent", "CostModel", "DGDAgent", "GAAgent", "OptunaAgent", "RandomAgent",
           "RandomStructuredAgent", "agent_class", "make_agent", "tuning_env"]
