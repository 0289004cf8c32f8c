"""Seed 000's seven analytical GPU features (Ansor-AF), for a CUDA target.

Seed 000 ("Accelerated Auto-Tuning of GPU Kernels for Tensor Computations",
ICS '24) feeds Ansor's XGBoost model seven features computed from the tile
sizes of Ansor's CUDA multi-level tiling instead of 164 AST features. Here
they are pure functions of the tile sizes and of a few hardware parameters:
nothing is compiled, and no GPU is needed to evaluate them. The CPU
counterparts that the ``tiles`` space uses are in :mod:`tensorgym.spaces.tiles.features`.

**The tiling** (:class:`GPUTiling`) is Ansor's CUDA structure ``SSSRRSRS``:
every spatial loop is split into 5 levels ``(grid, vthread, threads, reg1,
reg2)`` and every reduction loop into 3 levels ``(k0, k1, k2)``::

    blockIdx  = fused grid levels                  (one thread block per grid point)
    vthread   = fused vthread levels
    threadIdx = fused thread levels                (threads per block TB = prod of them)
    for k0:                                        (one shared-memory stage per iteration)
        inputs' tiles -> shared memory (cooperative fetch by the TB threads)
        for k1: for reg1: for k2: for reg2:        (register tile of one thread)
            out.local += ...
    out.local -> out                               (written once, after the whole reduction)

Derived quantities (``e`` = per-loop extents of a block, footprints as in
:func:`tensorgym.spaces.tiles.features.footprint`):

* ``TB`` = prod over spatial loops of ``threads``; ``nTB`` = prod of ``grid``;
  ``warps`` = ceil(TB / 32);
* register tile of a thread: spatial ``vthread*reg1*reg2``, reduction 1;
  shared tile of a block (one stage): spatial ``vthread*threads*reg1*reg2``,
  reduction ``k1*k2``; ``stages`` = prod of ``k0``;
* ``shared_elems`` = sum over inputs of their footprint on the shared tile;
  ``total_reg`` = output accumulators (prod of the spatial register tile) +
  sum over inputs of their footprint on the register tile (the registers
  the artifact counts, and prunes at 256).

The seven features (seed 000's definitions, with the formulas of its
released implementation wherever it has them):

======================  ========================================================================
feature                  formula
======================  ========================================================================
OI_Global_Mem            MACs / (32 * global_trans): MACs per element moved between global and
                         shared memory. ``global_trans`` = nTB * [ sum over inputs of
                         stages * ceil(shared footprint / TB) * warps / vector_len
                         + ceil(output tile / TB) * warps / vector_len ]: one warp-wide
                         transaction (32 elements) per load instruction of the cooperative
                         fetch, plus the final store of the output tile.
OI_Shared_Mem            MACs / (32 * shared_trans): MACs per element read from shared memory
                         into registers. Per reduction step every thread reads its register
                         footprint of each input, one warp instruction per element, replayed
                         ``bank_conflict_degree`` times: ``shared_trans`` = nTB * warps *
                         (prod of reduction extents) * sum over inputs of
                         conflict * register footprint. For a matmul this is
                         ``reg_i * reg_j / (c_A * reg_i + c_B * reg_j)``.
Reg_Reuse_Factor         1 / sum over tensors X of 1 / reuse_X, with reuse_X the product of
                         the register-tile extents of the loops that do not index X; the
                         output, kept in registers for the whole reduction, has reuse = the
                         product of the reduction extents.
ILP                      prod over spatial loops of vthread * reg1 * reg2 (independent
                         accumulators per thread).
WLP                      min(WLP_SM, WLP_REG): WLP_SM = (65536 / shared_elems) * warps,
                         WLP_REG = 65536 / ((total_reg + 25) * TB) (the artifact's constants).
Estimated_Occupancy      warps * blocks_per_SM / 64, blocks_per_SM = min(
                         floor(1024 / TB32), floor(shared bytes per SM / shared bytes),
                         floor(65536 / ((total_reg + 20) * TB32 + 20))), TB32 = TB rounded up
                         to a multiple of 32 (the artifact's heuristic: 20 registers per
                         thread beyond the tile).
Wave_Efficiency          (nTB / nSM) / ceil(nTB / nSM): the last wave's idle SMs (the paper's
                         example: 128 SMs, 320 blocks -> 2.5 / 3 = 0.83).
======================  ========================================================================

The bank-conflict degree (:func:`bank_conflict_degree`) simulates the 32
lanes of the first warp reading the first register element of an input at
the first reduction point: each lane's address in the row-major shared tile
modulo 32 banks; the degree is the largest number of *distinct* addresses
falling in one bank (lanes reading the same address are served by one
broadcast).

:func:`gpu_feasible` is the artifact's pruning rule: 32 <= TB <= 1024,
``total_reg`` <= 256, shared tile <= the shared memory per block. The artifact
zeroes the features of infeasible tilings (and the model predicts -inf).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import ceil, prod
from typing import Any

import numpy as np

from .features import footprint, register_reuse, wave_efficiency
from ...workloads import Workload

GPU_FEATURE_NAMES = (
    "OI_Global_Mem", "OI_Shared_Mem", "Reg_Reuse_Factor", "ILP", "WLP", "Estimated_Occupancy", "Wave_Efficiency",
)

SPATIAL_LEVELS = 5  # grid, vthread, threads, reg1, reg2
REDUCTION_LEVELS = 3  # k0, k1, k2


@dataclass(frozen=True)
class GPUHardware:
    """The GPU parameters the features use. Defaults reproduce seed 000's artifact (RTX 4090: 128 SMs).

    ``max_threads_per_sm`` and ``shared_memory_per_sm`` bound the blocks per SM in the occupancy
    estimate; the artifact passes the per-*block* limits there (1024 threads, 48 KiB), which the
    defaults keep. ``shared_capacity_elements`` is the artifact's WLP_SM numerator (64 Ki).
    """

    num_sms: int = 128
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024  # bytes
    max_threads_per_sm: int = 1024
    shared_memory_per_sm: int = 48 * 1024  # bytes
    registers_per_sm: int = 65536  # 32-bit registers
    max_warps_per_sm: int = 64
    shared_capacity_elements: int = 65536
    shared_memory_banks: int = 32
    element_bytes: int = 4  # fp32; one bank word
    vector_len: int = 1  # elements per global load instruction of the cooperative fetch
    register_overhead: int = 20  # registers per thread beyond the tile (occupancy)
    block_register_overhead: int = 20  # the artifact adds 20 registers per block (occupancy)
    wlp_register_overhead: int = 25  # registers per thread beyond the tile (WLP_REG)
    max_register_tile: int = 256  # the artifact's pruning bound on total_reg

    def __post_init__(self) -> None:
        for name in ("num_sms", "warp_size", "max_threads_per_block", "max_shared_memory_per_block",
                     "max_threads_per_sm", "shared_memory_per_sm", "registers_per_sm", "max_warps_per_sm",
                     "shared_capacity_elements", "shared_memory_banks", "element_bytes", "vector_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPUHardware.{name} must be >= 1, got {getattr(self, name)}")

    @classmethod
    def from_target(cls, target: Any) -> "GPUHardware":
        """The parameters of a CUDA :class:`~tensorgym.target.Target`.

        From its :class:`~tensorgym.target.CudaDevice` where it has one (the device's real per-SM
        limits, and the opt-in shared memory per block), then overridden by ``target.extra``.
        """
        if getattr(target, "kind", None) != "cuda":
            raise ValueError(f"GPU features need a CUDA target, got kind {getattr(target, 'kind', None)!r}")
        values: dict[str, int] = {}
        gpu = getattr(target, "device", None)
        if gpu is not None:
            values = {
                "num_sms": gpu.num_sms, "warp_size": gpu.warp_size, "max_threads_per_block": gpu.max_threads_per_block,
                "max_shared_memory_per_block": gpu.max_shared_memory_per_block_optin,
                "max_threads_per_sm": gpu.max_threads_per_sm, "shared_memory_per_sm": gpu.shared_memory_per_sm,
                "registers_per_sm": gpu.registers_per_sm, "max_warps_per_sm": gpu.max_threads_per_sm // gpu.warp_size,
            }
        known = set(cls.__dataclass_fields__)
        values |= {k: int(v) for k, v in dict(getattr(target, "extra", ())).items() if k in known}
        return cls(**values)


@dataclass(frozen=True)
class GPUTiling:
    """Ansor's CUDA multi-level tiling of a workload: loop name -> tile sizes, outermost level first.

    Spatial loops have 5 levels ``(grid, vthread, threads, reg1, reg2)``, reduction loops 3
    ``(k0, k1, k2)``; each loop's levels multiply to its extent.
    """

    workload: Workload
    tiles: Mapping[str, tuple[int, ...]]

    def __post_init__(self) -> None:
        tiles = {name: tuple(int(t) for t in value) for name, value in dict(self.tiles).items()}
        object.__setattr__(self, "tiles", tiles)
        names = {lp.name for lp in self.workload.loops}
        if set(tiles) != names:
            raise ValueError(f"a GPU tiling of {self.workload.label} gives tile sizes for loops {sorted(names)}; "
                             f"got {sorted(tiles)}")
        for lp in self.workload.loops:
            levels = SPATIAL_LEVELS if lp.kind == "spatial" else REDUCTION_LEVELS
            sizes = tiles[lp.name]
            if len(sizes) != levels or min(sizes) < 1 or prod(sizes) != lp.extent:
                raise ValueError(f"loop {lp.name!r} ({lp.kind}, extent {lp.extent}) needs {levels} positive tile "
                                 f"sizes that multiply to {lp.extent}; got {list(sizes)}")

    # -- derived sizes --------------------------------------------------------------------
    @property
    def spatial(self) -> list[str]:
        return [lp.name for lp in self.workload.loops if lp.kind == "spatial"]

    @property
    def reduction(self) -> list[str]:
        return [lp.name for lp in self.workload.loops if lp.kind == "reduction"]

    @property
    def threads_per_block(self) -> int:
        return prod(self.tiles[n][2] for n in self.spatial)

    @property
    def num_blocks(self) -> int:
        return prod(self.tiles[n][0] for n in self.spatial)

    @property
    def stages(self) -> int:
        """Shared-memory stages per block (iterations of the k0 loops)."""
        return prod(self.tiles[n][0] for n in self.reduction)

    @property
    def macs(self) -> int:
        return prod(lp.extent for lp in self.workload.loops)

    def register_extents(self) -> dict[str, int]:
        """Per-thread register tile: spatial vthread*reg1*reg2, reduction 1."""
        out = {n: self.tiles[n][1] * self.tiles[n][3] * self.tiles[n][4] for n in self.spatial}
        return out | {n: 1 for n in self.reduction}

    def shared_extents(self) -> dict[str, int]:
        """Per-block tile of one shared-memory stage: spatial vthread*threads*reg1*reg2, reduction k1*k2."""
        out = {n: prod(self.tiles[n][1:]) for n in self.spatial}
        return out | {n: self.tiles[n][1] * self.tiles[n][2] for n in self.reduction}

    def inputs(self) -> list[str]:
        return list(self.workload.accesses)[:-1]

    def shared_elements(self) -> int:
        """Elements of all input tiles held in shared memory by one block."""
        ext, acc = self.shared_extents(), self.workload.accesses
        return sum(footprint(acc[x], ext) for x in self.inputs())

    def register_elements(self) -> int:
        """The artifact's ``totalReg``: output accumulators + input register footprints."""
        ext, acc = self.register_extents(), self.workload.accesses
        return prod(ext[n] for n in self.spatial) + sum(footprint(acc[x], ext) for x in self.inputs())


