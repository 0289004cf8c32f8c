"""Benchmark spaces: bounded sub-spaces of the ``tiles`` space small enough to measure every config.

A landscape (:mod:`tensorgym.landscape`) measures one of these exhaustively, once, so that
agents can then be compared on it with many seeds and against the true optimum. The
sub-space is a :class:`~.space.TilesSpace` built with ``bounds``: its coordinates keep only
some of their choices, so sampling, hops, neighbours, the GA's moves and Optuna's parameters
all stay inside it (see :mod:`.tiling`), and its configs are configs of the full space (same
name, same knobs), so their records are shared with it.

**Two rules** (:func:`benchmark_bounds`, ``rule=``) choose which values each coordinate keeps.

``"stratified"`` (the default) keeps the values a uniform draw from the whole space takes, in
proportion: the coordinate's values in 8,192 uniform draws are cut into as many equal strata as it
keeps values, and each stratum gives its middle value, with the anchor's value (below) always among
them. A landscape exists to predict
how search methods fare in the space a user tunes, so it must be about as hard: measured uniform
samples of the whole tiles space (``tensorgym landscape sample``) showed the favoured rule's spaces far
easier (random search's best of 64 draws at 0.96 of the optimum on ResNet-50 R5 against 0.67 in the
whole space, with 1.7 % of the configs within 5 % of the optimum against none of 2,000 sampled), since
that rule keeps the values good kernels use. Stratified values keep the whole space's spread of bad
and good choices; the anchor keeps a kernel as good as a strong search finds.

Where a full-space sample of the layer is measured on the CPU, the stratified rule also shares the
values out by *importance* (:func:`coordinate_importance`): how much more the sample's best 5 % of
kernels agree on a coordinate's value than the whole sample does. The most important coordinate
starts with eight values, one of no importance with one (the anchor's), and the space is cut to size
taking values first from the coordinates that hold the most for their importance. A space of two
values per coordinate, tried first, left R5's vectorised tiles at two values while ten coordinates
that hardly matter doubled the size: its near-optimal kernels were ten times as common as in the
whole space (0.9 % against under 0.05 %). Where the importance sits in one coordinate of few values
(YOLO-9000 Y9), every other coordinate started with one value and the space held 12-98 configs, where random
search finds the optimum at once; so a space shared out by importance is grown to at least half of its
``max_configs``, one value at a time to the coordinate with the fewest values for its importance.

``"stratified-path"`` keeps the stratified values and, on each coordinate, every value between the anchor's
and the nearest kept value on either side. A stratified grid can keep a coordinate's endpoints and skip its
middle: ResNet-18 C7's kept 1, 2 and 16 of the output-channel register tile (``f`` innermost), where the whole
space's kernels get faster on average from 1 to 8. On that landscape the GA and DGD stalled with a tile of 2 on 6
of 10 seeds each, where live runs in the whole space reached the optimum on 10 and 9. The path puts the steps back,
at a price measured on C7 (``bench/reports/landscapes/c7_path_rule.txt``): the GA and DGD then reached the optimum
on 9 and 10 of 10 seeds, the GA's progress within 0.06 of its live runs' (0.22 before), but random search's profile
came out 0.11-0.16 easier than the whole space's (0.05 before), DGD's too. So it is opt-in: no product grid of
this size was found faithful for random search and guided search at once.

``"favoured"`` (the shipped landscapes measured before the full-space samples) ranks each
coordinate's choices by what the CPU favours and keeps the first few:

* the innermost tile of the *vectorised* loop (the last spatial loop of the nest): multiples
  of the target's fp32 lanes first (a whole number of vector registers), nearest to two
  vectors first; where none divides the extent, the divisors nearest to two vectors;
* the innermost tile of the widest other spatial loop (the rows of the register tile):
  nearest to the number of rows whose accumulators, beside the favourite vector tile, fill
  about a quarter of the vector registers (8 rows of one AVX-512 vector, 4 of two; half as
  many on AVX2); the innermost tiles of the remaining spatial loops: 1 first, then the
  smallest (rows multiply, and too many spill the accumulators);
* level 2 of a spatial loop (a tile between the register tile and the cache tile): 1 first,
  since such a tile makes LLVM spill the accumulators (``bench/kernel_anatomy.py --tiles``);
* level 1 of a spatial loop (the cache tile, and with level 0 the parallel split): 1 first
  (a short loop, 14 outputs wide, say, has room for nothing beside a whole-loop register
  tile), then nearest to 4;
* the inner reduction tile: 1 first (the reduction runs outside the register tile's loops),
  then the divisors nearest to two vectors' lanes (a block of products per accumulator);
* ``unroll``: 64, 16, 0, 512; ``cache_write``: 1 (accumulate in registers), then 0.

These rules were revised once against measurements (``bench/reports/landscapes/quality.txt``):
the first version ranked every row tile, cache tile and inner reduction tile near 4 or 8,
and its space for ResNet-18 C7 (a 1x1 conv of 14 x 14 outputs, one vector per row) missed
the GA's best by a third: that kernel used 16 rows, a whole-row vector tile with no cache
tile around it, and no inner reduction tile, none of which the space held.

**The anchor.** Analytical rules alone missed good kernels of some layers (below), so the
space is also built around an *anchor*: the best config the GA finds in the full tiles space
with 512 measurements on the same CPU (``tensorgym landscape measure`` runs that search first,
into its own database, and reads the anchor from it, so the space is the same every time the
job resumes). Each coordinate's anchor value is ranked first and never dropped. The anchor
makes the space hold a kernel as good as a strong search finds, which is what keeps it from
being a toy; the other choices come from the rules, so the space still holds far worse
kernels around it, and agents must find the good ones.

Then, while the space holds more than ``max_configs`` configs, the coordinate with the most
kept choices drops one (under the stratified rule, it re-spreads one fewer value over its range; under
the favoured rule, it drops its least favoured one) (level-2 coordinates first on ties, then level 1,
reduction, scalar knobs, innermost tiles). Every coordinate keeps at least one choice, and
the configs are counted exactly (level 0 must be a whole number), not estimated.

Why not a random subset of configs: agents move by hops and mutations, so the sub-space
must be a product of per-coordinate choices, or its configs would have holes around them.
Whether it is a toy is measured, not assumed: ``bench/bench_landscape_quality.py`` compares
its best config with the best the GA finds in the full space at 512 measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ...config import Config
from ...target import Target
from ...workloads import Workload
from ..base import SpaceError
from .space import TilesSpace
from .tiling import Coordinate

DEFAULT_MAX_CONFIGS = 4096  # about half an hour to an hour of measuring on 2 cores at 0.4-0.9 s a trial
RULES = ("stratified", "stratified-path", "favoured")
STRATIFIED_RULES = ("stratified", "stratified-path")
# The most important coordinate starts with 1 + this many values, one of no importance with 1. A layer whose
# important coordinates have many values (ResNet-18 C7) needs more to be as hard as its whole space: a surrogate
# fitted to its full-space sample predicts the profile of each choice before anything is measured.
IMPORTANCE_CHOICES = 7
# The share of the full-space sample whose values decide a coordinate's importance: the best 5 %, the kernels a
# search is after. 1 (the whole sample) makes every coordinate alike, so values are shared out evenly from the
# anchor's: on BERT M3 and YOLO-9000 Y9 (Zen 4) that space is predicted as hard as the whole space for random search
# at about 5,000 configs, where importance needs 15,000 or more, but it keeps few values of their innermost tiles.
IMPORTANCE_TOP = 0.05
# How many choices each kind of coordinate starts with, before the space is cut to size.
START_CHOICES = {"inner": 4, "middle": 2, "outer": 4, "reduction": 4, "scalar": 2}
# The order in which kinds of coordinate give up choices when two hold equally many.
DROP_ORDER = ("middle", "outer", "reduction", "scalar", "inner")
UNROLL_PREFERENCE = (64, 16, 0, 512)
# A space shared out by importance holds at least max_configs / this many configs: where one coordinate holds all
# the importance (YOLO-9000 Y9), the others kept one value each and left a space of 12-98 configs, where random
# search found the optimum at once. Values are added, most under-served coordinate first, until it is that large.
MIN_SHARE_OF_MAX = 2


def benchmark_space(workload: Workload, target: Target, *, max_configs: int = DEFAULT_MAX_CONFIGS,
                    anchor: Config | None = None, rule: str = "stratified",
                    importance: Mapping[str, float] | None = None, importance_choices: int = IMPORTANCE_CHOICES,
                    **options) -> TilesSpace:
    """The benchmark sub-space of ``workload``'s tiles space on ``target``, around ``anchor`` if given, by
    ``rule``, its choices shared out by ``importance`` if given (see the module docs)."""
    if options.get("bounds") is not None:
        raise SpaceError("benchmark_space chooses the bounds itself; build TilesSpace(..., bounds=...) for others")
    full = TilesSpace.for_target(target)(workload, target, **options)
    bounds = benchmark_bounds(full, max_configs, anchor, rule, importance, importance_choices)
    return TilesSpace.for_target(target)(workload, target, bounds=bounds, **options)


def coordinate_importance(space: TilesSpace, configs: list[Config], scores: list[float],
                          top: float = IMPORTANCE_TOP) -> dict[str, float]:
    """How much each coordinate decides a good kernel, from a uniform sample of the whole ``space`` (``configs``
    with their GFLOP/s): 1 minus the entropy of its values among the best ``top`` share of the sample over their
    entropy in the whole sample (0: the best kernels take its values as often as any; 1: they all take one)."""
    if len(configs) != len(scores) or len(configs) < 20:
        raise SpaceError(f"coordinate_importance needs at least 20 configs with their scores, got {len(configs)}")
    if not 0 < top <= 1:
        raise SpaceError(f"the importance share must be in (0, 1], got {top}")
    order = np.argsort(-np.asarray(scores, dtype=float))
    best = [configs[i] for i in order[:max(5, int(top * len(configs)))]]

    def entropy(values: list[int]) -> float:
        _, counts = np.unique(values, return_counts=True)
        p = counts / counts.sum()
        return float(-(p * np.log(p)).sum())

    def values(label_configs: list[Config], c: Coordinate) -> list[int]:
        return [c.value_of(x) for x in label_configs]

    out = {}
    for c in space.coordinates:
        whole = entropy(values(configs, c))
        out[c.label] = 0.0 if whole == 0 else float(np.clip(1 - entropy(values(best, c)) / whole, 0.0, 1.0))
    return out


def stratified(drawn: list[int], choices: list[int], count: int, must: int | None = None) -> list[int]:
    """``count`` of a coordinate's (ascending) ``choices``: the values at the midpoints of ``count`` equal strata
    of ``drawn`` (the coordinate's values in uniform draws from the whole space), then the most frequent others
    where strata share a value; ``must`` among them (in place of the nearest by rank) when given."""
    count = min(count, len(choices))
    ordered = sorted(drawn, key=choices.index)
    picked: list[int] = []
    for i in range(count):
        value = ordered[min(len(ordered) - 1, int((i + 0.5) / count * len(ordered)))]
        if value not in picked:
            picked.append(value)
    frequency = {c: drawn.count(c) for c in choices}
    for value in sorted(choices, key=lambda c: (-frequency[c], choices.index(c))):
        if len(picked) >= count:
            break
        if value not in picked:
            picked.append(value)
    if must is not None and must not in picked:
        position = choices.index(must)
        nearest = min(range(len(picked)), key=lambda i: abs(choices.index(picked[i]) - position))
        picked[nearest] = must
    return sorted(picked, key=choices.index)


def with_path_to(kept: list[int], choices: list[int], anchor: int) -> list[int]:
    """``kept`` (values of ascending ``choices``, ``anchor`` among them) with every choice between the anchor and
    its nearest kept neighbour on each side: the steps a search takes towards the anchor's value."""
    position = {c: i for i, c in enumerate(choices)}
    here = position[anchor]
    below = max((position[v] for v in kept if position[v] < here), default=here)
    above = min((position[v] for v in kept if position[v] > here), default=here)
    return sorted(set(kept) | set(choices[below:above + 1]), key=position.get)


def uniform_marginals(space: TilesSpace, draws: int = 8192, seed: int = 0) -> dict[str, list[int]]:
    """Each coordinate's values in ``draws`` uniform draws from the whole ``space`` (its own sampler: one
    factorisation per loop, one value per knob, each uniform)."""
    configs = space.sample_many(np.random.default_rng(seed), draws)
    return {c.label: [c.value_of(config) for config in configs]
            for c in space.coordinates}


def coordinate_kind(space: TilesSpace, coord: Coordinate) -> str:
    """What a coordinate is in the register/cache hierarchy: ``inner``, ``middle``, ``outer`` (spatial levels 3,
    2, 1), ``reduction`` or ``scalar``."""
    if coord.level < 0:
        return "scalar"
    if coord.knob in space.tiling.reduction:
        return "reduction"
    return {space.spatial_levels - 1: "inner", 1: "outer"}.get(coord.level, "middle")


def ranked_choices(space: TilesSpace, coord: Coordinate) -> list[int]:
    """The choices of a (full-space) coordinate, the CPU's favourite first (see the module docs)."""
    kind = coordinate_kind(space, coord)
    choices = list(coord.choices)
    if kind == "scalar":
        if coord.knob == "unroll":
            return sorted(choices, key=lambda u: (UNROLL_PREFERENCE.index(u) if u in UNROLL_PREFERENCE else 99, u))
        if coord.knob == "cache_write":
            return sorted(choices, reverse=True)
        return choices

    def near(value: float):
        return lambda d: (abs(math.log2(d) - math.log2(value)), d)

    lanes = space.target.vector_lanes_fp32 or 8
    if kind == "inner":
        spatial = [lp for lp in space.loops if lp.kind == "spatial"]
        vectorised = spatial[-1]
        vector_tiles = [d for d in _divisors_of(space, vectorised.name) if d <= space.max_innermost]
        favourite = sorted(vector_tiles, key=lambda d: (d % lanes != 0, *near(2 * lanes)(d)))
        if coord.knob == vectorised.name:
            return favourite + [d for d in choices if d not in favourite]
        # The rows of the register tile: the widest other spatial loop gives them, enough to fill about a
        # quarter of the vector registers with accumulators beside the favourite vector tile; the other
        # loops add rows only sparingly (1 first), since rows multiply.
        rows = max((lp for lp in spatial[:-1] if lp.extent > 1), key=lambda lp: lp.extent)
        if coord.knob == rows.name:
            vectors = max(1, math.ceil(favourite[0] / lanes))
            return sorted(choices, key=near(max(1.0, space.target.vector_registers / 4 / vectors)))
        return sorted(choices)
    if kind == "middle":
        return sorted(choices)
    if kind == "outer":  # 1 first: the loop whole in its inner tiles (a short loop has room for nothing else)
        return [1] + sorted((d for d in choices if d != 1), key=near(4))
    # The inner reduction tile: none (1: the reduction runs outside the register tile's loops), or a block of
    # about two vectors' worth of products per accumulator.
    return [1] + sorted((d for d in choices if d != 1), key=near(2 * lanes))


def _divisors_of(space: TilesSpace, loop: str) -> tuple[int, ...]:
    coord = next(c for c in space.coordinates if c.knob == loop and c.level == space.spatial_levels - 1)
    return coord.choices


def benchmark_bounds(space: TilesSpace, max_configs: int = DEFAULT_MAX_CONFIGS, anchor: Config | None = None,
                     rule: str = "stratified", importance: Mapping[str, float] | None = None,
                     importance_choices: int = IMPORTANCE_CHOICES) -> dict[str, tuple[int, ...]]:
    """The bounds of the benchmark sub-space of the (unbounded) ``space`` by ``rule``: at most ``max_configs``
    configs, and every coordinate value of ``anchor`` (a config of ``space``) among them; with ``importance``
    (:func:`coordinate_importance`, stratified rule only), each coordinate starts with choices in proportion to
    it (the most important with ``1 + importance_choices``) and gives them up in inverse proportion."""
    if importance_choices < 1:
        raise SpaceError(f"importance_choices must be at least 1, got {importance_choices}")
    if space.bounds is not None:
        raise SpaceError("benchmark_bounds starts from the full tiles space, not a bounded one")
    if max_configs < 1:
        raise SpaceError(f"max_configs must be at least 1, got {max_configs}")
    if rule not in RULES:
        raise SpaceError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    coords = list(space.coordinates)
    ranked = {c.label: ranked_choices(space, c) for c in coords}
    kinds = {c.label: coordinate_kind(space, c) for c in coords}
    keep = {label: min(START_CHOICES[kinds[label]], len(ranked[label])) for label in ranked}
    weight = {label: 1.0 for label in ranked}
    if importance is not None:
        if rule not in STRATIFIED_RULES or set(importance) != set(ranked):
            raise SpaceError("importance is given per coordinate of the space, under the stratified rule")
        top = max(importance.values()) or 1.0
        weight = {label: 1.0 + importance_choices * importance[label] / top for label in ranked}
        keep = {label: min(len(ranked[label]), round(weight[label])) for label in ranked}
    anchored: dict[str, int] = {}
    if anchor is not None:  # the anchor's values go first, and are never dropped (see the module docs)
        space.check(anchor)
        for c in coords:
            value = c.value_of(anchor)
            anchored[c.label] = value
            ranked[c.label] = [value] + [v for v in ranked[c.label] if v != value]

    order = {c.label: c.choices for c in coords}
    drawn = uniform_marginals(space) if rule in STRATIFIED_RULES else {}

    def kept(label: str) -> list[int]:
        if rule in STRATIFIED_RULES:
            values = stratified(drawn[label], list(order[label]), keep[label], anchored.get(label))
            if rule == "stratified-path" and label in anchored:
                values = with_path_to(values, list(order[label]), anchored[label])
            return values
        return ranked[label][:keep[label]]

    def bounds() -> dict[str, tuple[int, ...]]:  # each coordinate's kept choices, in its own (ascending) order
        return {label: tuple(sorted(kept(label), key=order[label].index)) for label in ranked}

    def count() -> int:
        try:
            return TilesSpace.for_target(space.target)(space.workload, space.target, bounds=bounds(),
                                                       **_options(space)).tiling.count()
        except SpaceError:  # the bounds leave a loop no tiling: as good as empty
            return 0

    size = count()
    full_choices: set[str] = set()  # coordinates that cannot take one more value within max_configs
    while importance is not None and size < max_configs // MIN_SHARE_OF_MAX:
        growable = [label for label in ranked if keep[label] < len(ranked[label]) and label not in full_choices]
        if not growable:
            break
        label = min(growable, key=lambda lb: (keep[lb] / weight[lb], DROP_ORDER.index(kinds[lb])))
        keep[label] += 1
        larger = count()
        if larger > max_configs or larger <= size:  # too many, or a value no tiling uses: leave it out
            keep[label] -= 1
            full_choices.add(label)
            continue
        size = larger
    fixed: set[str] = set()  # coordinates whose remaining choices every loop tiling needs
    while size > max_configs:
        droppable = [label for label in ranked if keep[label] > 1 and label not in fixed]
        if not droppable:
            break
        label = max(droppable, key=lambda lb: (keep[lb] / weight[lb], -DROP_ORDER.index(kinds[lb])))
        keep[label] -= 1
        smaller = count()
        if smaller == 0:  # this choice was the only way to tile the loop: keep it, cut elsewhere
            keep[label] += 1
            fixed.add(label)
            continue
        size = smaller
    if size == 0:
        raise SpaceError(f"no benchmark sub-space of {space.workload.label} within {max_configs} configs")
    return bounds()


def _options(space: TilesSpace) -> Mapping:
    options = dict(space.options)
    options.pop("bounds", None)
    return options
