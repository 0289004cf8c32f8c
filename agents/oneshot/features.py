"""The one-shot predictor's input: one fixed-length vector per (layer, config), computed in batches.

Seed 004 feeds its model program features, the raw knob values and the
task's shape. Here, for a config of the ``tiles`` space, in order
(:func:`feature_names`):

1. the analytical features on their learning scale (13;
   :mod:`tensorgym.spaces.tiles.features`, ``scaled_features``);
2. the generic schedule features (:func:`~tensorgym.spaces.tiles.features.generic_features`)
   in a layout shared by every layer: ``log2`` of the tile size of every
   level of every loop of every operator (levels of loops the layer lacks
   read 0), then the 13 per-band products;
3. the raw knob values: every tile size (loops the layer lacks: 1), the
   unroll step and ``cache_write``;
4. the task: every loop extent (1 where absent), the conv stride, the
   operator (one-hot) and ``log2`` of the FLOP count.

:class:`BatchFeaturizer` computes all of it with NumPy over a matrix of knob
values, so that the predictor's search can score hundreds of thousands of
configs; ``tests/test_oneshot.py`` checks it against the per-config functions
of the space.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tensorgym.config import Config
from tensorgym.envs.tile_hop import COMMON_LOOPS
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.spaces.tiles.features import FEATURE_NAMES, scaled_features

LEVELS = {"spatial": 4, "reduction": 2}
# (op, loop, level) of every tile size, in the shared layout
TILE_SLOTS: tuple[tuple[str, str, int], ...] = tuple(
    (op, loop, level) for op, loop, kind in COMMON_LOOPS for level in range(LEVELS[kind]))
BAND_NAMES = ("S0_parallel", "S1", "S2", "S3", "R0", "R1", "S2S3", "S1S2S3", "R1S3", "S2R1S3", "vector_len",
              "unroll", "cache_write")
OPS = ("conv2d", "matmul")


def generic_feature_names() -> tuple[str, ...]:
    """The features that mean the same for every operator: the analytical ones and the per-band products.

    The others have a slot per (operator, loop, level) or describe the layer's absolute shape: trained on
    a few layers, a predictor can tell the layers apart by them and learn each one's ranking by heart,
    which says nothing about a layer it has not seen (and a conv slot learns nothing from a matmul).
    """
    return tuple(f"af_{n}" for n in FEATURE_NAMES) + tuple(f"log2_{b}" for b in BAND_NAMES)


# Which features a predictor reads: "all" (seed 004's: config, knobs and the task) or "generic" (see above).
FEATURE_SETS = ("all", "generic")


def ignored_features(feature_set: str) -> list[str]:
    """The names of the features a predictor of ``feature_set`` reads as 0."""
    if feature_set not in FEATURE_SETS:
        raise ValueError(f"feature_set must be one of {FEATURE_SETS}, got {feature_set!r}")
    keep = set(generic_feature_names()) if feature_set == "generic" else set(feature_names())
    return [name for name in feature_names() if name not in keep]


def feature_names() -> tuple[str, ...]:
    """Names of the predictor's input features, in order."""
    tiles = [f"{op}.{loop}.{level}" for op, loop, level in TILE_SLOTS]
    return (tuple(f"af_{n}" for n in FEATURE_NAMES) + tuple(f"log2_{t}" for t in tiles)
            + tuple(f"log2_{b}" for b in BAND_NAMES) + tuple(f"knob_{t}" for t in tiles) + ("knob_unroll",
            "knob_cache_write") + tuple(f"extent_{op}.{loop}" for op, loop, _ in COMMON_LOOPS)
            + ("stride",) + tuple(f"op_{op}" for op in OPS) + ("log2_flops",))


def unbounded_unroll_choices(space: TilesSpace) -> tuple[int, ...]:
    """The unroll choices of ``space`` without its bounds.

    A bounded space (a landscape's benchmark sub-space) keeps only some unroll steps, and the
    analytical ``unroll`` feature is the step's index among the choices: scored within the bounds, the
    same config would read another value than it did in the (unbounded) training data.
    """
    return tuple(space.tiling.unroll_choices)  # the tiling keeps the unbounded list


