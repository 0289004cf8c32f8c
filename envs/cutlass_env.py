"""Template-hop environment over the ``cutlass`` space (seed 001): the tile-hop env's rules, CUTLASS's knobs.

The state is a :class:`~tensorgym.spaces.cutlass.CutlassSpace` config; action ``2 * i``
moves knob ``i`` (tile, alignment, swizzle, split-K, epilogue) to its next value, ``2 * i + 1``
to its previous one, and moves to configs outside the space are masked. Rewards,
observations and episodes are those of :class:`~tensorgym.envs.tile_hop.TileHopEnv`.
"""

from __future__ import annotations

from .tile_hop import TileHopEnv


class CutlassEnv(TileHopEnv):
    """Hop through the CUTLASS template parameters of one workload (needs ``target="cuda"``)."""

    space_name = "cutlass"
