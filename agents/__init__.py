"""Search agents (``import tensorgym.agents``); :func:`make_agent` builds one by name (see :mod:`tensorgym.catalog`)."""

from tensorgym.catalog import AGENTS, agent_class, make_agent

from .base import Agent, SearchAgent
from .cost_model import CostModel, RandomModel
from .dgd import DGDAgent, DGDRandomModelAgent
from .exhaustive import ExhaustiveAgent
from .ga import GAAgent, GARandomModelAgent
from .optuna_agent import OptunaAgent
from .random_search import RandomAgent
from .random_structured import RandomStructuredAgent

__all__ = ["AGENTS", "Agent", "CostModel", "DGDAgent", "DGDRandomModelAgent", "ExhaustiveAgent", "GAAgent",
           "GARandomModelAgent", "OptunaAgent", "RandomAgent", "RandomModel", "RandomStructuredAgent", "SearchAgent",
           "agent_class", "make_agent"]
