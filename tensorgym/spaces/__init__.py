"""Search spaces: the valid schedules of a workload on a target."""

from __future__ import annotations

from typing import Any

from ..registry import lookup

from .base import Config, Space, SpaceError
from .tiles import TilesSpace

# Name -> class, or "module:Class" for spaces imported on first use (they import the
# measurement machinery, which imports this package); see tensorgym.registry.
SPACES: dict[str, type[Space] | str] = {
    "tiles": TilesSpace,
    "microkernel": "tensorgym.spaces.microkernel:MicrokernelSpace",
    "metaschedule": "tensorgym.baselines.metaschedule:MetaScheduleSpace",
}


def make_space(name: str, workload, target, **options: Any) -> Space:
    """The space registered as ``name`` over ``workload`` on ``target``."""
    entry = lookup(SPACES, name, "space", SpaceError)
    return entry(workload, target, **options)


__all__ = ["SPACES", "Config", "Space", "SpaceError", "TilesSpace", "make_space"]
