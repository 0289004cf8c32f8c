"""The ``tiles`` space: Ansor-style multi-level tiling (seed 000), its features and hop neighbourhoods."""

from .gpu_space import GpuTilesSpace  # registers the CUDA variant: make_space("tiles", ...) picks it for a GPU
from .hops import HopGraph
from .space import MAX_INNERMOST, REDUCTION_LEVELS, SPATIAL_LEVELS, UNROLL_CHOICES, Coordinate, TilesSpace

__all__ = ["MAX_INNERMOST", "REDUCTION_LEVELS", "SPATIAL_LEVELS", "UNROLL_CHOICES", "Coordinate", "GpuTilesSpace",
           "HopGraph", "TilesSpace"]
