"""Analytical features of a tiled loop nest on a CPU (the CPU counterparts of seed 000's AF).

Seed 000 ("Ansor-AF") replaces Ansor's 164 AST features with seven analytical
ones computed from tile sizes, all defined for GPUs (shared memory, warps,
SMs). Here they are re-derived for the ``SSRSRS`` loop nest of the ``tiles``
space on a CPU. Three nested *blocks* of the iteration space matter:

* the **register block**: one reduction step of the innermost spatial tile S3
  (the accumulators that stay in vector registers);
* the **L1 block**: everything below R0, i.e. spatial tiles S2*S3 and the
  reduction tile R1;
* the **L2 block**: everything below the parallel loop S0, i.e. spatial
  tiles S1*S2*S3 and the whole reduction.

For a block with loop extents ``e``, the footprint of a tensor is the product
over its dimensions of the range its index expression spans,
``sum(coeff * (e[loop] - 1)) + 1``; the block moves ``4 * sum(footprints)``
bytes (fp32) and performs ``2 * prod(e)`` FLOPs.

===================  =====================================================================
feature              formula (CPU)                                  seed 000 counterpart
===================  =====================================================================
oi_l2                FLOPs / bytes of the L2 block                  OI_Global_Mem
oi_l1                FLOPs / bytes of the L1 block                  OI_Shared_Mem
l2_fit, l1_fit       block bytes / cache size (L2, L1d, read        (shared-memory capacity
                     from the machine); > 1 means it spills          pruning)
reg_reuse            1 / sum over tensors T of 1/reuse_T, reuse_T   Reg_Reuse_Factor
                     = product of register-block extents of the
                     loops that do not index T (the output's
                     reuse is the R1 reduction extent it
                     accumulates over in registers)
ilp                  independent vector accumulators: the S3 tile   ILP
                     in vectors, ceil(v / lanes) * prod(other S3)
reg_pressure         ilp / vector registers (32 zmm); > ~0.9 spills WLP / Estimated_Occupancy
lane_util            v / (lanes * ceil(v / lanes)), v = vectorised  (no GPU analogue: vector
                     S3 extent                                      lane utilisation)
parallel_balance     (P / cores) / ceil(P / cores), P = fused S0    Wave_Efficiency (cores
                     extent                                         play the SMs)
parallel_fraction    min(P, cores) / cores                          (occupancy of the cores)
contiguity           share of tensors whose contiguous dimension    (bank conflicts: access
                     the vectorised loop walks with stride 1        stride of adjacent lanes)
unroll, cache_write  the config's unroll step index / 3, and flag   (Ansor's annotation)
===================  =====================================================================

:func:`scaled_features` puts the unbounded ones (intensities, ratios,
counts) on a ``log2(1 + x)`` scale: that is what cost models learn from.
:func:`normalise` maps the scaled features into [0, 1] for observations.

**Generic features** (:func:`generic_features`) describe the loop nest but
not the machine, in the spirit of Ansor's per-statement features (loop
extents per annotation, vector length, unroll step, parallel extent): the
input of Ansor's own cost model ("Ansor", "Ansor-DS"), whose 164 features
need a TE lowering TVM 0.27 no longer has.
"""

from __future__ import annotations

import math
from math import ceil, prod

import numpy as np

FEATURE_NAMES = (
    "oi_l2", "oi_l1", "l2_fit", "l1_fit", "reg_reuse", "ilp", "reg_pressure", "lane_util",
    "parallel_balance", "parallel_fraction", "contiguity", "unroll", "cache_write",
)

# The unbounded features (intensities, ratios, counts) and the value of log2(1 + x) that maps
# to 1.0 in observations; the others are fractions or flags in [0, 1] already.
LOG_SCALE = {"oi_l2": 10.0, "oi_l1": 10.0, "l2_fit": 6.0, "l1_fit": 6.0, "reg_reuse": 8.0, "ilp": 8.0,
             "reg_pressure": 2.0}
