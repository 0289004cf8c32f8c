"""CUTLASS kernel templates per GPU architecture: the candidates the ``cutlass`` space chooses from.

Two families, by the CUTLASS generation that instantiates them:

* **family 80**, CUTLASS 2.x tensor-core kernels (``mma.sync``, ``cp.async`` multistage
  pipelines; they run on sm_75/sm_80 and later). The (threadblock, stages, warp count,
  instruction) lists are those of TVM's CUTLASS port, the one seed 001 (Bolt) built
  (``tvm.contrib.cutlass.gen_tensor_op``; kept here as data, so that the space needs no
  TVM, and checked against the port by the tests): its sm_80 list with instruction
  16x8x16 plus its sm_75 list with 16x8x8 for fp16, the 16x8x8 TF32 tiles with half the K
  for fp32. bf16 takes the fp16 sm_80 tiles with the bf16 16x8x16 instruction, as
  CUTLASS's own sm_80 generator does. The port marks a few K=64 tiles "shared-memory
  limited" to sm_80; here a tile is kept when its pipeline fits the target's shared
  memory per block, whatever the architecture.
* **family 90**, CUTLASS 3.x Hopper kernels (``wgmma`` and TMA, thread-block clusters;
  sm_90 only), GEMM only: the 16-bit list of CUTLASS's own generator
  (``cutlass_library.generator.GenerateSM90_TensorOp_16b_WGMMA_gemm``, all instantiation
  levels) with the operand layouts and types tensorgym's GEMMs need, one entry per
  (tile, cluster, kernel schedule, epilogue schedule).

Each candidate is a :class:`CutlassTile`; its :attr:`CutlassTile.key` (a tuple of ints)
is the ``tile`` knob of a config, so stored records stay readable and stable.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

FAMILY_2X = 80
FAMILY_3X = 90
# Codes of the Hopper kernel and epilogue schedules in a tile's key (cutlass_library's enum names).
KERNEL_SCHEDULES = ("ScheduleAuto", "TmaWarpSpecialized", "TmaWarpSpecializedPingpong",
                    "TmaWarpSpecializedCooperative")
EPILOGUE_SCHEDULES = ("ScheduleAuto", "NoSmemWarpSpecialized", "TmaWarpSpecialized", "TmaWarpSpecializedCooperative")
_BYTES = {"float16": 2, "bf16": 2, "float32": 4}


@dataclass(frozen=True)
class CutlassTile:
    """One kernel template of a family: its threadblock tile and how it is computed.

    ``warps`` (2.x) is the warp count per threadblock dimension; ``cluster`` (3.x) the
    thread-block cluster. ``stages`` is the software pipeline depth (0: CUTLASS picks the
    most that fit, 3.x). ``alignments`` are the vector widths (elements) the template
    comes in, widest first.
    """

    family: int
    threadblock: tuple[int, int, int]
    stages: int
    instruction: tuple[int, int, int]
    alignments: tuple[int, ...]
    min_cc: int
    warps: tuple[int, int, int] = (1, 1, 1)
    cluster: tuple[int, int, int] = (1, 1, 1)
    kernel_schedule: str = "ScheduleAuto"
    epilogue_schedule: str = "ScheduleAuto"

    @property
    def key(self) -> tuple[int, ...]:
        """``(family, M, N, K, a, b, c, stages, x, y, z)``: 2.x: warps (a, b, c) and instruction (x, y, z);
        3.x: cluster (a, b, c) and (kernel schedule, epilogue schedule, 0) codes."""
        if self.family == FAMILY_2X:
            return (self.family, *self.threadblock, *self.warps, self.stages, *self.instruction)
        return (self.family, *self.threadblock, *self.cluster, self.stages,
                KERNEL_SCHEDULES.index(self.kernel_schedule), EPILOGUE_SCHEDULES.index(self.epilogue_schedule), 0)

    @property
    def threads(self) -> int:
        """Threads per threadblock (3.x: a producer warp group plus the consumer warp groups)."""
        if self.family == FAMILY_2X:
            return 32 * self.warps[0] * self.warps[1] * self.warps[2]
        consumers = 2 if "Cooperative" in self.kernel_schedule or "Pingpong" in self.kernel_schedule else 1
        return 128 * (1 + consumers)

    def shared_bytes(self, dtype: str) -> int:
        """Shared memory of the operand pipeline: stages x (A tile + B tile) (3.x with ``stages=0``: one stage)."""
        m, n, k = self.threadblock
        return max(self.stages, 1) * (m * k + n * k) * _BYTES[dtype]

    def describe(self) -> str:
        m, n, k = self.threadblock
        if self.family == FAMILY_2X:
            return (f"2.x {m}x{n}x{k} x{self.stages} stages, warps {'x'.join(map(str, self.warps))}, "
                    f"mma {'x'.join(map(str, self.instruction))}")
        return (f"3.x {m}x{n}x{k}, cluster {'x'.join(map(str, self.cluster))}, {self.kernel_schedule}, "
                f"epilogue {self.epilogue_schedule}")


def candidate_tiles(op: str, dtype: str, compute_capability: tuple[int, int],
                    shared_memory_per_block: int) -> tuple[CutlassTile, ...]:
    """The templates for ``op`` ("matmul" or "conv2d") on ``dtype`` inputs for a GPU of that capability.

    fp16 and bf16 inputs are summed in fp32; fp32 inputs run on TF32 tensor cores. Tiles whose
    pipeline does not fit ``shared_memory_per_block`` bytes are left out.
    """
    cc = 10 * compute_capability[0] + compute_capability[1]
    tiles = [t for t in _tiles_2x(dtype) if t.min_cc <= cc and t.shared_bytes(dtype) <= shared_memory_per_block]
    if op == "matmul" and cc == 90 and dtype in ("float16", "bf16"):
        tiles += _tiles_3x(dtype)
    return tuple(tiles)


# TVM's CUTLASS port's lists (tvm.contrib.cutlass.gen_tensor_op), the templates seed 001 (Bolt) profiles:
# (threadblock M, N, K at fp16, stages, warp count). sm_80, instruction 16x8x16 (fp16; bf16 alike); TF32 takes
# the same tiles with half the K and instruction 16x8x8. tests/test_cutlass_space.py checks them against the port.
SM80_TILES = (
    ((128, 256, 32), 3, (2, 4, 1)), ((256, 128, 32), 3, (4, 2, 1)), ((256, 64, 32), 3, (4, 1, 1)),
    ((256, 64, 32), 4, (4, 1, 1)), ((64, 256, 32), 4, (1, 4, 1)), ((128, 128, 32), 3, (2, 2, 1)),
    ((128, 128, 32), 4, (2, 2, 1)), ((128, 128, 32), 5, (2, 2, 1)), ((128, 64, 32), 6, (2, 2, 1)),
    ((64, 128, 32), 6, (2, 2, 1)), ((64, 64, 32), 10, (2, 2, 1)), ((256, 128, 64), 3, (4, 2, 1)),
    ((128, 256, 64), 3, (2, 4, 1)), ((256, 64, 64), 4, (4, 1, 1)), ((64, 256, 64), 4, (1, 4, 1)),
    ((128, 128, 64), 4, (2, 2, 1)), ((256, 64, 64), 3, (4, 1, 1)), ((64, 256, 64), 3, (1, 4, 1)),
    ((128, 128, 64), 3, (2, 2, 1)), ((128, 64, 64), 3, (2, 2, 1)), ((64, 128, 64), 3, (2, 2, 1)),
    ((64, 64, 64), 5, (2, 2, 1)),
)
# sm_75, instruction 16x8x8, fp16 only; TVM's sm_80 generator includes these too.
SM75_TILES = (
    ((256, 128, 32), 2, (4, 2, 1)), ((128, 256, 32), 2, (2, 4, 1)), ((128, 128, 32), 2, (2, 2, 1)),
    ((64, 128, 32), 2, (2, 2, 1)), ((128, 64, 32), 2, (2, 2, 1)), ((64, 64, 32), 2, (2, 2, 1)),
    ((64, 128, 64), 2, (1, 2, 2)),
)
_ALIGNMENTS = {"sm75": (8, 4, 2, 1), "float16": (8, 4, 2), "bf16": (8, 4, 2), "float32": (4, 2, 1)}


def _tiles_2x(dtype: str) -> tuple[CutlassTile, ...]:
    """The port's sm_75 + sm_80 lists for ``dtype`` inputs, in the port's order."""
    tiles = []
    if dtype == "float16":
        tiles += [CutlassTile(FAMILY_2X, tb, stages, (16, 8, 8), _ALIGNMENTS["sm75"], 75, warps)
                  for tb, stages, warps in SM75_TILES]
    instruction, scale = ((16, 8, 8), 2) if dtype == "float32" else ((16, 8, 16), 1)
    tiles += [CutlassTile(FAMILY_2X, (m, n, k // scale), stages, instruction, _ALIGNMENTS[dtype], 80, warps)
              for (m, n, k), stages, warps in SM80_TILES]
    return tuple(tiles)


@lru_cache(maxsize=None)
def _operations_3x(dtype: str) -> dict[tuple[int, ...], object]:
    """CUTLASS's sm_90 16-bit WGMMA GEMMs with column-major A, B and D, no C source and fp32 output, by tile key."""
    from cutlass_library import generator, manifest
    from cutlass_library.library import DataType, LayoutType, TileSchedulerType

    element = {"float16": DataType.f16, "bf16": DataType.bf16}[dtype]
    args = generator.define_parser().parse_args(
        ["--operations", "gemm", "--architectures", "90a", "--kernels", "all", "--cuda-version", "13.0"])
    ops = manifest.Manifest(args)
    generator.GenerateSM90_TensorOp_16b_WGMMA_gemm(ops, "13.0")
    found: dict[tuple[int, ...], object] = {}
    for op in ops.operations_by_name.values():
        if not (op.A.element == element and op.B.element == element and op.D.element == DataType.f32
                and op.C.element == DataType.void and op.accumulator_type() == DataType.f32
                and op.A.layout == LayoutType.ColumnMajor and op.B.layout == LayoutType.ColumnMajor
                and op.D.layout == LayoutType.ColumnMajor and op.tile_scheduler == TileSchedulerType.Default
                and op.A.alignment == op.B.alignment == 8
                and op.kernel_schedule.name in KERNEL_SCHEDULES and op.epilogue_schedule.name in EPILOGUE_SCHEDULES):
            continue
        td = op.tile_description
        tile = CutlassTile(
            family=FAMILY_3X, threadblock=tuple(td.threadblock_shape), stages=int(td.stages),
            instruction=tuple(td.math_instruction.instruction_shape), alignments=(8,), min_cc=90,
            cluster=tuple(td.cluster_shape), kernel_schedule=op.kernel_schedule.name,
            epilogue_schedule=op.epilogue_schedule.name)
        found.setdefault(tile.key, (tile, op))
    return {key: found[key] for key in sorted(found)}


def _tiles_3x(dtype: str) -> tuple[CutlassTile, ...]:
    return tuple(tile for tile, _ in _operations_3x(dtype).values())


def sm90_operation(tile: CutlassTile, dtype: str):
    """The ``cutlass_library`` GemmOperation of a 3.x tile (what its C++ is emitted from)."""
    entry = _operations_3x(dtype).get(tile.key)
    if entry is None:
        raise LookupError(f"cutlass_library has no sm_90 operation for {tile.describe()}")
    return entry[1]
