"""Search spaces: the valid schedules of a workload on a target."""

from .base import Config, Space, SpaceError
from .tiles import TilesSpace

__all__ = ["Config", "Space", "SpaceError", "TilesSpace"]