def _warps(threads: int, hw: GPUHardware) -> int:
    return ceil(threads / hw.warp_size)


# -- the seven features ----------------------------------------------------------------------
def ilp(tiling: GPUTiling) -> float:
    """Independent accumulators per thread: prod over spatial loops of vthread * reg1 * reg2."""
    ext = tiling.register_extents()
    return float(prod(ext[n] for n in tiling.spatial))


def reg_reuse_factor(tiling: GPUTiling) -> float:
    """1 / sum_X 1 / reuse_X (see the module docs)."""
    out_reuse = prod(lp.extent for lp in tiling.workload.reduction_loops)
    return register_reuse(tiling.workload.accesses, tiling.register_extents(), tiling.spatial, out_reuse)


def wlp(tiling: GPUTiling, hw: GPUHardware = GPUHardware()) -> float:
    """min(WLP_SM, WLP_REG): warps that can be active per SM, limited by shared memory or registers."""
    tb = tiling.threads_per_block
    wlp_sm = hw.shared_capacity_elements / tiling.shared_elements() * _warps(tb, hw)
    wlp_reg = hw.registers_per_sm / ((tiling.register_elements() + hw.wlp_register_overhead) * tb)
    return min(wlp_sm, wlp_reg)


def estimated_occupancy(tiling: GPUTiling, hw: GPUHardware = GPUHardware()) -> float:
    """Active warps per SM / the SM's maximum (see the module docs)."""
    warps = _warps(tiling.threads_per_block, hw)
    tb32 = warps * hw.warp_size
    shared_bytes = tiling.shared_elements() * hw.element_bytes
    regs = tiling.register_elements() + hw.register_overhead
    blocks = min(
        hw.max_threads_per_sm // tb32,
        hw.shared_memory_per_sm // shared_bytes,
        hw.registers_per_sm // (regs * tb32 + hw.block_register_overhead),
    )
    return warps * max(blocks, 0) / hw.max_warps_per_sm