_LOG_INDEX = np.array([name in LOG_SCALE for name in FEATURE_NAMES])
_BOUNDS = np.array([LOG_SCALE.get(name, 1.0) for name in FEATURE_NAMES])


def footprint(access, extents: dict[str, int]) -> int:
    """Elements of a tensor touched by a block with the given loop extents."""
    return prod(sum(c * (extents.get(loop, 1) - 1) for loop, c in dim) + 1 for dim in access)


def block_traffic(accesses, extents: dict[str, int]) -> tuple[float, float]:
    """(FLOPs, bytes) of one block: 2 * iterations, 4 bytes per touched element."""
    flops = 2.0 * prod(extents.values())
    elements = sum(footprint(a, extents) for a in accesses.values())
    return flops, 4.0 * elements


def register_reuse(accesses, extents: dict[str, int], spatial, output_reuse: int) -> float:
    """1 / sum over tensors T of 1 / reuse_T, for a register block with the given loop ``extents``.

    An input's reuse is the product of the block extents of the ``spatial`` loops that do not
    index it; the output (the last tensor of ``accesses``), accumulated in registers, has
    ``output_reuse``. Shared by the CPU ``reg_reuse`` and the GPU ``Reg_Reuse_Factor``.
    """
    inverse = 0.0
    for name in list(accesses)[:-1]:
        indexed = {loop for dim in accesses[name] for loop, _ in dim}
        inverse += 1.0 / prod(extents[n] for n in spatial if n not in indexed)
    inverse += 1.0 / output_reuse
    return 1.0 / inverse


def wave_efficiency(tasks: int, workers: int) -> float:
    """(tasks / workers) / ceil(tasks / workers): the busy share of the waves (1 when they are full).

    The CPU ``parallel_balance`` (tasks of the parallel loop on cores) and the GPU
    ``Wave_Efficiency`` (thread blocks on SMs; 320 blocks on 128 SMs: 0.83).
    """
    if tasks < 1 or workers < 1:
        raise ValueError(f"need >= 1 task and >= 1 worker, got {tasks} and {workers}")
    waves = tasks / workers
    return waves / ceil(waves)


def tile_features(space, config) -> np.ndarray:
    """The raw analytical features of a ``tiles`` config (order: :data:`FEATURE_NAMES`)."""
    wl, target = space.nest, space.target  # the loop nest that is tiled (see TilesSpace.nest)
    loops = wl.loops
    tiles = {lp.name: config[lp.name] for lp in loops}
    spatial = [lp.name for lp in loops if lp.kind == "spatial"]
    reduction = [lp.name for lp in loops if lp.kind == "reduction"]
    accesses = wl.accesses
    lanes = target.vector_lanes_fp32

    l2_ext = {n: prod(tiles[n][1:]) for n in spatial} | {n: prod(tiles[n]) for n in reduction}
    l1_ext = {n: prod(tiles[n][2:]) for n in spatial} | {n: tiles[n][1] for n in reduction}
    reg_ext = {n: tiles[n][3] for n in spatial} | {n: 1 for n in reduction}

    l2_flops, l2_bytes = block_traffic(accesses, l2_ext)
    l1_flops, l1_bytes = block_traffic(accesses, l1_ext)

    reg_reuse = register_reuse(accesses, reg_ext, spatial, output_reuse=prod(tiles[n][1] for n in reduction))

    vec_loop = spatial[-1]
    v = tiles[vec_loop][3]
    vectors = ceil(v / lanes)
    ilp = vectors * prod(reg_ext[n] for n in spatial[:-1])
    lane_util = v / (lanes * vectors)

    parallel = prod(tiles[n][0] for n in spatial)
    cores = target.num_cores
    balance = wave_efficiency(parallel, cores)

    contiguous = 0
    for access in accesses.values():
        inner = dict(access[-1])
        contiguous += inner.get(vec_loop, 0) == 1
    unroll_index = space.unroll_choices.index(config["unroll"]) / max(1, len(space.unroll_choices) - 1)

    return np.array([
        l2_flops / l2_bytes, l1_flops / l1_bytes, l2_bytes / target.l2_bytes, l1_bytes / target.l1d_bytes,
        reg_reuse, float(ilp), ilp / target.vector_registers, lane_util, balance, min(parallel, cores) / cores,
        contiguous / len(accesses), unroll_index, float(config["cache_write"]),
    ], dtype=np.float64)


