"""The ``cutlass`` space (seed 001, Bolt): CUTLASS template parameters for a GEMM or an implicit-GEMM conv2d.

Bolt's idea is that a vendor's templated kernels, instantiated with the right parameters,
reach hardware-native speed; the search is over those parameters, and Bolt profiles every
candidate. A config here is::

    {"tile": [80, 128, 128, 32, 2, 2, 1, 3, 16, 8, 16],  # family, threadblock, warps, stages, mma
     "alignment": 8, "swizzle": 8, "split_k": 1, "epilogue": 0}

* ``tile``: one of the architecture's templates (:mod:`.templates`): threadblock tile,
  warp count (2.x) or cluster and schedules (3.x Hopper), pipeline stages, MMA
  instruction shape;
* ``alignment``: the operands' vector width in elements (8 fp16 = 128-bit loads); it
  must divide the contiguous dimensions (GEMM: K and N; conv: C). By default only the
  widest the problem allows (Bolt's default); ``all_alignments=True`` offers every one;
* ``swizzle``: the threadblock rasterisation (``GemmIdentityThreadblockSwizzle<N>``, a
  template parameter of 2.x kernels, the scheduler's ``max_swizzle_size`` of 3.x ones);
* ``split_k``: serial split-K slices (a run-time argument; 2.x kernels only, at least one
  threadblock K step per slice);
* ``epilogue``: 0 writes ``A @ B``; with the space option ``epilogue="bias_relu"`` the
  layer is ``relu(A @ B + bias)`` (bias per output column / channel), computed by CUTLASS's
  epilogue (1, fused: among 3.x kernels only those with a TMA epilogue, and never under
  split-K) or by a separate elementwise kernel after the GEMM (2).

fp16 and bf16 inputs are summed in fp32 and written as fp32; fp32 inputs run on TF32
tensor cores (what TVM's CUTLASS port does, and what ``torch.backends.cuda.matmul.allow_tf32``
allows cuBLAS). A conv is computed in NHWC/KRSC (CUTLASS's implicit GEMM supports no other
layout): the space's builder (:class:`~.builder.CutlassBuilder`, which also emits the CUTLASS
operator) repacks the NCHW/OIHW inputs outside the timed region and turns the NHWC result back.

The bias of a ``bias_relu`` layer is chosen larger than any product sum can be
(``K + 1 + column % 7``, inputs in [-1, 1)), so ReLU passes every value through and the
checked output is the GEMM plus that known bias: the kernel does all of the epilogue's
work (the bias load, the add, the max), and the result is still checked element by
element against NumPy.

The space is small (hundreds of configs), so :meth:`CutlassSpace.configs` lists it
whole; the ``exhaustive`` agent profiles it as Bolt does, ``random`` and ``ga`` sample it.
"""

from __future__ import annotations

import itertools
from math import ceil, log2

import numpy as np

from ...config import Config
from ...target import Target
from ...workloads import Conv2d, Matmul, Workload
from ..base import Space, SpaceError
from ..tiles.features import wave_efficiency
from ..tiles.space import Coordinate
from . import emit
from .builder import CutlassBuilder
from .templates import FAMILY_2X, CutlassTile, candidate_tiles

SWIZZLES = (1, 2, 4, 8)
SPLIT_K = (1, 2, 4, 8)
EPILOGUES = {"none": (emit.EPILOGUE_NONE,), "bias_relu": (emit.EPILOGUE_FUSED, emit.EPILOGUE_SEPARATE)}
KNOBS = ("tile", "alignment", "swizzle", "split_k", "epilogue")
CUTLASS_FEATURE_NAMES = (
    "log2_tile_mn", "tile_intensity", "log2_k_steps", "wave_efficiency", "waves", "blocks_per_sm", "log2_threads",
    "log2_stages", "log2_alignment", "log2_swizzle", "log2_split_k", "hopper", "fused_epilogue",
)
GENERIC_FEATURE_NAMES = (
    "log2_tb_m", "log2_tb_n", "log2_tb_k", "log2_a", "log2_b", "log2_c", "log2_stages", "log2_inst_m", "log2_inst_n",
    "log2_inst_k", "family", "log2_alignment", "log2_swizzle", "log2_split_k", "epilogue",
)