def global_transactions(tiling: GPUTiling, hw: GPUHardware = GPUHardware()) -> float:
    """Warp-wide global-memory transactions of the whole kernel (cooperative fetches + output store)."""
    tb = tiling.threads_per_block
    warps = _warps(tb, hw)
    ext, acc = tiling.shared_extents(), tiling.workload.accesses
    per_block = sum(tiling.stages * ceil(footprint(acc[x], ext) / tb) * warps / hw.vector_len for x in tiling.inputs())
    out_tile = prod(ext[n] for n in tiling.spatial)
    per_block += ceil(out_tile / tb) * warps / hw.vector_len
    return tiling.num_blocks * per_block


def oi_global_mem(tiling: GPUTiling, hw: GPUHardware = GPUHardware()) -> float:
    """MACs per element moved between global and shared memory: MACs / (32 * global transactions)."""
    return tiling.macs / (hw.warp_size * global_transactions(tiling, hw))


def _lane_offsets(tiling: GPUTiling, lanes: int) -> list[dict[str, int]]:
    """Each lane's index, per loop, inside the block tile at its first register element."""
    spatial = tiling.spatial
    threads = [tiling.tiles[n][2] for n in spatial]
    out = []
    for lane in range(lanes):
        coords, rest = {}, lane
        for name, count in zip(reversed(spatial), reversed(threads)):  # the last spatial loop varies fastest
            coords[name] = (rest % count) * tiling.tiles[name][3] * tiling.tiles[name][4]
            rest //= count
        out.append(coords | {n: 0 for n in tiling.reduction})
    return out


