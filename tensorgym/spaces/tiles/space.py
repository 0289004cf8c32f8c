"""The ``tiles`` space: Ansor-style multi-level tiling for the LLVM CPU target.

Every spatial loop is split into 4 levels and every reduction loop into 2, the
levels' product being the loop's extent (every tile is a divisor). The loop
nest is the CPU sketch ``SSRSRS`` of Ansor / MetaSchedule::

    S0  all spatial level-0 loops, fused and run in parallel over the cores
    S1  spatial level 1          <- the output tile is accumulated here when cache_write=1
    R0  reduction level 0
    S2  spatial level 2
    R1  reduction level 1
    S3  spatial level 3          <- innermost; the last spatial loop is vectorised

Loop order is chosen through degenerate tiles: a level of extent 1 vanishes,
so e.g. ``R1 = 1`` makes S2 and S3 adjacent. Two more knobs: ``unroll``
(the ``auto_unroll_max_step`` pragma on the outer loop, Ansor's CPU choices
0/16/64/512) and ``cache_write`` (accumulate each S1 tile in a local buffer and
write it back vectorised, or accumulate in the output directly).

A config looks like ``{"f": [2, 8, 1, 8], "y": [14, 2, 1, 1], ..., "rc": [8, 16],
"unroll": 64, "cache_write": 1}``, outermost level first.

**Vectorised axis and data packing.** The last spatial loop of the workload is
vectorised: ``x`` for an NCHW conv2d (28 lanes on ResNet R5, 7 on R11: AVX-512
registers half empty, and weights read with a stride), ``f`` for NHWC and
NCHWc workloads (output-channel vectors, weights contiguous). For an
NCHW conv2d, ``packing`` tiles the blocked NCHWc loop nest instead and packs in
the kernel, the way TVM's x86 ``conv2d_NCHWc`` does:

* ``packing="in-kernel"``: the kernel takes NCHW/OIHW tensors, packs the
  (padded) input to ``[n][c/b][h][w][bc]`` and the weights to
  ``[f/b][c/b][r][s][bc][bf]``, computes with ``fi`` (``b`` output channels)
  vectorised and accumulating in NCHWbc, and writes the NCHW output back. The
  block ``b`` is the target's fp32 lanes: 16 on AVX-512, 8 on AVX2, one vector;
* ``packing="weights"``: the same, with the weights packed once by a cached
  pre-pass outside the timed region (as frameworks pack weights at load).

Its configs tile the loops ``n, y, x, fo, fi, rco, ry, rx, rci`` (of :attr:`TilesSpace.nest`;
``fo`` inside ``x``, so that each broadcast input value feeds every output-channel block of the
register tile at once), so they are never confused with unpacked configs of the same workload.

What reaches the FMA units (``bench/kernel_anatomy.py --tiles``): with the
output tile accumulated in a local buffer (``cache_write=1``), no S2 tile
(every level-2 spatial tile 1, so the buffer is indexed by constants once S3 is
unrolled) and output channels vectorised (NHWC, or packed), LLVM keeps the
register tile in registers: on R5 a 2 x 14 x 16-lane tile is 28 FMAs, 14
broadcasts and 2 loads per step, as in the microkernel space. With an S2 tile
the accumulators spill, and an NCHW nest (``x`` vectorised) is far worse: a
4 x 8 x 28-lane R5 tile is one block of 4,672 instructions for 64 FMAs. That
is what ``packing`` and the NHWC / NCHWc layouts are for.

**Build cost.** ``unroll`` over a large register tile makes a long straight-line
body for LLVM. Sampling 100+ random and deliberately extreme configs of R5, R7,
Y9 and M3 on this LLVM (unroll 512 over up to 448 unrolled vector statements)
found no build over 0.6 s of CPU, so the space has no rule against them; the
measurer's build timeout (30 s) cuts off any that explodes elsewhere, and
records it as a ``timeout``.

Coordinates (what a *hop* moves, seed 000): for each loop of extent > 1, the
levels below the outermost (levels 1-3 of a spatial loop, level 1 of a
reduction loop) take values in the sorted divisor list of the extent; level 0
is derived as extent / (product of the others) and must be an integer. A hop
moves one coordinate to the next larger or smaller value in its list.
``unroll`` and ``cache_write`` are coordinates too.

**Other targets.** ``make_space("tiles", workload, target)`` builds the tiles space
of the target's kind (:meth:`TilesSpace.for_target`): for a CUDA target, Ansor's GPU
sketch (:class:`~tensorgym.spaces.tiles.gpu_space.GpuTilesSpace`), which tiles with
other level counts and scalar knobs on the same :class:`~.tiling.LoopTiling`, and
whose device limits (:meth:`TilesSpace.limit_violations`) samples, hops and masks
respect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np

from ...checks import generator, integer, is_integer
from ...config import Config
from ...errors import InvalidArgumentError, InvalidTypeError
from ...target import Target
from ...workloads import Conv2d, Workload
from ..base import MAX_HOPS, Space, SpaceError
from .builder import TilesBuilder
from .features import FEATURE_NAMES, generic_feature_names, generic_features, normalise, scaled_features, tile_features
from .tiling import (
    MAX_INNERMOST, REDUCTION_LEVELS, SPATIAL_LEVELS, UNROLL_CHOICES, Coordinate, LoopTiling,
)

__all__ = ["MAX_INNERMOST", "REDUCTION_LEVELS", "SPATIAL_LEVELS", "UNROLL_CHOICES", "Coordinate", "TilesSpace"]
_SAMPLE_TRIES = 100_000  # random tilings drawn for one that fits the device's limits


class TilesSpace(Space):
    """Multi-level tiling (SSRSRS) of a float32 conv2d or matmul on the LLVM CPU target.

    Subclasses tile for other targets (:class:`~tensorgym.spaces.tiles.gpu_space.GpuTilesSpace`,
    CUDA) by setting ``target_kind`` and the level counts, and by overriding
    :meth:`scalar_knob_choices`, :meth:`limit_violations` (the device's limits, which masks,
    samples and hops respect) and ``builder_class``, the schedule (:class:`~.builder.TilesBuilder`
    on a CPU).
    """

    name = "tiles"
    builder_class = TilesBuilder
    feature_names = FEATURE_NAMES
    supported_dtypes = ("float32",)
    target_kind = "llvm"
    spatial_levels = SPATIAL_LEVELS
    reduction_levels = REDUCTION_LEVELS

    _variants: ClassVar[dict[str, type[TilesSpace]]] = {}  # target kind -> the tiles space for it

    @classmethod
    def register_variant(cls, variant: type[TilesSpace]) -> None:
        """Make ``variant`` the tiles space of targets of its ``target_kind`` (:meth:`for_target`)."""
        TilesSpace._variants[variant.target_kind] = variant

    @classmethod
    def for_target(cls, target: Target) -> type[Space]:
        """The tiles space of the target's kind (CUDA: :class:`~tensorgym.spaces.tiles.gpu_space.GpuTilesSpace`)."""
        return TilesSpace._variants.get(target.kind, cls)

    def __init__(self, workload: Workload, target: Target, *, unroll_choices: tuple[int, ...] = UNROLL_CHOICES,
                 max_innermost: int = MAX_INNERMOST, packing: str | None = None,
                 bounds: Mapping[str, Sequence[int]] | None = None):
        super().__init__(workload, target)
        if target.kind != self.target_kind:
            raise SpaceError(f"{type(self).__name__} targets {self.target_kind!r}; got target kind {target.kind!r} "
                             f"(tensorgym.catalog.make_space('tiles', ...) picks the tiles space of a target)")
        if workload.dtype not in self.supported_dtypes:
            raise SpaceError(self._dtype_refusal())
        self.packing = packing
        self.nest: Workload = _packed_nest(workload, packing, target.vector_lanes_fp32) if packing else workload
        self.unroll_choices = _unroll_choices(unroll_choices)
        self.tiling = LoopTiling(_register_order(self.nest.loops) if packing else self.nest.loops,
                                 unroll_choices=self.unroll_choices,
                                 max_innermost=integer("max_innermost", max_innermost, minimum=1),
                                 spatial_levels=self.spatial_levels, reduction_levels=self.reduction_levels,
                                 scalar_knobs=self.scalar_knob_choices(), bounds=bounds)
        self.bounds = self.tiling.bounds
        if "unroll" in self.tiling.scalar_knobs:  # a bounded space keeps only some of them
            self.unroll_choices = self.tiling.scalar_knobs["unroll"]
        self.max_innermost = self.tiling.max_innermost
        self.loops = self.tiling.loops
        self.levels = self.tiling.levels
        self.extents = self.tiling.extents
        self.scalar_knobs = self.tiling.scalar_knobs
        self.coordinates: tuple[Coordinate, ...] = self.tiling.coordinates
        self.generic_feature_names = generic_feature_names(self)

    def _dtype_refusal(self) -> str:
        return (f"the tiles space tunes float32 kernels; {self.workload.label} is {self.workload.dtype} "
                f"(use space='mapping', which maps int8 and bf16 onto the CPU's dot-product "
                f"and matrix instructions)")

    def scalar_knob_choices(self) -> dict[str, tuple[int, ...]]:
        """The knobs that are not tile sizes, with their choices (CPU: ``unroll`` and ``cache_write``)."""
        return {"unroll": self.unroll_choices, "cache_write": (0, 1)}

    def limit_violations(self, config: Config) -> list[str]:
        """The device limits ``config``'s tiles exceed (none on a CPU: every tiling fits)."""
        return []

    def __getstate__(self):
        return {"workload": self.workload, "target": self.target, "unroll_choices": self.tiling.unroll_choices,
                "max_innermost": self.max_innermost, "packing": self.packing, "bounds": self.bounds}

    def __setstate__(self, state):
        self.__init__(state["workload"], state["target"], unroll_choices=state["unroll_choices"],
                      max_innermost=state["max_innermost"], packing=state.get("packing"), bounds=state.get("bounds"))

    @property
    def options(self) -> dict:
        """The keyword arguments that build this space again with :func:`~tensorgym.catalog.make_space`
        (defaults left out)."""
        out: dict = {}
        if self.tiling.unroll_choices != UNROLL_CHOICES:
            out["unroll_choices"] = list(self.tiling.unroll_choices)
        if self.max_innermost != MAX_INNERMOST:
            out["max_innermost"] = self.max_innermost
        if self.packing:
            out["packing"] = self.packing
        if self.bounds is not None:
            out["bounds"] = {label: list(values) for label, values in self.bounds.items()}
        return out

    def configs(self) -> list[Config]:
        """Every config of a bounded space (see :mod:`.benchmark`), in a fixed order; an unbounded space is
        too large to list."""
        if self.bounds is None:
            return super().configs()
        return [c for c in map(Config, self.tiling.enumerate()) if not self.limit_violations(c)]

    # -- validity -----------------------------------------------------------
    def check(self, config: Config) -> None:
        if not isinstance(config, Config):
            raise SpaceError(f"expected a Config, got {type(config).__name__}")
        knobs = self.tiling.knobs
        missing = knobs - set(config)
        extra = set(config) - knobs
        if missing or extra:
            raise SpaceError(
                f"tiles config for {self.workload.label} needs knobs {sorted(knobs)}; "
                f"missing {sorted(missing)}, unexpected {sorted(extra)}"
            )
        self.tiling.check(config)
        problems = self.limit_violations(config)
        if problems:
            raise SpaceError(f"config exceeds the limits of {self.target.label}: {'; '.join(problems)}")

    # -- sampling and moves ---------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Config:
        generator("rng", rng)
        for _ in range(_SAMPLE_TRIES):
            config = Config(self.tiling.sample(rng))
            if not self.limit_violations(config):  # Ansor's sampler likewise draws until a tiling fits
                return config
        raise SpaceError(f"no random tiling of {self.workload.label} out of {_SAMPLE_TRIES} fits the limits of "
                         f"{self.target.label}")

    def coordinate_index(self, config: Config, coord: Coordinate) -> int:
        """The index of ``config``'s value of coordinate ``coord`` in the coordinate's choices."""
        self.check(config)
        if coord not in self.coordinates:
            raise SpaceError(f"{coord!r} is not a coordinate of this space")
        return self.tiling.coordinate_index(config, coord)

    def hop(self, config: Config, coordinate: int, direction: int) -> Config | None:
        """Move one coordinate one step (+1 / -1) in its sorted list; None if that leaves the space."""
        self.check(config)
        coordinate = integer("coordinate", coordinate, minimum=0, maximum=len(self.coordinates) - 1)
        if not is_integer(direction) or direction not in (1, -1):
            raise InvalidArgumentError(f"direction must be +1 or -1, got {direction!r}")
        return self._hop(config, coordinate, int(direction))

    def _hop(self, config: Config, coordinate: int, direction: int) -> Config | None:
        hopped = self.tiling.hop(config, coordinate, direction)
        return None if hopped is None or self.limit_violations(hopped) else hopped

    def hop_mask(self, config: Config) -> np.ndarray:
        """``mask[2 * i + (0 if up else 1)]``: whether hopping coordinate ``i`` up/down stays in the space."""
        self.check(config)
        return np.array([self._hop(config, i, d) is not None
                         for i in range(len(self.coordinates)) for d in (1, -1)], dtype=bool)

    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        """Configs reached by moving exactly ``hops`` distinct coordinates one step each.

        Two coordinates of the same loop interact through the derived level 0,
        so a multi-hop move is applied one coordinate at a time and kept only
        if the result is valid (seed 000: the n-hop neighbourhood has at most
        C(m, n) * 2^n members), within the device's limits. Duplicates and the config itself are removed.
        """
        self.check(config)
        return self.tiling.neighbours(config, integer("hops", hops, minimum=1, maximum=MAX_HOPS),
                                      valid=lambda c: not self.limit_violations(c))

    # -- encoding -------------------------------------------------------------
    @property
    def encoding_size(self) -> int:
        return len(self.coordinates)

    def encode(self, config: Config) -> np.ndarray:
        self.check(config)
        return self.tiling.encode(config)

    def features(self, config: Config) -> np.ndarray:
        self.check(config)
        return tile_features(self, config)

    def scaled_features(self, config: Config) -> np.ndarray:
        self.check(config)
        return scaled_features(tile_features(self, config))

    def normalised_features(self, config: Config) -> np.ndarray:
        self.check(config)
        return normalise(tile_features(self, config))

    def generic_features(self, config: Config) -> np.ndarray:
        self.check(config)
        return generic_features(self, config)

    def describe(self, config: Config) -> str:
        self.check(config)
        return self.tiling.describe(config)

    def info(self, config: Config) -> dict:
        self.check(config)
        if not self.packing:
            return {"vectorised": self.loops[[lp.kind for lp in self.loops].index("reduction") - 1].name}
        b = self.nest.channel_block
        return {"vectorised": f"fi ({b} output channels, NCHW{b}c accumulator)",
                "packing": {"in-kernel": "data and weights packed in the kernel (timed)",
                            "weights": "weights packed once (cached pre-pass, not timed); data in the kernel"}[
                    self.packing]}