def _log2(x: np.ndarray) -> np.ndarray:
    return np.log2(np.maximum(x, 1.0))


class BatchFeaturizer:
    """Predictor inputs for configs of one ``tiles`` space (see the module docs)."""

    def __init__(self, space: TilesSpace):
        if not isinstance(space, TilesSpace):
            raise TypeError(f"the one-shot predictor reads configs of the tiles space, got {type(space).__name__}")
        wl = space.workload
        if wl.op not in OPS:
            raise ValueError(f"the one-shot predictor knows the operators {OPS}, not {wl.op!r}")
        self.space = space
        self.loops = [lp.name for lp in space.loops]
        self.spatial = [lp.name for lp in wl.spatial_loops]
        self.reduction = [lp.name for lp in wl.reduction_loops]
        self.levels = {n: space.levels[n] for n in self.loops}
        slot_of = {slot: i for i, slot in enumerate(TILE_SLOTS)}
        self._columns = {n: [slot_of[(wl.op, n, level)] for level in range(self.levels[n])] for n in self.loops}
        target = space.target
        self.lanes, self.cores = target.vector_lanes_fp32, target.num_cores
        self.l1, self.l2, self.vregs = target.l1d_bytes, target.l2_bytes, target.vector_registers
        vec_loop = self.spatial[-1]
        self.contiguity = sum(dict(a[-1]).get(vec_loop, 0) == 1 for a in wl.accesses.values()) / len(wl.accesses)
        extents = {(op, loop): 1 for op, loop, _ in COMMON_LOOPS}
        extents.update({(wl.op, lp.name): lp.extent for lp in space.loops})
        self.task = np.array([extents[(op, loop)] for op, loop, _ in COMMON_LOOPS]
                             + [getattr(wl, "stride", 1)] + [float(wl.op == op) for op in OPS]
                             + [math.log2(wl.flops)], dtype=np.float64)
        self.size = len(feature_names())
        self.unroll_choices = unbounded_unroll_choices(space)

    # -- configs -> knob matrix ---------------------------------------------------------------
    def knobs(self, configs: Sequence[Config]) -> np.ndarray:
        """``(n, len(TILE_SLOTS) + 2)``: every tile size in the shared layout (absent: 1), unroll, cache_write."""
        return self.genome_knobs([tuple(config[name] for name in self.genome) for config in configs])

    @property
    def genome(self) -> tuple[str, ...]:
        """The knobs of a config in the order :meth:`genome_knobs` reads them: the loops, unroll, cache_write."""
        return (*self.loops, "unroll", "cache_write")

    def genome_knobs(self, genomes: Sequence[tuple]) -> np.ndarray:
        """:meth:`knobs` of configs given as tuples of their knob values in :attr:`genome` order."""
        out = np.ones((len(genomes), len(TILE_SLOTS) + 2), dtype=np.float64)
        columns = list(self._columns.values())
        for row, values in zip(out, genomes):
            for cols, value in zip(columns, values):
                row[cols] = value
            row[-2], row[-1] = values[-2], values[-1]
        return out

    # -- the features ------------------------------------------------------------------------------
    def __call__(self, configs: Sequence[Config]) -> np.ndarray:
        """The ``(n, size)`` input matrix of ``configs``."""
        return self.features(self.knobs(configs))

    def features(self, knobs: np.ndarray) -> np.ndarray:
        """The ``(n, size)`` input matrix of a knob matrix (:meth:`knobs`)."""
        tiles = knobs[:, :-2]
        return np.hstack([
            scaled_features(self.analytical(knobs)), _log2(tiles), self._bands(knobs), knobs,
            np.broadcast_to(self.task, (len(knobs), len(self.task))),
        ])

    def _tile(self, knobs: np.ndarray, loop: str, level: int) -> np.ndarray:
        return knobs[:, self._columns[loop][level]]

    def _bands(self, knobs: np.ndarray) -> np.ndarray:
        """The 13 per-band generic features (``log2`` of products of tile levels), as in ``generic_features``."""
        t = self._tile
        s = [np.prod([t(knobs, n, lv) for n in self.spatial], axis=0) for lv in range(4)]
        r = [np.prod([t(knobs, n, lv) for n in self.reduction], axis=0) for lv in range(2)]
        values = s + r + [s[2] * s[3], s[1] * s[2] * s[3], r[1] * s[3], s[2] * r[1] * s[3],
                          t(knobs, self.spatial[-1], 3), 1.0 + knobs[:, -2]]
        return np.column_stack([_log2(v) for v in values] + [knobs[:, -1]])

    def analytical(self, knobs: np.ndarray) -> np.ndarray:
        """The raw analytical features (``tile_features``, batched over the rows of ``knobs``)."""
        t = self._tile
        accesses = self.space.workload.accesses
        spatial, reduction = self.spatial, self.reduction
        levels = self.levels
        l2 = {n: np.prod([t(knobs, n, lv) for lv in range(1, levels[n])], axis=0) for n in spatial}
        l2 |= {n: np.prod([t(knobs, n, lv) for lv in range(levels[n])], axis=0) for n in reduction}
        l1 = {n: np.prod([t(knobs, n, lv) for lv in range(2, levels[n])], axis=0) for n in spatial}
        l1 |= {n: t(knobs, n, 1) for n in reduction}
        ones = np.ones(len(knobs))
        reg = {n: t(knobs, n, 3) for n in spatial} | {n: ones for n in reduction}

        def traffic(ext):
            flops = 2.0 * np.prod([ext[n] for n in self.loops], axis=0)
            elements = sum(np.prod([sum(c * (ext.get(loop, ones) - 1) for loop, c in dim) + 1 for dim in access],
                                   axis=0) for access in accesses.values())
            return flops, 4.0 * elements

        l2_flops, l2_bytes = traffic(l2)
        l1_flops, l1_bytes = traffic(l1)
        inverse = 1.0 / np.prod([t(knobs, n, 1) for n in reduction], axis=0)
        for name in list(accesses)[:-1]:
            indexed = {loop for dim in accesses[name] for loop, _ in dim}
            inverse = inverse + 1.0 / np.prod([reg[n] for n in spatial if n not in indexed] or [ones], axis=0)
        v = reg[spatial[-1]]
        vectors = np.ceil(v / self.lanes)
        ilp = vectors * np.prod([reg[n] for n in spatial[:-1]] or [ones], axis=0)
        parallel = np.prod([t(knobs, n, 0) for n in spatial], axis=0)
        waves = parallel / self.cores
        choices = self.unroll_choices
        unroll = np.array([choices.index(int(u)) for u in knobs[:, -2]], dtype=np.float64)
        return np.column_stack([
            l2_flops / l2_bytes, l1_flops / l1_bytes, l2_bytes / self.l2, l1_bytes / self.l1, 1.0 / inverse, ilp,
            ilp / self.vregs, v / (self.lanes * vectors), waves / np.ceil(waves),
            np.minimum(parallel, self.cores) / self.cores, np.full(len(knobs), self.contiguity),
            unroll / max(1, len(choices) - 1), knobs[:, -1],
        ])


def reference_features(space: TilesSpace, config: Config) -> np.ndarray:
    """The same vector from the space's per-config functions (slow; what the tests compare with)."""
    featurizer = BatchFeaturizer(space)
    knobs = featurizer.knobs([config])[0]
    tiles = knobs[:-2]
    generic = space.generic_features(config)
    bands = generic[-len(BAND_NAMES):]
    return np.concatenate([space.scaled_features(config), _log2(tiles), bands, knobs, featurizer.task])

