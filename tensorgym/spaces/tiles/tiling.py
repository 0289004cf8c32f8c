"""Multi-level tiles of a loop nest, as knobs: the machinery the ``tiles`` and ``mapping`` spaces share.

A :class:`LoopTiling` describes the tiling knobs of one loop nest (seed 000 /
Ansor's CPU sketch ``SSRSRS``): every spatial loop is split into 4 levels and
every reduction loop into 2, the levels' product being the loop's extent (every
tile is a divisor), plus two scalar knobs, ``unroll`` (the
``auto_unroll_max_step`` pragma, Ansor's CPU choices 0/16/64/512) and
``cache_write`` (0/1, where the output tile is accumulated). Other sketches
choose other level counts and scalar knobs (Ansor's GPU sketch: 5 and 3 levels,
``unroll`` alone).

Coordinates (what a *hop* moves): for each loop of extent > 1, the levels below
the outermost (levels 1-3 of a spatial loop, level 1 of a reduction loop) take
values in the sorted divisor list of the extent; level 0 is derived as extent /
(product of the others) and must be an integer. A hop moves one coordinate to
the next larger or smaller value in its list. ``unroll`` and ``cache_write`` are
coordinates too.

**Bounds.** A tiling may be *bounded*: some coordinates keep only some of their
choices (``bounds={"f.3": (4, 8), "unroll": (0, 64)}``). A bounded tiling is a
sub-space in every respect: its coordinates list only the kept choices, so hops,
encodings and knob moves stay inside; ``check`` refuses a level value outside
them; sampling is uniform over its valid configs; and it can list them all
(:meth:`LoopTiling.tilings_of`), which is what benchmark spaces that are measured
exhaustively need. Level 0 stays derived (extent / product of the other levels).

A tiling reads and writes plain knob values of a :class:`~tensorgym.config.Config`;
the space that owns it decides which other knobs a config has.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from ...config import Config
from ...factors import count_factorizations, divisors, nth_factorization
from ...workloads import Loop
from ..base import SpaceError

SPATIAL_LEVELS = 4
REDUCTION_LEVELS = 2
UNROLL_CHOICES = (0, 16, 64, 512)  # Ansor's CPU auto-unroll max steps
MAX_INNERMOST = 64  # Ansor's max_innermost_split_factor


@dataclass(frozen=True)
class Coordinate:
    """One hop-able coordinate: level ``level`` of knob ``knob`` (level -1: a scalar knob)."""

    knob: str
    level: int
    choices: tuple[int, ...]

    @property
    def label(self) -> str:
        return self.knob if self.level < 0 else f"{self.knob}.{self.level}"

    def value_of(self, config: Config) -> int:
        """The value this coordinate takes in ``config``."""
        return config[self.knob] if self.level < 0 else config[self.knob][self.level]


class LoopTiling:
    """The tile knobs of a loop nest (see the module docs).

    Args:
        loops: the loops to tile, in nest order (spatial and reduction).
        unroll_choices: the values of the ``unroll`` knob.
        max_innermost: the largest innermost tile of any loop.
        spatial_levels: the levels of each spatial loop (CPU sketch: 4).
        reduction_levels: the levels of each reduction loop (CPU sketch: 2).
        scalar_knobs: the knobs that are not tile sizes, with their choices, in coordinate order
            (default: ``unroll`` with ``unroll_choices``, then ``cache_write`` with 0/1).
        bounds: coordinate label (``"f.3"``, ``"unroll"``) -> the choices it keeps (see the module docs);
            None: every choice.
    """

    def __init__(self, loops: Sequence[Loop], *, unroll_choices: tuple[int, ...] = UNROLL_CHOICES,
                 max_innermost: int = MAX_INNERMOST, spatial_levels: int = SPATIAL_LEVELS,
                 reduction_levels: int = REDUCTION_LEVELS, scalar_knobs: Mapping[str, tuple[int, ...]] | None = None,
                 bounds: Mapping[str, Sequence[int]] | None = None):
        self.loops: tuple[Loop, ...] = tuple(loops)
        self.unroll_choices = tuple(unroll_choices)
        self.max_innermost = max_innermost
        self.spatial_levels = spatial_levels
        self.reduction_levels = reduction_levels
        self.scalar_knobs: dict[str, tuple[int, ...]] = (
            {"unroll": self.unroll_choices, "cache_write": (0, 1)} if scalar_knobs is None
            else {knob: tuple(choices) for knob, choices in scalar_knobs.items()})
        self.levels = {lp.name: spatial_levels if lp.kind == "spatial" else reduction_levels for lp in self.loops}
        self.extents = {lp.name: lp.extent for lp in self.loops}
        coords: list[Coordinate] = []
        for lp in self.loops:
            if lp.extent > 1:
                for level in range(1, self.levels[lp.name]):
                    coords.append(Coordinate(lp.name, level, divisors(lp.extent)))
        coords += [Coordinate(knob, -1, choices) for knob, choices in self.scalar_knobs.items()]
        self.bounds: dict[str, tuple[int, ...]] | None = None if bounds is None else _checked_bounds(bounds, coords)
        if self.bounds:
            coords = [Coordinate(c.knob, c.level, self.bounds.get(c.label, c.choices)) for c in coords]
            self.scalar_knobs = {knob: self.bounds.get(knob, choices) for knob, choices in self.scalar_knobs.items()}
        self.coordinates: tuple[Coordinate, ...] = tuple(coords)
        self.knobs = frozenset([lp.name for lp in self.loops] + list(self.scalar_knobs))
        self._choices = {(c.knob, c.level): c.choices for c in coords}
        # A bounded tiling lists each loop's tilings once: sampling and enumeration draw from these lists.
        self._tilings: dict[str, tuple[tuple[int, ...], ...]] = {}
        if self.bounds is not None:
            for lp in self.loops:
                self._tilings[lp.name] = self._list_tilings(lp)
                if not self._tilings[lp.name]:
                    raise SpaceError(f"the bounds leave loop {lp.name!r} (extent {lp.extent}) no tiling: "
                                     f"its bounded levels must multiply to a divisor of the extent")

    @property
    def spatial(self) -> list[str]:
        return [lp.name for lp in self.loops if lp.kind == "spatial"]

    @property
    def reduction(self) -> list[str]:
        return [lp.name for lp in self.loops if lp.kind == "reduction"]

    # -- validity -----------------------------------------------------------
    def check(self, config: Config) -> None:
        """Raise :class:`SpaceError` unless the tile knobs of ``config`` are valid (other knobs are not looked at)."""
        missing = self.knobs - set(config)
        if missing:
            raise SpaceError(f"missing tile knobs {sorted(missing)}")
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
            if self.bounds is not None and lp.extent > 1:
                for level in range(1, levels):
                    if tiles[level] not in self._choices[(lp.name, level)]:
                        raise SpaceError(f"{lp.name}.{level} = {tiles[level]} is outside the bounded space "
                                         f"(choices {list(self._choices[(lp.name, level)])})")
        for knob, choices in self.scalar_knobs.items():
            if config[knob] not in choices:
                raise SpaceError(f"{knob} must be one of {choices}, got {config[knob]!r}")

    # -- sampling and moves ---------------------------------------------------
    def sample(self, rng: np.random.Generator) -> dict[str, object]:
        """Random tile knob values: each loop's factorization uniformly, then each scalar knob's choice."""
        values: dict[str, object] = {}
        for lp in self.loops:
            if self.bounds is not None:
                listed = self._tilings[lp.name]
                values[lp.name] = listed[int(rng.integers(len(listed)))]
                continue
            # The index of a uniformly drawn factorisation, built without listing them all.
            count = count_factorizations(lp.extent, self.levels[lp.name], self.max_innermost)
            values[lp.name] = nth_factorization(lp.extent, self.levels[lp.name], self.max_innermost,
                                                int(rng.integers(count)))
        for knob, choices in self.scalar_knobs.items():
            values[knob] = choices[int(rng.integers(len(choices)))]
        return values

    # -- bounded tilings ---------------------------------------------------------
    def _list_tilings(self, loop: Loop) -> tuple[tuple[int, ...], ...]:
        """Every tiling of ``loop`` whose levels below 0 take their (bounded) coordinates' choices."""
        levels = self.levels[loop.name]
        if loop.extent == 1:
            return ((1,) * levels,)
        choices = [self._choices[(loop.name, level)] for level in range(1, levels)]
        out = []
        for inner in itertools.product(*choices):
            size = prod(inner)
            if loop.extent % size == 0 and inner[-1] <= self.max_innermost:
                out.append((loop.extent // size, *inner))
        return tuple(out)

    def tilings_of(self, loop: str) -> tuple[tuple[int, ...], ...]:
        """Every tiling of the named loop (a bounded tiling only: an unbounded one may have too many)."""
        if self.bounds is None:
            raise SpaceError("only a bounded tiling lists its tilings")
        return self._tilings[loop]

    def count(self) -> int:
        """The number of configs of a bounded tiling (tile and scalar knobs)."""
        return prod(len(self.tilings_of(lp.name)) for lp in self.loops) * prod(
            len(c) for c in self.scalar_knobs.values())

    def enumerate(self) -> list[dict[str, object]]:
        """The knob values of every config of a bounded tiling, in a fixed order."""
        names = [lp.name for lp in self.loops] + list(self.scalar_knobs)
        lists = [self.tilings_of(lp.name) for lp in self.loops] + list(self.scalar_knobs.values())
        return [dict(zip(names, values)) for values in itertools.product(*lists)]

    def nearest_tiling(self, loop: str, wanted: Sequence[int]) -> tuple[int, ...]:
        """The listed tiling of ``loop`` closest to ``wanted`` (levels 1 and inward) in log distance."""
        want = np.log(np.maximum(np.asarray(wanted[1:], dtype=np.float64), 1.0))
        return min(self.tilings_of(loop), key=lambda t: (float(np.abs(np.log(t[1:]) - want).sum()), t))

    def coordinate_index(self, config: Config, coord: Coordinate) -> int:
        return coord.choices.index(coord.value_of(config))

    def hopped_value(self, config: Config, coordinate: int, direction: int):
        """The knob value after the hop, or None if the hop leaves the tiling."""
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
        """Move one coordinate one step (+1 / -1) in its sorted list; None if that leaves the tiling."""
        value = self.hopped_value(config, coordinate, direction)
        return None if value is None else config.replace(**{self.coordinates[coordinate].knob: value})

    def neighbours(self, config: Config, hops: int = 1,
                   valid: Callable[[Config], bool] | None = None) -> list[Config]:
        """Configs reached by moving exactly ``hops`` distinct coordinates one step each.

        Two coordinates of the same loop interact through the derived level 0,
        so a multi-hop move is applied one coordinate at a time and kept only
        if the result is valid (seed 000: the n-hop neighbourhood has at most
        C(m, n) * 2^n members). ``valid`` rejects results the owning space
        forbids beyond the tiles themselves. Duplicates and the config itself
        are removed.
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
                if current is not None and current not in seen and (valid is None or valid(current)):
                    seen.add(current)
                    out.append(current)
        return out

    def encode(self, config: Config) -> np.ndarray:
        """Each coordinate's position in its choice list, in [0, 1]."""
        out = np.empty(len(self.coordinates), dtype=np.float32)
        for i, coord in enumerate(self.coordinates):
            span = len(coord.choices) - 1
            out[i] = self.coordinate_index(config, coord) / span if span else 0.0
        return out

    def describe(self, config: Config) -> str:
        parts = [f"{lp.name}={'x'.join(map(str, config[lp.name]))}" for lp in self.loops if lp.extent > 1]
        return " ".join(parts + [f"{knob}={config[knob]}" for knob in self.scalar_knobs])

    def bands(self, config: Config) -> tuple[list[list[int]], list[list[int]]]:
        """The tile sizes level by level: (spatial levels S0..S3, reduction levels R0..R1 on a CPU), each a
        list per loop."""
        spatial = [[config[n][level] for n in self.spatial] for level in range(self.spatial_levels)]
        reduction = [[config[n][level] for n in self.reduction] for level in range(self.reduction_levels)]
        return spatial, reduction


def _checked_bounds(bounds: Mapping[str, Sequence[int]], coords: Sequence[Coordinate]) -> dict[str, tuple[int, ...]]:
    """``bounds`` as label -> sorted choices, each a non-empty subset of its coordinate's choices."""
    by_label = {c.label: c for c in coords}
    if not isinstance(bounds, Mapping):
        raise SpaceError(f"bounds must map coordinate labels to choices, got {type(bounds).__name__}")
    out: dict[str, tuple[int, ...]] = {}
    for label, values in bounds.items():
        coord = by_label.get(label)
        if coord is None:
            raise SpaceError(f"bounds name {label!r}, which is not a coordinate; the coordinates are "
                             f"{', '.join(by_label)}")
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise SpaceError(f"bounds of {label!r} must be a non-empty list of choices, got {values!r:.60}")
        outside = [v for v in values if v not in coord.choices]
        if outside:
            raise SpaceError(f"bounds of {label!r} hold {outside}, which are not among its choices "
                             f"{list(coord.choices)}")
        out[label] = tuple(sorted(set(int(v) for v in values), key=coord.choices.index))
    return out


def project_tiles(extent: int, levels: int, wanted: Sequence[int], max_innermost: int) -> tuple[int, ...]:
    """A tiling of ``extent`` in ``levels`` levels close to ``wanted`` (a tiling of another extent).

    From the innermost level out, each level takes the largest divisor of what
    is left that does not exceed the wanted size (the innermost also not
    ``max_innermost``); level 0 takes the rest. Used to carry a config's tiles
    over to a loop nest of other extents.
    """
    tiles = [1] * levels
    left = extent
    for level in range(levels - 1, 0, -1):
        want = wanted[level] if level < len(wanted) else 1
        cap = min(want, max_innermost) if level == levels - 1 else want
        tiles[level] = max(d for d in divisors(left) if d <= max(1, cap))
        left //= tiles[level]
    tiles[0] = left
    return tuple(tiles)