class CutlassSpace(Space):
    """CUTLASS template parameters of one GEMM or conv2d on a CUDA target (see the module docs).

    Args:
        epilogue: ``"none"`` (the workload as it is) or ``"bias_relu"`` (the workload followed by a
            per-column bias and ReLU, fused into CUTLASS's epilogue or not).
        all_alignments: offer every alignment the problem allows, not only the widest.
        swizzles: the threadblock swizzles offered.
        split_k: the split-K slice counts offered (2.x kernels).
    """

    name = "cutlass"
    builder_class = CutlassBuilder
    supported_dtypes = ("float16", "bf16", "float32")
    tensor_cores = True
    feature_names = CUTLASS_FEATURE_NAMES
    generic_feature_names = GENERIC_FEATURE_NAMES

    def __init__(self, workload: Workload, target: Target, *, epilogue: str = "none", all_alignments: bool = False,
                 swizzles: tuple[int, ...] = SWIZZLES, split_k: tuple[int, ...] = SPLIT_K):
        super().__init__(workload, target)
        if target.kind != "cuda" or target.device is None:
            raise SpaceError(f"the cutlass space needs a CUDA target; got {target.label} "
                             f"(target='cuda', or tensorgym.target.cuda_target('h100') to generate code only)")
        if not isinstance(workload, (Matmul, Conv2d)):
            raise SpaceError(f"the cutlass space tunes matmuls and conv2ds, not {workload.op}")
        if workload.dtype not in self.supported_dtypes:
            raise SpaceError(f"the cutlass space has no {workload.dtype} kernels "
                             f"(its dtypes: {', '.join(self.supported_dtypes)})")
        if isinstance(workload, Conv2d) and workload.layout != "NCHW":
            raise SpaceError(f"the cutlass space takes NCHW conv2d workloads (it repacks them to CUTLASS's NHWC "
                             f"itself); {workload.label} is {workload.layout}")
        if target.device.compute_capability < (7, 5):
            raise SpaceError(f"the cutlass space needs tensor cores (sm_75 or later), not {target.device.arch}")
        if epilogue not in EPILOGUES:
            raise SpaceError(f"epilogue must be one of {sorted(EPILOGUES)}, got {epilogue!r}")
        if not set(swizzles) <= set(SWIZZLES) or not swizzles:
            raise SpaceError(f"swizzles must be among {SWIZZLES}, got {swizzles!r}")
        if not split_k or min(split_k) < 1:
            raise SpaceError(f"split_k must be positive slice counts, got {split_k!r}")
        self.epilogue = epilogue
        self.all_alignments = bool(all_alignments)
        self.swizzles = tuple(sorted(swizzles))
        self.split_k = tuple(sorted(split_k))
        gpu = target.device
        self.tiles = {t.key: t for t in candidate_tiles(workload.op, workload.dtype, gpu.compute_capability,
                                                          gpu.max_shared_memory_per_block_optin)}
        self.gemm_shape = _gemm_shape(workload)  # (M, N, K) of the (implicit) GEMM
        self.contiguous = _contiguous_extents(workload)
        self.output_alignment = next(a for a in (4, 2, 1) if self.contiguous["output"] % a == 0)
        self._configs = self._enumerate()
        if not self._configs:
            raise SpaceError(f"no CUTLASS template fits {workload.label} on {target.label}")
        self._index = {c: i for i, c in enumerate(self._configs)}
        self.coordinates = tuple(Coordinate(knob, -1, tuple(dict.fromkeys(sorted(c[knob] for c in self._configs))))
                                 for knob in KNOBS)

    def __getstate__(self):
        return {"workload": self.workload, "target": self.target, "epilogue": self.epilogue,
                "all_alignments": self.all_alignments, "swizzles": self.swizzles, "split_k": self.split_k}

    def __setstate__(self, state):
        self.__init__(state["workload"], state["target"], epilogue=state["epilogue"],
                      all_alignments=state["all_alignments"], swizzles=state["swizzles"], split_k=state["split_k"])

    # -- the configs ------------------------------------------------------------------------
    def alignments(self, tile: CutlassTile) -> tuple[int, ...]:
        """The alignments of ``tile`` this problem allows, widest first (just the widest by default)."""
        fits = [a for a in tile.alignments if self.contiguous["a"] % a == 0 and self.contiguous["b"] % a == 0]
        return tuple(fits if self.all_alignments else fits[:1])

    def _split_ks(self, tile: CutlassTile) -> tuple[int, ...]:
        if tile.family != FAMILY_2X:
            return (1,)
        k_steps = ceil(self.gemm_shape[2] / tile.threadblock[2])
        return tuple(s for s in self.split_k if s <= k_steps)  # every slice gets at least one K step

    def _epilogues(self, tile: CutlassTile, split_k: int) -> tuple[int, ...]:
        # CUTLASS fuses a bias and an activation only in its TMA epilogues (epilogue visitor trees) among 3.x
        # kernels. Under serial split-K the fused epilogue runs once per slice: CUTLASS's LinearCombinationRelu
        # turns ReLU off on all but the last slice with a NaN threshold, which its NaN-propagating maximum then
        # writes out (on an H200 every such kernel wrote NaN), so split-K comes with the separate epilogue only.
        no_fusion = (tile.family != FAMILY_2X and tile.epilogue_schedule == "NoSmemWarpSpecialized") or split_k > 1
        if no_fusion:
            return tuple(e for e in EPILOGUES[self.epilogue] if e != emit.EPILOGUE_FUSED)
        return EPILOGUES[self.epilogue]

    def _enumerate(self) -> list[Config]:
        # Split-K slices outermost: the configs that share a binary (they differ only in split-K, a run-time
        # argument) come apart, so a batch of the first configs compiles that many different kernels.
        configs = []
        for split_k in self.split_k:
            for tile in self.tiles.values():
                if split_k not in self._split_ks(tile):
                    continue
                for alignment, swizzle, epilogue in itertools.product(self.alignments(tile), self.swizzles,
                                                                      self._epilogues(tile, split_k)):
                    configs.append(Config({"tile": tile.key, "alignment": alignment, "swizzle": swizzle,
                                           "split_k": split_k, "epilogue": epilogue}))
        return configs

    def configs(self) -> list[Config]:
        """Every config of the space (what Bolt profiles): by split-K slices, then templates in their order."""
        return list(self._configs)

    def tile(self, config: Config) -> CutlassTile:
        return self.tiles[config["tile"]]

    def check(self, config: Config) -> None:
        if not isinstance(config, Config):
            raise SpaceError(f"expected a Config, got {type(config).__name__}")
        if set(config) != set(KNOBS):
            raise SpaceError(f"a cutlass config has the knobs {list(KNOBS)}; got {sorted(config)}")
        if config in self._index:
            return
        tile = self.tiles.get(config["tile"])
        if tile is None:
            raise SpaceError(f"tile {list(config['tile'])} is not a template of {self.target.device.arch} for "
                             f"{self.workload.dtype} {self.workload.op}s")
        for knob, allowed in (("alignment", self.alignments(tile)), ("swizzle", self.swizzles),
                              ("split_k", self._split_ks(tile)),
                              ("epilogue", self._epilogues(tile, config["split_k"]))):
            if config[knob] not in allowed:
                raise SpaceError(f"{knob} {config[knob]!r} is not allowed with this tile here; allowed: {allowed}")
        raise SpaceError(f"{config.key} is not in the cutlass space of {self.workload.label}")

    def sample(self, rng: np.random.Generator) -> Config:
        return self._configs[int(rng.integers(len(self._configs)))]

    # -- hops (categorical: each knob moves to the next or previous of its values) -----------------
    def hop(self, config: Config, coordinate: int, direction: int) -> Config | None:
        coord = self.coordinates[coordinate]
        index = coord.choices.index(config[coord.knob]) + direction
        if not 0 <= index < len(coord.choices):
            return None
        hopped = config.replace(**{coord.knob: coord.choices[index]})
        return hopped if hopped in self._index else None

    def hop_mask(self, config: Config) -> np.ndarray:
        return np.array([self.hop(config, i, d) is not None for i in range(len(self.coordinates)) for d in (1, -1)],
                        dtype=bool)

    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        if hops < 1:
            raise ValueError(f"hops must be >= 1, got {hops}")
        out: dict[Config, None] = {}
        for coords in itertools.combinations(range(len(self.coordinates)), hops):
            for directions in itertools.product((1, -1), repeat=hops):
                current: Config | None = config
                for c, d in zip(coords, directions):
                    coord = self.coordinates[c]
                    index = coord.choices.index(current[coord.knob]) + d
                    if not 0 <= index < len(coord.choices):
                        current = None
                        break
                    current = current.replace(**{coord.knob: coord.choices[index]})
                if current is not None and current in self._index and current != config:
                    out[current] = None
        return list(out)

    @property
    def encoding_size(self) -> int:
        return len(self.coordinates)

    def encode(self, config: Config) -> np.ndarray:
        return np.array([c.choices.index(config[c.knob]) / max(1, len(c.choices) - 1) for c in self.coordinates],
                        dtype=np.float32)

    # -- features --------------------------------------------------------------------------------
    def features(self, config: Config) -> np.ndarray:
        """Analytical features of a config (:data:`CUTLASS_FEATURE_NAMES`).

        The threadblock tile's size and intensity (MACs per element loaded per K step:
        ``m n / (m + n)``), its K steps per slice, the wave efficiency and number of waves of
        ``ceil(M / m) ceil(N / n) split_k`` threadblocks over the SMs (at the blocks per SM the
        shared memory allows), threads, stages, alignment, swizzle, split-K, family and epilogue.
        """
        tile = self.tile(config)
        gpu = self.target.device
        m, n, k = tile.threadblock
        M, N, K = self.gemm_shape
        blocks = ceil(M / m) * ceil(N / n) * config["split_k"]
        per_sm = max(1, min(gpu.shared_memory_per_sm // max(tile.shared_bytes(self.workload.dtype), 1),
                            gpu.max_threads_per_sm // tile.threads))
        slots = gpu.num_sms * per_sm
        return np.array([
            log2(m * n), m * n / (m + n), log2(ceil(K / config["split_k"] / k)), wave_efficiency(blocks, slots),
            blocks / slots, float(per_sm), log2(tile.threads), log2(max(tile.stages, 1)), log2(config["alignment"]),
            log2(config["swizzle"]), log2(config["split_k"]), float(tile.family != FAMILY_2X),
            float(config["epilogue"] == emit.EPILOGUE_FUSED),
        ], dtype=np.float64)

    def normalised_features(self, config: Config) -> np.ndarray:
        bounds = np.array([16.0, 128.0, 10.0, 1.0, 16.0, 8.0, 10.0, 4.0, 3.0, 3.0, 3.0, 1.0, 1.0])
        return np.clip(self.features(config) / bounds, 0.0, 1.0).astype(np.float32)

    def generic_features(self, config: Config) -> np.ndarray:
        """The knobs themselves (log2 of the tile's numbers, the family, the other knobs)."""
        key = config["tile"]
        return np.array([log2(max(v, 1)) for v in key[1:]] + [float(key[0]), log2(config["alignment"]),
                        log2(config["swizzle"]), log2(config["split_k"]), float(config["epilogue"])],
                        dtype=np.float64)

    def describe(self, config: Config) -> str:
        return (f"{self.tile(config).describe()}, align {config['alignment']}, swizzle {config['swizzle']}, "
                f"split-K {config['split_k']}, epilogue {_EPILOGUE_NAMES[config['epilogue']]}")

    def bias(self) -> np.ndarray:
        """The per-column bias of a ``bias_relu`` layer: above any |A @ B| (see the module docs)."""
        columns = self.contiguous["output"]
        bound = self.gemm_shape[2]  # |sum of K products of numbers in [-1, 1)| < K
        return (bound + 1.0 + np.arange(columns) % 7).astype(np.float32)


_EPILOGUE_NAMES = {emit.EPILOGUE_NONE: "none", emit.EPILOGUE_FUSED: "bias+ReLU fused",
                   emit.EPILOGUE_SEPARATE: "bias+ReLU separate"}


def _gemm_shape(workload: Workload) -> tuple[int, int, int]:
    """(M, N, K) of the GEMM a workload is (a conv: its implicit GEMM, N P Q x F x C R S)."""
    if isinstance(workload, Conv2d):
        return workload.N * workload.OH * workload.OW, workload.F, workload.C * workload.R * workload.S
    return workload.M, workload.N, workload.K


def _contiguous_extents(workload: Workload) -> dict[str, int]:
    """The extents alignments must divide: of A's and B's contiguous dimension, and of the output's."""
    if isinstance(workload, Conv2d):
        return {"a": workload.C, "b": workload.C, "output": workload.F}
    return {"a": workload.K, "b": workload.N, "output": workload.N}
