"""Search agents (``import tensorgym.agents``); :func:`make_agent` builds one by name."""

from __future__ import annotations

from typing import Any

from .base import Agent, tuning_env
from .random_search import RandomAgent

AGENTS: dict[str, type[Agent]] = {"random": RandomAgent}


def make_agent(name: str, **options: Any) -> Agent:
    try:
        cls = AGENTS[name]
    except KeyError:
        raise ValueError(f"unknown agent {name!r}; available: {', '.join(sorted(AGENTS))}") from None
    return cls(**options)


__all__ = ["AGENTS", "Agent", "RandomAgent", "make_agent", "tuning_env"]