def bank_conflict_degree(tiling: GPUTiling, tensor: str, hw: GPUHardware = GPUHardware()) -> int:
    """Shared-memory replays of one warp-wide read of ``tensor`` (1: conflict-free; see the module docs)."""
    access = tiling.workload.accesses[tensor]
    ext = tiling.shared_extents()
    dims = [sum(c * (ext[loop] - 1) for loop, c in dim) + 1 for dim in access]
    strides = [prod(dims[i + 1:]) for i in range(len(dims))]
    lanes = min(hw.warp_size, tiling.threads_per_block)
    per_bank: dict[int, set[int]] = {}
    for coords in _lane_offsets(tiling, lanes):
        address = sum(stride * sum(c * coords[loop] for loop, c in dim) for dim, stride in zip(access, strides))
        per_bank.setdefault(address % hw.shared_memory_banks, set()).add(address)
    return max(len(addresses) for addresses in per_bank.values())


def shared_transactions(tiling: GPUTiling, hw: GPUHardware = GPUHardware()) -> float:
    """Warp-wide shared-memory read transactions (bank-conflict replays included) of the whole kernel."""
    ext, acc = tiling.register_extents(), tiling.workload.accesses
    reduction = prod(lp.extent for lp in tiling.workload.loops if lp.kind == "reduction")
    per_step = sum(bank_conflict_degree(tiling, x, hw) * footprint(acc[x], ext) for x in tiling.inputs())
    return tiling.num_blocks * _warps(tiling.threads_per_block, hw) * reduction * per_step


