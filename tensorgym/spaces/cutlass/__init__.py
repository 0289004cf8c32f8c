"""The ``cutlass`` space (seed 001, Bolt): CUTLASS template parameters, emitted by NVIDIA's ``cutlass_library``."""

from .space import CutlassSpace
from .templates import CutlassTile, candidate_tiles

__all__ = ["CutlassSpace", "CutlassTile", "candidate_tiles"]
