"""The ``tiles`` space: Ansor-style multi-level tiling (seed 000), its features and hop neighbourhoods."""

from .hops import HopGraph
from .space import MAX_INNERMOST, REDUCTION_LEVELS, SPATIAL_LEVELS, UNROLL_CHOICES, Coordinate, TilesSpace

__all__ = ["HopGraph", "MAX_INNERMOST", "REDUCTION_LEVELS", "SPATIAL_LEVELS", "UNROLL_CHOICES", "Coordinate",
           "TilesSpace"]
