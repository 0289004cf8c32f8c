"""Search agents (``import tensorgym.agents``); :func:`make_agent` builds one by name."""

from __future__ import annotations

import inspect
from typing import Any

from .base import Agent, tuning_env  # noqa: I001  (before the baselines import: it needs .base)
from .cost_model import CostModel
from .dgd import DGDAgent
from .ga import GAAgent
from .optuna_agent import OptunaAgent
from .random_search import RandomAgent
from ..baselines.metaschedule import MetaScheduleAgent

AGENTS: dict[str, type[Agent]] = {
    "random": RandomAgent,
    "ga": GAAgent,
    "dgd": DGDAgent,
    "optuna": OptunaAgent,
    "metaschedule": MetaScheduleAgent,
}


def make_agent(name: str, **options: Any) -> Agent:
    """The agent registered as ``name``, built with ``options`` (its constructor's keyword arguments)."""
    try:
        cls = AGENTS[name]
    except KeyError:
        raise ValueError(f"unknown agent {name!r}; available: {', '.join(sorted(AGENTS))}") from None
    accepted = inspect.signature(cls).parameters
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"agent {name!r} takes no option {', '.join(unknown)}; "
                         f"its options: {', '.join(accepted) or 'none'}")
    return cls(**options)


__all__ = ["AGENTS", "Agent", "CostModel", "DGDAgent", "GAAgent", "MetaScheduleAgent", "OptunaAgent", "RandomAgent",
           "make_agent", "tuning_env"]
