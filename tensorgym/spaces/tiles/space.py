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

Coordinates (what a *hop* moves, seed 000): for each loop of extent > 1, the
levels below the outermost (levels 1-3 of a spatial loop, level 1 of a
reduction loop) take values in the sorted divisor list of the extent; level 0
is derived as extent / (product of the others) and must be an integer. A hop
moves one coordinate to the next larger or smaller value in its list.
``unroll`` and ``cache_write`` are coordinates too.
"""

from __future__ import annotations

import numpy as np

from ...config import Config
from ...target import Target
from ...workloads import Workload
from ..base import Space, SpaceError
from .features import FEATURE_NAMES, generic_feature_names, generic_features, normalise, scaled_features, tile_features
from .tiling import (
    MAX_INNERMOST, REDUCTION_LEVELS, SPATIAL_LEVELS, UNROLL_CHOICES, Coordinate, LoopTiling,
)

__all__ = ["MAX_INNERMOST", "REDUCTION_LEVELS", "SPATIAL_LEVELS", "UNROLL_CHOICES", "Coordinate", "TilesSpace"]


class TilesSpace(Space):
    """Multi-level tiling (SSRSRS) of a float32 conv2d or matmul on the LLVM CPU target."""

    name = "tiles"
    feature_names = FEATURE_NAMES
    supported_dtypes = ("float32",)

    def __init__(self, workload: Workload, target: Target, *, unroll_choices: tuple[int, ...] = UNROLL_CHOICES,
                 max_innermost: int = MAX_INNERMOST):
        super().__init__(workload, target)
        if target.kind != "llvm":
            raise SpaceError(f"the tiles space targets LLVM CPUs; got target kind {target.kind!r}")
        if workload.dtype not in self.supported_dtypes:
            raise SpaceError(f"the tiles space tunes float32 kernels; {workload.label} is {workload.dtype} "
                             f"(use space='mapping', which maps int8 and bf16 onto the CPU's dot-product "
                             f"and matrix instructions)")
        self.tiling = LoopTiling(workload.loops, unroll_choices=unroll_choices, max_innermost=max_innermost)
        self.unroll_choices = self.tiling.unroll_choices
        self.max_innermost = max_innermost
        self.loops = self.tiling.loops
        self.levels = self.tiling.levels
        self.extents = self.tiling.extents
        self.coordinates: tuple[Coordinate, ...] = self.tiling.coordinates
        self.generic_feature_names = generic_feature_names(self)

    def __getstate__(self):
        return {"workload": self.workload, "target": self.target, "unroll_choices": self.unroll_choices,
                "max_innermost": self.max_innermost}

    def __setstate__(self, state):
        self.__init__(state["workload"], state["target"], unroll_choices=state["unroll_choices"],
                      max_innermost=state["max_innermost"])

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

    # -- sampling and moves ---------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Config:
        return Config(self.tiling.sample(rng))

    def coordinate_index(self, config: Config, coord: Coordinate) -> int:
        return self.tiling.coordinate_index(config, coord)

    def hop(self, config: Config, coordinate: int, direction: int) -> Config | None:
        """Move one coordinate one step (+1 / -1) in its sorted list; None if that leaves the space."""
        return self.tiling.hop(config, coordinate, direction)

    def hop_mask(self, config: Config) -> np.ndarray:
        """``mask[2 * i + (0 if up else 1)]``: whether hopping coordinate ``i`` up/down stays in the space."""
        return np.array([self.tiling.hopped_value(config, i, d) is not None
                         for i in range(len(self.coordinates)) for d in (1, -1)], dtype=bool)

    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        """Configs reached by moving exactly ``hops`` distinct coordinates one step each.

        Two coordinates of the same loop interact through the derived level 0,
        so a multi-hop move is applied one coordinate at a time and kept only
        if the result is valid (seed 000: the n-hop neighbourhood has at most
        C(m, n) * 2^n members). Duplicates and the config itself are removed.
        """
        return self.tiling.neighbours(config, hops)

    # -- encoding -------------------------------------------------------------
    @property
    def encoding_size(self) -> int:
        return len(self.coordinates)

    def encode(self, config: Config) -> np.ndarray:
        return self.tiling.encode(config)

    def features(self, config: Config) -> np.ndarray:
        return tile_features(self, config)

    def scaled_features(self, config: Config) -> np.ndarray:
        return scaled_features(tile_features(self, config))

    def normalised_features(self, config: Config) -> np.ndarray:
        return normalise(tile_features(self, config))

    def generic_features(self, config: Config) -> np.ndarray:
        return generic_features(self, config)

    def describe(self, config: Config) -> str:
        return self.tiling.describe(config)

    # -- schedule -------------------------------------------------------------
    def apply(self, config: Config):
        import tvm

        self.check(config)
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": self.workload.te_func()}))
        block = sch.get_sblock(_main_block(self.workload))
        split = {}
        for lp, loop in zip(self.loops, sch.get_loops(block)):
            split[lp.name] = sch.split(loop, list(config[lp.name]))
        spatial = [lp.name for lp in self.loops if lp.kind == "spatial"]
        reduction = [lp.name for lp in self.loops if lp.kind == "reduction"]
        level = lambda names, i: [split[n][i] for n in names]  # noqa: E731
        s0, s1, s2, s3 = (level(spatial, i) for i in range(SPATIAL_LEVELS))
        r0, r1 = (level(reduction, i) for i in range(REDUCTION_LEVELS))
        sch.reorder(*s0, *s1, *r0, *s2, *r1, *s3)
        if config["cache_write"]:
            local = sch.cache_write(block, 0, "global")
            sch.reverse_compute_at(local, s1[-1], preserve_unit_loops=True)
            sch.vectorize(sch.get_loops(local)[-1])
        outer = sch.fuse(*s0)
        sch.parallel(outer)
        sch.vectorize(s3[-1])
        if config["unroll"]:
            sch.annotate(outer, "pragma_auto_unroll_max_step", int(config["unroll"]))
            sch.annotate(outer, "pragma_unroll_explicit", 1)
        if getattr(self.workload, "padding", 0):
            _schedule_pad(sch)
        sch.decompose_reduction(block, r0[0])
        return sch.mod


def _main_block(workload: Workload) -> str:
    return {"conv2d": "conv", "matmul": "C"}[workload.op]


def _schedule_pad(sch) -> None:
    """Run the materialised pad stage of a conv in parallel over (n, c), vectorised along w."""
    loops = sch.get_loops(sch.get_sblock("pad"))
    sch.parallel(sch.fuse(loops[0], loops[1]))
    sch.vectorize(loops[-1])
