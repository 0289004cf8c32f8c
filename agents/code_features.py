"""Features of the code a CPU ``tiles`` config compiles to: which loops TVM's auto-unroll unrolls.

The analytical and generic features (:mod:`tensorgym.spaces.tiles.features`) describe the tiles; they
see the ``unroll`` knob only as a number. What it does depends on the tiles: the builder puts
``pragma_auto_unroll_max_step`` on the fused parallel loop, and TVM then unrolls, from the innermost
loop outwards, every serial loop whose body, unrolled, stays within that many statements; the first
loop that does not fit stays a loop, and so does everything around it. The vectorised loop is a
single vector statement by then. So the same ``unroll`` value unrolls the whole register block of one
config and nothing of another, and two values often give the very same code (on the shipped
landscapes, pairs of configs that differ only in ``unroll`` but unroll the same loops differ by about
10 % in the top quartile, pairs that unroll different loops by 20-35 %: the difference is the
code, and a model that sees only ``unroll`` cannot tell the two kinds of pair apart).

The features here (:data:`CODE_FEATURE_NAMES`), for the main computation's loop nest in the ``tiles``
order (the fused parallel S0, then S1, R0, S2, R1, S3, the last spatial loop's S3 tile vectorised):

``log2_unrolled_steps``
    log2 of the statements of the unrolled body: the product of the unrolled loops' extents;
``unrolled_loops``
    how many loops (of extent > 1) are unrolled;
``log2_rolled_extent``
    log2 of the extent of the innermost loop left rolled (0: none), the trip count around the body;
``s3_unrolled``, ``r1_unrolled``
    1 if every loop of the register block's spatial tile (S3, but the vectorised loop) / of the
    inner reduction tile R1 is unrolled: its accumulators can stay in registers, its loads be
    scheduled together;
``log2_unrolled_vector_ops``
    log2 of the vector statements of the unrolled body (steps x vectors of the vectorised tile): the
    size of the straight-line code.

This reads the loop order of :class:`~tensorgym.spaces.tiles.builder.TilesBuilder`; it is a model of
TVM's rule, not TVM's own answer (nothing is lowered), which is what keeps it cheap enough for a GA's
populations. Only CPU ``tiles`` spaces have these features (:func:`has_code_features`).
"""

from __future__ import annotations

import math

import numpy as np

from tensorgym.config import Config
from tensorgym.spaces.base import Space

CODE_FEATURE_NAMES = ("log2_unrolled_steps", "unrolled_loops", "log2_rolled_extent", "s3_unrolled", "r1_unrolled",
                      "log2_unrolled_vector_ops")


def has_code_features(space: Space) -> bool:
    """Whether ``space`` is a CPU ``tiles`` space (4 spatial and 2 reduction tile levels, an ``unroll`` knob)."""
    from tensorgym.spaces.tiles.space import TilesSpace

    return (isinstance(space, TilesSpace) and (space.spatial_levels, space.reduction_levels) == (4, 2)
            and "unroll" in space.scalar_knob_choices())


def _inner_loops(space: Space, config: Config) -> list[tuple[str, int]]:
    """(band, extent) of the main nest's serial loops of extent > 1, innermost first, the vectorised one left out."""
    spatial = [lp.name for lp in space.loops if lp.kind == "spatial"]
    reduction = [lp.name for lp in space.loops if lp.kind == "reduction"]
    bands = (("S1", spatial, 1), ("R0", reduction, 0), ("S2", spatial, 2), ("R1", reduction, 1), ("S3", spatial, 3))
    order = [(band, config[name][level]) for band, names, level in bands for name in names]
    order.pop()  # the last spatial loop's S3 tile is vectorised: one vector statement
    return [(band, extent) for band, extent in reversed(order) if extent > 1]


def code_features(space: Space, config: Config) -> np.ndarray:
    """The :data:`CODE_FEATURE_NAMES` of ``config`` (a config of a CPU ``tiles`` space, see the module docs)."""
    max_step = int(config["unroll"])
    steps, unrolled = 1, []
    loops = _inner_loops(space, config)
    for band, extent in loops:
        if steps * extent > max_step:
            break
        steps *= extent
        unrolled.append(band)
    rolled = loops[len(unrolled)][1] if len(unrolled) < len(loops) else 1
    left = {band for band, _ in loops[len(unrolled):]}
    spatial = [lp.name for lp in space.loops if lp.kind == "spatial"]
    vectors = math.ceil(config[spatial[-1]][3] / space.target.vector_lanes_fp32)
    return np.array([math.log2(steps), float(len(unrolled)), math.log2(rolled), float("S3" not in left),
                     float("R1" not in left), math.log2(steps * max(1, vectors))], dtype=np.float64)


def code_feature_matrix(space: Space, configs: list[Config]) -> np.ndarray:
    """:func:`code_features` of every config, one row each."""
    if not configs:
        return np.zeros((0, len(CODE_FEATURE_NAMES)))
    return np.vstack([code_features(space, c) for c in configs])


__all__ = ["CODE_FEATURE_NAMES", "code_feature_matrix", "code_features", "has_code_features"]