def scaled_features(raw: np.ndarray) -> np.ndarray:
    """:func:`tile_features` with ``log2(1 + x)`` applied to the unbounded features (:data:`LOG_SCALE`)."""
    raw = np.asarray(raw, dtype=np.float64)
    return np.where(_LOG_INDEX, np.log2(1.0 + np.maximum(raw, 0.0)), raw)


def normalise(raw: np.ndarray) -> np.ndarray:
    """:func:`scaled_features` mapped into [0, 1] for observations (clipped at :data:`LOG_SCALE`)."""
    return np.clip(scaled_features(raw) / _BOUNDS, 0.0, 1.0).astype(np.float32)


# -- generic (machine-independent) features ---------------------------------------------
def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0


def generic_feature_names(space) -> tuple[str, ...]:
    """Names of :func:`generic_features` for a ``tiles`` space, in order."""
    names = []
    for lp in space.loops:
        if lp.extent > 1:
            names += [f"log2_{lp.name}.{level}" for level in range(space.levels[lp.name])]
    names += ["log2_S0_parallel", "log2_S1", "log2_S2", "log2_S3", "log2_R0", "log2_R1",
              "log2_S2S3", "log2_S1S2S3", "log2_R1S3", "log2_S2R1S3",
              "log2_vector_len", "log2_unroll", "cache_write"]
    return tuple(names)


def generic_features(space, config) -> np.ndarray:
    """Machine-independent schedule features of a ``tiles`` config.

    In order (all logs base 2):

    * ``log2_{loop}.{level}``: every tile size of every loop of extent > 1,
      outermost level first (4 levels for spatial loops, 2 for reductions);
    * ``log2_S0_parallel`` ... ``log2_S3``: the product over spatial loops of
      each level, i.e. the trip count of each spatial band of the ``SSRSRS``
      nest; ``S0`` is the extent of the fused parallel loop;
    * ``log2_R0``, ``log2_R1``: the same for the two reduction bands;
    * ``log2_S2S3``, ``log2_S1S2S3``: spatial iterations below R0 and below
      S0 (the sizes of the inner blocks);
    * ``log2_R1S3``, ``log2_S2R1S3``: iterations of the innermost loop bodies
      (R1 x S3, and S2 x R1 x S3);
    * ``log2_vector_len``: the innermost tile of the last spatial loop (the
      vectorised loop);
    * ``log2_unroll``: ``log2(1 + auto_unroll_max_step)``; ``cache_write``: 0/1.

    Trees split on thresholds, so the logs change nothing for a tree model;
    products of several tile sizes, on the other hand, are new information for
    it, hence the per-level products.
    """
    out: list[float] = []
    spatial = [lp.name for lp in space.nest.spatial_loops]
    reduction = [lp.name for lp in space.nest.reduction_loops]
    for lp in space.loops:
        if lp.extent > 1:
            out += [_log2(t) for t in config[lp.name]]
    s = [prod(config[n][level] for n in spatial) for level in range(4)]
    r = [prod(config[n][level] for n in reduction) for level in range(2)]
    out += [_log2(v) for v in s]
    out += [_log2(v) for v in r]
    out += [_log2(s[2] * s[3]), _log2(s[1] * s[2] * s[3]), _log2(r[1] * s[3]), _log2(s[2] * r[1] * s[3])]
    out += [_log2(config[spatial[-1]][3]), _log2(1 + config["unroll"]), float(config["cache_write"])]
    return np.asarray(out, dtype=np.float64)
