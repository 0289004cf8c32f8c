"""Search spaces: the valid schedules of a workload on a target (``tensorgym.catalog`` lists them by name)."""

from __future__ import annotations

from ..config import Config, ConfigError
from .base import Space, SpaceError
from .mapping import MappingSpace
from .tiles import TilesSpace

__all__ = ["Config", "ConfigError", "MappingSpace", "Space", "SpaceError", "TilesSpace"]
