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

:func:`normalise` maps each feature into [0, 1] for observations; cost
models use the raw values.
"""

from __future__ import annotations

from math import ceil, log2, prod

import numpy as np

FEATURE_NAMES = (
    "oi_l2", "oi_l1", "l2_fit", "l1_fit", "reg_reuse", "ilp", "reg_pressure", "lane_util",
    "parallel_balance", "parallel_fraction", "contiguity", "unroll", "cache_write",
)


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
    wl, target = space.workload, space.target
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


def normalise(raw: np.ndarray) -> np.ndarray:
    """Map :func:`tile_features` into [0, 1] (log scales for intensities and ratios)."""
    oi_l2, oi_l1, l2_fit, l1_fit, reg_reuse, ilp, pressure, *rest = raw
    scaled = [
        log2(1 + oi_l2) / 10, log2(1 + oi_l1) / 10,
        (log2(l2_fit) + 10) / 16, (log2(l1_fit) + 10) / 16,
        log2(1 + reg_reuse) / 8, log2(1 + ilp) / 8, pressure / 2,
        *rest,
    ]
    return np.clip(np.asarray(scaled, dtype=np.float32), 0.0, 1.0)
