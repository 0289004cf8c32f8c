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

import itertools
from dataclasses import dataclass
from math import prod
from typing import ClassVar

import numpy as np

from ...config import Config
from ...factors import divisors, factorizations
from ...target import Target
from ...workloads import Workload
from ..base import Space, SpaceError
from .features import FEATURE_NAMES, generic_feature_names, generic_features, normalise, scaled_features, tile_features

SPATIAL_LEVELS = 4
REDUCTION_LEVELS = 2
UNROLL_CHOICES = (0, 16, 64, 512)  # Ansor's CPU auto-unroll max steps
MAX_INNERMOST = 64  # Ansor's max_innermost_split_factor
_SAMPLE_TRIES = 100_000  # random tilings drawn for one that fits the device's limits


@dataclass(frozen=True)
class Coordinate:
    """One hop-able coordinate: level ``level`` of knob ``knob`` (level -1: a scalar knob)."""

    knob: str
    level: int
    choices: tuple[int, ...]

    @property
    def label(self) -> str:
        return self.knob if self.level < 0 else f"{self.knob}.{self.level}"


class TilesSpace(Space):
    """Multi-level tiling (SSRSRS) of a conv2d or matmul on the LLVM CPU target.

    Subclasses tile for other targets (:class:`~tensorgym.spaces.tiles.gpu_space.GpuTilesSpace`,
    CUDA) by setting ``target_kind`` and the level counts, and by overriding
    :meth:`scalar_knob_choices`, :meth:`limit_violations` (the device's limits, which masks,
    samples and hops respect) and the schedule.
    """

    name = "tiles"
    feature_names = FEATURE_NAMES
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
                 max_innermost: int = MAX_INNERMOST):
        super().__init__(workload, target)
        if target.kind != self.target_kind:
            raise SpaceError(f"{type(self).__name__} targets {self.target_kind!r}; got target kind {target.kind!r} "
                             f"(tensorgym.catalog.make_space('tiles', ...) picks the tiles space of a target)")
        self.unroll_choices = tuple(unroll_choices)
        self.max_innermost = max_innermost
        self.loops = workload.loops
        self.levels = {lp.name: self.spatial_levels if lp.kind == "spatial" else self.reduction_levels
                       for lp in self.loops}
        self.extents = {lp.name: lp.extent for lp in self.loops}
        self.scalar_knobs = self.scalar_knob_choices()
        coords: list[Coordinate] = []
        for lp in self.loops:
            if lp.extent > 1:
                for level in range(1, self.levels[lp.name]):
                    coords.append(Coordinate(lp.name, level, divisors(lp.extent)))
        coords += [Coordinate(knob, -1, choices) for knob, choices in self.scalar_knobs.items()]
        self.coordinates: tuple[Coordinate, ...] = tuple(coords)
        self._knobs = frozenset([lp.name for lp in self.loops] + list(self.scalar_knobs))
        self.generic_feature_names = generic_feature_names(self)

    def scalar_knob_choices(self) -> dict[str, tuple[int, ...]]:
        """The knobs that are not tile sizes, with their choices (CPU: ``unroll`` and ``cache_write``)."""
        return {"unroll": self.unroll_choices, "cache_write": (0, 1)}

    def limit_violations(self, config: Config) -> list[str]:
        """The device limits ``config``'s tiles exceed (none on a CPU: every tiling fits)."""
        return []

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
        missing = self._knobs - set(config)
        extra = set(config) - self._knobs
        if missing or extra:
            raise SpaceError(
                f"tiles config for {self.workload.label} needs knobs {sorted(self._knobs)}; "
                f"missing {sorted(missing)}, unexpected {sorted(extra)}"
            )
        for lp in self.loops:
            tiles = config[lp.name]
            levels = self.levels[lp.name]
            if not isinstance(tiles, tuple) or len(tiles) != levels:
                raise SpaceError(f"knob {lp.name!r} must be a list of {levels} tile sizes, got {tiles!r}")
            if any(t < 1 for t in tiles) or prod(tiles) != lp.extent:
                raise SpaceError(
                    f"tile sizes of {lp.name!r} must be positive and multiply to its extent {lp.extent}; "
                    f"got {list(tiles)}"
                )
            if tiles[-1] > self.max_innermost:
                raise SpaceError(f"innermost tile of {lp.name!r} is {tiles[-1]} > {self.max_innermost}")
        for knob, choices in self.scalar_knobs.items():
            if config[knob] not in choices:
                raise SpaceError(f"{knob} must be one of {choices}, got {config[knob]!r}")
        problems = self.limit_violations(config)
        if problems:
            raise SpaceError(f"config exceeds the limits of {self.target.label}: {'; '.join(problems)}")

    # -- sampling and moves ---------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Config:
        for _ in range(_SAMPLE_TRIES):
            values: dict[str, object] = {}
            for lp in self.loops:
                options = factorizations(lp.extent, self.levels[lp.name], self.max_innermost)
                values[lp.name] = options[int(rng.integers(len(options)))]
            for knob, choices in self.scalar_knobs.items():
                values[knob] = choices[int(rng.integers(len(choices)))]
            config = Config(values)
            if not self.limit_violations(config):  # Ansor's sampler likewise draws until a tiling fits
                return config
        raise SpaceError(f"no random tiling of {self.workload.label} out of {_SAMPLE_TRIES} fits the limits of "
                         f"{self.target.label}")

    def coordinate_index(self, config: Config, coord: Coordinate) -> int:
        value = config[coord.knob] if coord.level < 0 else config[coord.knob][coord.level]
        return coord.choices.index(value)

    def _hopped_value(self, config: Config, coordinate: int, direction: int):
        """The knob value after the hop, or None if the hop leaves the space."""
        coord = self.coordinates[coordinate]
        index = self.coordinate_index(config, coord) + direction
        if not 0 <= index < len(coord.choices):
            return None
        value = coord.choices[index]
        if coord.level < 0:
            return value
        tiles = list(config[coord.knob])
        tiles[coord.level] = value
        inner = prod(tiles[1:])
        extent = self.extents[coord.knob]
        if extent % inner:
            return None
        tiles[0] = extent // inner
        if tiles[-1] > self.max_innermost:
            return None
        return tuple(tiles)

    def hop(self, config: Config, coordinate: int, direction: int) -> Config | None:
        """Move one coordinate one step (+1 / -1) in its sorted list; None if that leaves the space."""
        value = self._hopped_value(config, coordinate, direction)
        if value is None:
            return None
        hopped = config.replace(**{self.coordinates[coordinate].knob: value})
        return None if self.limit_violations(hopped) else hopped

    def hop_mask(self, config: Config) -> np.ndarray:
        """``mask[2 * i + (0 if up else 1)]``: whether hopping coordinate ``i`` up/down stays in the space."""
        return np.array([self.hop(config, i, d) is not None
                         for i in range(len(self.coordinates)) for d in (1, -1)], dtype=bool)

    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        """Configs reached by moving exactly ``hops`` distinct coordinates one step each.

        Two coordinates of the same loop interact through the derived level 0,
        so a multi-hop move is applied one coordinate at a time and kept only
        if the result is valid (seed 000: the n-hop neighbourhood has at most
        C(m, n) * 2^n members). Duplicates and the config itself are removed.
        """
        if hops < 1:
            raise ValueError(f"hops must be >= 1, got {hops}")
        seen = {config}
        out: list[Config] = []
        for coords in itertools.combinations(range(len(self.coordinates)), hops):
            for directions in itertools.product((1, -1), repeat=hops):
                current: Config | None = config
                for c, d in zip(coords, directions):
                    current = self.hop(current, c, d)
                    if current is None:
                        break
                if current is not None and current not in seen:
                    seen.add(current)
                    out.append(current)
        return out

    # -- encoding -------------------------------------------------------------
    @property
    def encoding_size(self) -> int:
        return len(self.coordinates)

    def encode(self, config: Config) -> np.ndarray:
        out = np.empty(len(self.coordinates), dtype=np.float32)
        for i, coord in enumerate(self.coordinates):
            span = len(coord.choices) - 1
            out[i] = self.coordinate_index(config, coord) / span if span else 0.0
        return out

    def features(self, config: Config) -> np.ndarray:
        return tile_features(self, config)

    def scaled_features(self, config: Config) -> np.ndarray:
        return scaled_features(tile_features(self, config))

    def normalised_features(self, config: Config) -> np.ndarray:
        return normalise(tile_features(self, config))

    def generic_features(self, config: Config) -> np.ndarray:
        return generic_features(self, config)

    def describe(self, config: Config) -> str:
        parts = [f"{lp.name}={'x'.join(map(str, config[lp.name]))}" for lp in self.loops if lp.extent > 1]
        return " ".join(parts + [f"{knob}={config[knob]}" for knob in self.scalar_knobs])

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