def oi_shared_mem(tiling: GPUTiling, hw: GPUHardware = GPUHardware()) -> float:
    """MACs per element read from shared memory: MACs / (32 * shared transactions)."""
    return tiling.macs / (hw.warp_size * shared_transactions(tiling, hw))


def gpu_feasible(tiling: GPUTiling, hw: GPUHardware = GPUHardware()) -> bool:
    """The artifact's pruning: 32 <= TB <= max threads, register tile <= 256, shared tile fits a block."""
    tb = tiling.threads_per_block
    return (hw.warp_size <= tb <= hw.max_threads_per_block
            and tiling.register_elements() <= hw.max_register_tile
            and tiling.shared_elements() * hw.element_bytes <= hw.max_shared_memory_per_block)


def gpu_features(tiling: GPUTiling, hw: GPUHardware = GPUHardware(), *, zero_infeasible: bool = False) -> np.ndarray:
    """The seven features in :data:`GPU_FEATURE_NAMES` order (zeros for an infeasible tiling if asked)."""
    if zero_infeasible and not gpu_feasible(tiling, hw):
        return np.zeros(len(GPU_FEATURE_NAMES))
    return np.array([
        oi_global_mem(tiling, hw), oi_shared_mem(tiling, hw), reg_reuse_factor(tiling), ilp(tiling),
        wlp(tiling, hw), estimated_occupancy(tiling, hw), wave_efficiency(tiling.num_blocks, hw.num_sms),
    ], dtype=np.float64)


# The unbounded features and the value of log2(1 + x) that maps to 1.0 in observations; occupancy and
# wave efficiency are fractions already.
GPU_LOG_SCALE = {"OI_Global_Mem": 10.0, "OI_Shared_Mem": 8.0, "Reg_Reuse_Factor": 8.0, "ILP": 8.0, "WLP": 7.0}
_LOG_INDEX = np.array([name in GPU_LOG_SCALE for name in GPU_FEATURE_NAMES])
_BOUNDS = np.array([GPU_LOG_SCALE.get(name, 1.0) for name in GPU_FEATURE_NAMES])


def scaled_gpu_features(raw: np.ndarray) -> np.ndarray:
    """:func:`gpu_features` with ``log2(1 + x)`` applied to the unbounded ones (what cost models learn from)."""
    raw = np.asarray(raw, dtype=np.float64)
    return np.where(_LOG_INDEX, np.log2(1.0 + np.maximum(raw, 0.0)), raw)


def normalised_gpu_features(raw: np.ndarray) -> np.ndarray:
    """:func:`scaled_gpu_features` mapped into [0, 1] for observations (clipped at :data:`GPU_LOG_SCALE`)."""
    return np.clip(scaled_gpu_features(raw) / _BOUNDS, 0.0, 1.0).astype(np.float32)
