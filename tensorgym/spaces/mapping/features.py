"""Features of ``mapping`` configs, for the cost models (``ga``, ``dgd``) and the env's observations.

**Analytical features** (:func:`mapping_features`, the ``"af"`` set): what the
candidate costs, then the CPU analogues of seed 000's tile features for the
loops left outside the intrinsic, counted in intrinsic calls. A block of the
residual nest with loop extents ``E`` touches about ``rows x reduction`` packed
activations, ``lane blocks x lanes x reduction`` packed weights and ``rows x
lane blocks x lanes`` accumulators (``rows``: the output rows of the block, the
fused rows of a tile included; ``reduction``: its reduction elements), halos
ignored.

=======================  ======================================================================
feature                  meaning
=======================  ======================================================================
tile                     1 for an AMX tile intrinsic, 0 for a dot product
lanes, depth             the intrinsic's lanes and reduction depth
utilisation              useful share of the intrinsic's multiply-adds (padding wastes the rest)
duplication              packed activations / activations (an im2col unfold duplicates)
packed_activation_kib    size of the packed activations (KiB)
packed_weight_kib        size of the packed weights (KiB)
panel_l2                 the operands one output tile streams over the reduction / L2
fused_reductions         reduction loops fused onto ``r`` (/ 3)
fused_rows               spatial loops fused onto ``i1`` (/ 3; 0 for a dot product)
parallel_tasks           iterations of the fused parallel loop S0
parallel_balance         (tasks / cores) / ceil(tasks / cores)
register_block           intrinsic calls of the register block S3 (accumulators kept)
register_pressure        the register block's need / the register file (:mod:`.pruning`)
reduction_reuse          reduction steps R1 over which the register block stays in registers
l1_fit, l2_fit           bytes of the S2-S3-R1 block / L1d, of the S1-S2-S3 block over the
                         whole reduction / L2
calls                    intrinsic calls of the whole kernel
unroll, cache_write      the unroll choice index / 3 and the write-back location flag
=======================  ======================================================================

:func:`scaled` puts the unbounded ones on a ``log2(1 + x)`` scale (what cost
models learn from); :func:`normalise` maps that into [0, 1] for observations.

**Generic features** (:func:`generic_features`): the machine-independent
description of the schedule: the intrinsic (one-hot over the registry), which
loops are fused onto which axis, the log2 tile sizes of every coordinate of the
space (0 where the config's candidate lacks the loop), the log2 trip counts of
the six bands, the unroll step and the write-back flag.
"""

from __future__ import annotations

import math
from math import prod

import numpy as np

from ..tiles.features import wave_efficiency
from .intrinsics import INTRINSICS
from .nest import ACCUMULATOR_BYTES, CONV_REDUCTIONS, CONV_ROWS, MappedNest
from .pruning import vector_registers_needed

FEATURE_NAMES = (
    "tile", "lanes", "depth", "utilisation", "duplication", "packed_activation_kib", "packed_weight_kib", "panel_l2",
    "fused_reductions", "fused_rows", "parallel_tasks", "parallel_balance", "register_block", "register_pressure",
    "reduction_reuse", "l1_fit", "l2_fit", "calls", "unroll", "cache_write",
)
LOG_SCALE = {"lanes": 5.0, "depth": 7.0, "duplication": 4.0, "packed_activation_kib": 16.0,
             "packed_weight_kib": 16.0, "panel_l2": 2.0, "parallel_tasks": 14.0, "register_block": 7.0,
             "register_pressure": 2.0, "reduction_reuse": 12.0, "l1_fit": 8.0, "l2_fit": 8.0, "calls": 30.0}
_LOG_INDEX = np.array([name in LOG_SCALE for name in FEATURE_NAMES])
_BOUNDS = np.array([LOG_SCALE.get(name, 1.0) for name in FEATURE_NAMES])


def _block_bytes(nest: MappedNest, extents: dict[str, int]) -> float:
    """Bytes a block of the residual nest touches (see the module docs)."""
    intr = nest.intrinsic
    lanes_loop, rows_loop, red_loop = nest.names["lanes"], nest.names["rows"], nest.names["reduction"]
    lane_blocks = extents[lanes_loop]
    reduction = prod(extents[r] for r in nest.outer_reductions) * extents[red_loop] * intr.depth
    if nest.tile:
        rows = prod(extents[s] for s in nest.outer_spatial) * extents[rows_loop] * intr.rows
    else:
        rows = prod(extents[lp.name] for lp in nest.spatial if lp.name != lanes_loop)
    weights = lane_blocks * intr.lanes * reduction * nest.weight_bytes
    activations = rows * reduction * nest.activation_bytes
    accumulators = rows * lane_blocks * intr.lanes * ACCUMULATOR_BYTES
    return float(weights + activations + accumulators)


