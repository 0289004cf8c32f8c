"""Search spaces: the valid schedules of a workload on a target (``tensorgym.catalog`` lists them by name)."""

from __future__ import annotations

from ..config import Config, ConfigError
from .base import Space, SpaceError
from .builder import KernelBuilder
from .mapping import MappingSpace
from .tiles import TilesSpace

__all__ = ["Config", "ConfigError", "KernelBuilder", "MappingSpace", "Space", "SpaceError", "TilesSpace"]