PACKINGS = ("in-kernel", "weights")


def _packed_nest(workload: Workload, packing: str, block: int) -> Workload:
    """The NCHWc workload (blocks of ``block`` channels: the target's fp32 lanes) whose loops a packed tiles
    space tiles (or a clear refusal)."""
    if packing not in PACKINGS:
        raise SpaceError(f"tiles packing must be one of {PACKINGS} or None, got {packing!r}")
    if not isinstance(workload, Conv2d) or workload.layout != "NCHW":
        raise SpaceError(f"tiles packing applies to NCHW conv2d workloads (NHWC and NCHWc ones vectorise output "
                         f"channels already); {workload.label} is {getattr(workload, 'layout', workload.op)}")
    if workload.C % block or workload.F % block:
        raise SpaceError(f"tiles packing needs input and output channels in blocks of {block}; "
                         f"{workload.label} has C={workload.C}, F={workload.F}")
    return workload.with_layout("NCHWc", block)


def _register_order(loops):
    """The packed nest's loops in the order its tiles nest: output blocks ``fo`` just outside the vectorised
    ``fi``, so that in the register tile each input value broadcast feeds the FMAs of every output block
    at once (pixels outer, channel blocks inner: the order of the microkernel space), instead of being
    broadcast again for each block and kept live meanwhile, which spills the accumulators."""
    spatial = [lp for lp in loops if lp.kind == "spatial"]
    reduction = [lp for lp in loops if lp.kind == "reduction"]
    by_name = {lp.name: lp for lp in spatial}
    return tuple(by_name[n] for n in ("n", "y", "x", "fo", "fi")) + tuple(reduction)


def _unroll_choices(value) -> tuple[int, ...]:
    """``unroll_choices`` as a tuple of distinct non-negative ints (a sequence of them is required)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list, np.ndarray)):
        raise InvalidTypeError(f"unroll_choices must be a list of auto-unroll steps such as {list(UNROLL_CHOICES)}, "
                               f"got {type(value).__name__} {value!r:.40}")
    if not len(value) or not all(is_integer(v) and v >= 0 for v in value) or len(set(map(int, value))) != len(value):
        raise InvalidArgumentError(f"unroll_choices must be distinct integers >= 0, such as {list(UNROLL_CHOICES)}; "
                                   f"got {list(value)!r:.60}")
    return tuple(int(v) for v in value)