def mapping_features(space, config) -> np.ndarray:
    """The raw analytical features of a ``mapping`` config (order: :data:`FEATURE_NAMES`)."""
    nest: MappedNest = space.nest(config)
    target = space.target
    intr, res = nest.intrinsic, nest.resources
    spatial = [lp.name for lp in nest.spatial]
    reduction = [lp.name for lp in nest.reductions]
    s = [{n: config[n][level] for n in spatial} for level in range(4)]
    r = [{n: config[n][level] for n in reduction} for level in range(2)]
    l1 = _block_bytes(nest, {n: s[2][n] * s[3][n] for n in spatial} | r[1])
    l2 = _block_bytes(nest, {n: s[1][n] * s[2][n] * s[3][n] for n in spatial}
                      | {n: r[0][n] * r[1][n] for n in reduction})
    tasks = prod(s[0].values())
    block = prod(s[3].values())
    lanes_loop = nest.names["lanes"]
    if nest.tile:
        row_tiles = block // s[3][lanes_loop]
        need = block * intr.rows * intr.lanes * ACCUMULATOR_BYTES + (row_tiles + s[3][lanes_loop]) * intr.rows * 64
        pressure = need / target.l1d_bytes
    else:
        pressure = vector_registers_needed(intr, block, s[3][lanes_loop]) / target.vector_registers
    calls = prod(lp.extent for lp in nest.loops)
    unroll_index = space.tiling_of(config).unroll_choices.index(config["unroll"]) / 3.0
    return np.array([
        float(nest.tile), float(intr.lanes), float(intr.depth), res.utilisation, res.duplication,
        res.packed_activation_bytes / 1024, res.packed_weight_bytes / 1024, res.panel_bytes / target.l2_bytes,
        len(nest.fused_reduction) / 3, len(nest.fused_rows) / 3, float(tasks),
        wave_efficiency(tasks, target.num_cores), float(block), pressure, float(prod(r[1].values())),
        l1 / target.l1d_bytes, l2 / target.l2_bytes, float(calls), unroll_index, float(config["cache_write"]),
    ], dtype=np.float64)


def scaled(raw: np.ndarray) -> np.ndarray:
    """:func:`mapping_features` with ``log2(1 + x)`` on the unbounded features (:data:`LOG_SCALE`)."""
    raw = np.asarray(raw, dtype=np.float64)
    return np.where(_LOG_INDEX, np.log2(1.0 + np.maximum(raw, 0.0)), raw)


def normalise(raw: np.ndarray) -> np.ndarray:
    """:func:`scaled` mapped into [0, 1] (clipped at :data:`LOG_SCALE`)."""
    return np.clip(scaled(raw) / _BOUNDS, 0.0, 1.0).astype(np.float32)


# -- generic features --------------------------------------------------------------------------------------
_FUSABLE = (*CONV_REDUCTIONS, *CONV_ROWS)


def generic_feature_names(space) -> tuple[str, ...]:
    names = [f"intrinsic_{name}" for name in INTRINSICS]
    names += [f"fused_{loop}" for loop in _FUSABLE]
    names += [f"log2_{c.label}" for c in space.coordinates if c.level >= 0]
    names += ["log2_S0_parallel", "log2_S1", "log2_S2", "log2_S3", "log2_R0", "log2_R1", "log2_unroll", "cache_write"]
    return tuple(names)


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0


def generic_features(space, config) -> np.ndarray:
    """Machine-independent features of a ``mapping`` config (order: :func:`generic_feature_names`)."""
    nest: MappedNest = space.nest(config)
    out = [float(name == nest.intrinsic.name) for name in INTRINSICS]
    fused = set(nest.fused_reduction) | set(nest.fused_rows)
    out += [float(loop in fused) for loop in _FUSABLE]
    for coord in space.coordinates:
        if coord.level >= 0:
            value = config.get(coord.knob)
            out.append(_log2(value[coord.level]) if value is not None else 0.0)
    spatial = [lp.name for lp in nest.spatial]
    reduction = [lp.name for lp in nest.reductions]
    out += [_log2(prod(config[n][level] for n in spatial)) for level in range(4)]
    out += [_log2(prod(config[n][level] for n in reduction)) for level in range(2)]
    out += [_log2(1 + config["unroll"]), float(config["cache_write"])]
    return np.asarray(out, dtype=np.float64)
