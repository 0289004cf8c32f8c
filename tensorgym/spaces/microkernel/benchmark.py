"""Benchmark spaces of the ``microkernel`` space: bounded sub-spaces small enough to measure every config.

A landscape (:mod:`tensorgym.landscape`) measures one of these exhaustively, once, so that agents can
be compared on it with many seeds and against the true optimum. :class:`MicrokernelBenchmarkSpace` is a
:class:`~.space.MicrokernelSpace` (same ``name``, same knobs: its configs are configs of the full space
and share its records) that holds only the configs its ``bounds`` describe. Only conv2d layers have
one (:func:`benchmark_space` refuses others): the rules below were written for the seven loops of a
convolution.

**What a config of the sub-space is.** The full space orders its tile loops freely and splits a loop
into any number of tiles; a sub-space of it must fix most of that, or it cannot be measured whole:

* a *template*: one fixed sequence of tile slots (loop names, and the λ slot of a combination), which
  every config of the sub-space fills; a slot whose trip count is 1 vanishes from the config's stack.
  The default template is the classic blocked convolution: an outer block of the spatial loops
  ``f y x`` (the parallel loops), then the reductions ``rc ry rx``, then an inner block ``f x y``
  (the cache tile around the microkernel), then λ (the innermost level of ``y``, as the full space
  requires). With an anchor (below) the template is the anchor's own stack, completed: a loop it
  lacks gets a slot (a reduction beside the anchor's first reduction slot, a spatial loop one slot in
  each block), and a spatial loop with one slot gets the other block's slot, so that every spatial
  loop can still be split between the parallel block and the cache tile;
* *selections*: the kept microkernels and λ-combinations (the ``selections`` axis);
* per loop, a *split*: the trip counts of its slots but the last (the last slot takes what is left),
  from that loop's kept splits. For the reduction loop ``rc`` the split gives every slot, and the
  reuse loop around the microkernel takes what is left, so a split of ``(1,)`` means the whole
  reduction runs in the reuse loop;
* *parallel*: ``"all"`` (the whole leading run of spatial loops is fused and run on the cores) or
  ``"fewest"`` (the fewest leading loops whose iterations split evenly over the cores), or the anchor's
  own number of parallel loops.

A config of the sub-space is one choice per axis for one kept selection; the choices that do not fit a
selection (a split that does not divide what the microkernel leaves of the loop, a ``y`` tile below
the λ entry) give no config. A selection for which no kept split of a loop fits takes the split
``(1, ..., 1)`` (the whole loop in its last slot), and a stack with no even split over the cores runs
its whole leading run in parallel, so every kept selection and every stack keeps configs.

**The rules** (:func:`benchmark_bounds`). Each axis's choices are ranked, the first few kept:

* selections: by the measured fraction of peak of the microkernel(s) (the catalogue's calibration;
  rounded to 1 %, the noise of that calibration, since most kept microkernels measure within a few %
  of peak on their own), then by the register tile's arithmetic intensity (``vec*h*w`` FMAs per
  ``vec + h*w`` loads of one reduction step: the fewer loads per FMA, the less the kernel leans on L1
  inside the layer, which calibration in isolation does not see); one selection per class of sizes
  first, so the kept ones differ in shape, not only in ``h``;
* the reduction split: ``1`` first (the whole reduction in the reuse loop: partial sums never leave the
  registers), then nearest to 4 outer iterations (a block of input channels that stays in L1);
* the split of a spatial loop: nearest to an even split between the parallel block and the cache tile
  (the outer trip count nearest to the square root of the loop's trip count), the larger first;
* ``ry``/``rx`` splits: the whole loop in one slot first;
* parallel: ``"all"``, then ``"fewest"``.

**The anchor.** As for the tiles space (:mod:`tensorgym.spaces.tiles.benchmark`), rules alone do not
guarantee that the sub-space holds a kernel as good as a strong search of the full space finds, so
the sub-space is built around an *anchor*: the best config of a search of the full microkernel space
with 512 measurements on the same CPU. That search is seed 003's ``random-structured`` sampler (the
GA and DGD do not search this space; seed 003's claim is that its structured random draws come near
the space's best within tens of measurements, and ``bench/reports/bench_microkernel.txt`` shows them
at oneDNN's level). The anchor's stack is the template, and its selection, splits and parallel choice
are ranked first on their axes and never dropped, so the anchor is a config of the sub-space.

Then, while the sub-space holds more than ``max_configs`` configs, the axis with the most kept
choices drops its least favoured one (ties: spatial splits first, then the reduction split, parallel,
selections). The configs are enumerated and counted exactly, not estimated.

**Moves stay inside.** :meth:`MicrokernelBenchmarkSpace.check` accepts the sub-space's configs only, so
the full space's moves (:meth:`~.space.MicrokernelSpace.neighbours`, which keep the valid candidates
only) stay inside it; :meth:`~MicrokernelBenchmarkSpace.sample` draws a kept selection uniformly (seed
003's sampler draws the selection first too), then one of its configs uniformly; the construction env
over a landscape offers only actions that lead to configs of the sub-space.

**Rebuilding without TVM or a catalogue.** :attr:`MicrokernelBenchmarkSpace.options` holds everything
the sub-space is built from: the catalogue entries of its microkernels (with the peak and threshold),
the packing and the bounds. A landscape keeps them in its metadata, so ``Landscape.space()`` builds the
same sub-space on any machine, without this machine's stored catalogue and without importing TVM.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...config import Config
from ...factors import divisors
from ...target import Target
from ...workloads import Conv2d, Workload
from ..base import SpaceError
from .catalogue import Catalogue, CatalogueEntry, Microkernel, load_catalogue
from .codegen import LAMBDA
from .space import MicrokernelSpace, Selection

DEFAULT_MAX_CONFIGS = 1536  # about 10-15 minutes of measuring on 2 cores at 0.4-0.6 s a trial
# How many choices each kind of axis starts with, before the space is cut to size.
START_CHOICES = {"selection": 12, "reduction": 3, "spatial": 4, "other": 1, "parallel": 2}
# The order in which kinds of axis give up choices when two hold equally many.
DROP_ORDER = ("spatial", "reduction", "other", "parallel", "selection")
PARALLEL_RULES = ("all", "fewest")
SELECTION_AXIS, PARALLEL_AXIS = "selection", "parallel"
# The default template: the spatial loops' parallel block, the reductions, the cache tile, λ.
OUTER, REDUCTIONS, INNER = ("f", "y", "x"), ("rc", "ry", "rx"), ("f", "x", "y")


# -- the sub-space ---------------------------------------------------------------------------------------------
class MicrokernelBenchmarkSpace(MicrokernelSpace):
    """The configs of the microkernel space that ``bounds`` describe (see the module docs).

    Args:
        workload, target: as for :class:`~.space.MicrokernelSpace` (a conv2d).
        bounds: ``{"template": [...], "selections": [[class sizes, h value], ...], "axes": {loop: [split, ...],
            "parallel": [...]}}``, as :func:`benchmark_bounds` makes them (JSON: lists).
        catalogue: a :class:`~.catalogue.Catalogue`, its JSON (a dict, as landscapes keep it) or a path; None:
            this machine's stored one.
        threshold, packing, prepacked, cache_dir: as for :class:`~.space.MicrokernelSpace`.
    """

    def __init__(self, workload: Workload, target: Target, *, bounds: Mapping[str, Any],
                 catalogue: Catalogue | Mapping[str, Any] | str | Path | None = None, threshold: float | None = None,
                 prepacked: bool = False, cache_dir: str | Path | None = None, packing: str | None = None):
        _check_conv2d(workload)
        MicrokernelSpace.check_problem(workload, target)
        if isinstance(catalogue, Mapping):
            try:
                catalogue = Catalogue.from_json(dict(catalogue))
            except (KeyError, TypeError, ValueError) as exc:
                raise SpaceError(f"the benchmark space's catalogue cannot be read: {exc!r}") from None
        elif isinstance(catalogue, (str, Path)):
            catalogue = Catalogue.load(catalogue)
        elif catalogue is None:
            catalogue = load_catalogue(target, cache_dir)  # CatalogueMissing says how to calibrate
        super().__init__(workload, target, catalogue=catalogue, threshold=threshold, prepacked=prepacked,
                         cache_dir=cache_dir, packing=packing)
        self._apply_bounds(bounds)
        # What a landscape carries: the catalogue entries of the kept selections' microkernels only.
        kept = {mk for s in self.selections for mk in _kernels(s)}
        self._catalogue_json = _subset(catalogue, kept, self.fractions).to_json()

    # -- the bounds ------------------------------------------------------------------------------------
    def _apply_bounds(self, bounds: Mapping[str, Any]) -> None:
        self.bounds = _checked_bounds(bounds, self)
        wanted = [(tuple(k), tuple(h)) for k, h in self.bounds["selections"]]
        index = {(s.kernel.class_key, s.h_value): s for s in self.selections}
        missing = [w for w in wanted if w not in index]
        if missing:
            raise SpaceError(f"the bounds' selection {list(missing[0][0])} h {list(missing[0][1])} is not a "
                             f"selection of the microkernel space of {self.workload.label} with this catalogue")
        self.full_selections = self.selections
        self.selections = tuple(index[w] for w in wanted)
        self._selection_index = {(s.kernel.class_key, s.h_value): i for i, s in enumerate(self.selections)}
        self.template: tuple[str, ...] = tuple(self.bounds["template"])
        self._by_selection: list[list[Config]] = [_enumerate(self, s, self.template, self.bounds["axes"])
                                                  for s in self.selections]
        self._members = frozenset(c for group in self._by_selection for c in group)
        if not self._members:
            raise SpaceError(f"the bounds leave the microkernel benchmark space of {self.workload.label} empty")

    @property
    def options(self) -> dict[str, Any]:
        """What rebuilds this space (a landscape's ``space_options``): the catalogue of its microkernels, the
        threshold, the packing and the bounds, all JSON."""
        return {"catalogue": self._catalogue_json, "threshold": self.threshold, "packing": self.packing,
                "bounds": _json(self.bounds)}

    @property
    def size(self) -> int:
        """How many configs the sub-space holds (exactly: they are enumerated)."""
        return len(self._members)

    def __contains__(self, config: object) -> bool:
        return isinstance(config, Config) and config in self._members

    def configs(self) -> list[Config]:
        """Every config, in a fixed order (by key): the rows of a landscape of this space."""
        return sorted(self._members, key=lambda c: c.key)

    def full_space(self) -> MicrokernelSpace:
        """The microkernel space over the same microkernels (all their selections), without the bounds."""
        return MicrokernelSpace(self.workload, self.target, catalogue=Catalogue.from_json(self.options["catalogue"]),
                                threshold=self.threshold, packing=self.packing)

    # -- the Space contract, restricted ----------------------------------------------------------------------
    def check(self, config: Config) -> None:
        super().check(config)
        if config not in self._members:
            raise SpaceError(f"{config.key:.160} is a config of the microkernel space but not of its benchmark "
                             f"sub-space of {self.workload.label} ({self.size} configs)")

    def sample(self, rng: np.random.Generator) -> Config:
        """A kept selection drawn uniformly (among those with configs), then one of its configs uniformly."""
        groups = [g for g in self._by_selection if g]
        group = groups[int(rng.integers(len(groups)))]
        return group[int(rng.integers(len(group)))]

    # neighbours(): the full space's moves keep only candidates check() accepts, so they stay inside.

    def __getstate__(self):
        return {**super().__getstate__(), "bounds": _json(self.bounds), "catalogue_json": self._catalogue_json}

    def __setstate__(self, state):
        super().__setstate__(state)
        self._catalogue_json = state["catalogue_json"]
        self._apply_bounds(state["bounds"])

    def __repr__(self) -> str:
        return f"MicrokernelBenchmarkSpace({self.workload.label}, {self.target.label}, {self.size} configs)"


# -- building one ----------------------------------------------------------------------------------------------
def benchmark_space(workload: Workload, target: Target, *, catalogue: Catalogue | str | Path | None = None,
                    max_configs: int = DEFAULT_MAX_CONFIGS, anchor: Config | None = None,
                    threshold: float | None = None, packing: str | None = None,
                    cache_dir: str | Path | None = None) -> MicrokernelBenchmarkSpace:
    """The benchmark sub-space of ``workload``'s microkernel space on ``target``, around ``anchor`` if given
    (see the module docs); ``catalogue`` as for the full space (None: this machine's stored one)."""
    _check_conv2d(workload)
    MicrokernelSpace.check_problem(workload, target)
    if isinstance(catalogue, (str, Path)):
        catalogue = Catalogue.load(catalogue)
    elif catalogue is None:
        catalogue = load_catalogue(target, cache_dir)
    full = MicrokernelSpace(workload, target, catalogue=catalogue, threshold=threshold, packing=packing)
    return MicrokernelBenchmarkSpace(workload, target, bounds=benchmark_bounds(full, max_configs, anchor),
                                     catalogue=catalogue, threshold=full.threshold, packing=full.packing)


def benchmark_bounds(space: MicrokernelSpace, max_configs: int = DEFAULT_MAX_CONFIGS,
                     anchor: Config | None = None) -> dict[str, Any]:
    """The bounds of the benchmark sub-space of the (full) ``space``: at most ``max_configs`` configs, and
    ``anchor`` (a config of ``space``) among them."""
    if isinstance(space, MicrokernelBenchmarkSpace):
        raise SpaceError("benchmark_bounds starts from the full microkernel space, not a benchmark one")
    _check_conv2d(space.workload)
    if isinstance(max_configs, bool) or not isinstance(max_configs, int) or max_configs < 1:
        raise SpaceError(f"max_configs must be an integer >= 1, got {max_configs!r}")
    anchor_selection = anchor_stack = None
    if anchor is not None:
        space.check(anchor)
        anchor_selection, anchor_stack = space.selection_of(anchor), space.stack_of(anchor)
    template, positions = _placed_template(space, anchor_stack)
    selections = _ranked_selections(space, anchor_selection)
    reference = anchor_selection or selections[0]
    ranked: dict[str, list] = {SELECTION_AXIS: selections}
    kinds: dict[str, str] = {SELECTION_AXIS: "selection", PARALLEL_AXIS: "parallel"}
    for dim in _loops(space):
        kinds[dim] = _axis_kind(space, dim)
        ranked[dim] = _ranked_splits(space, dim, template, selections, reference)
    ranked[PARALLEL_AXIS] = list(PARALLEL_RULES)
    if anchor is not None:  # the anchor's values first: never dropped
        values = _values_of(space, anchor_stack, template, positions)
        values[PARALLEL_AXIS] = _parallel_value(space, anchor_stack, anchor["parallel"])
        for axis, value in values.items():
            ranked[axis] = [value] + [v for v in ranked[axis] if v != value]
    keep = {axis: min(START_CHOICES[kinds[axis]], len(choices)) for axis, choices in ranked.items()}

    def bounds() -> dict[str, Any]:
        return {"template": list(template),
                "selections": [[list(s.kernel.class_key), list(s.h_value)] for s in ranked[SELECTION_AXIS][
                    :keep[SELECTION_AXIS]]],
                "axes": {axis: [v if isinstance(v, (str, int)) else list(v) for v in ranked[axis][:keep[axis]]]
                         for axis in ranked if axis != SELECTION_AXIS}}

    def count() -> int:
        b = _checked_bounds(bounds(), space)
        chosen = ranked[SELECTION_AXIS][:keep[SELECTION_AXIS]]
        return len({c for s in chosen for c in _enumerate(space, s, tuple(b["template"]), b["axes"])})

    size = count()
    while size > max_configs:
        droppable = [axis for axis in ranked if keep[axis] > 1]
        if not droppable:
            break
        axis = max(droppable, key=lambda a: (keep[a], -DROP_ORDER.index(kinds[a])))
        keep[axis] -= 1
        size = count()
    if size > max_configs:
        raise SpaceError(f"no benchmark sub-space of {space.workload.label} within {max_configs} configs "
                         f"(one choice per axis still gives {size})")
    return bounds()


# -- the rules -------------------------------------------------------------------------------------------------
def _loops(space: MicrokernelSpace) -> list[str]:
    """The loops that can have tiles (extent > 1), in the workload's order."""
    return [d for d in space.dims if space.extents[d] > 1]


def _axis_kind(space: MicrokernelSpace, dim: str) -> str:
    if dim == space.roles["reuse"]:
        return "reduction"
    return "other" if dim in space.reduction_dims else "spatial"


def _placed_template(space: MicrokernelSpace, stack: Sequence[tuple[str, int]] | None
                     ) -> tuple[tuple[str, ...], list[int]]:
    """The slots every config fills (see the module docs: the default blocked order, or the anchor's stack
    completed), and the slot each entry of ``stack`` (the anchor's) fills in it."""
    loops = _loops(space)
    spatial = [d for d in loops if d not in space.reduction_dims]
    reductions = [d for d in loops if d in space.reduction_dims]
    if stack is None:
        outer = [d for d in OUTER if d in spatial] + [d for d in spatial if d not in OUTER]
        inner = [d for d in INNER if d in spatial] + [d for d in spatial if d not in INNER]
        middle = [d for d in REDUCTIONS if d in reductions] + [d for d in reductions if d not in REDUCTIONS]
        return (*outer, *middle, *inner, LAMBDA), []
    run = space.parallel_run(stack)
    # (loop, index of the anchor's entry or None for an added slot)
    lead: list[tuple[str, int | None]] = [(d, i) for i, (d, _) in enumerate(stack[:run])]
    rest: list[tuple[str, int | None]] = [(d, run + i) for i, (d, _) in enumerate(stack[run:])]
    for dim in spatial:  # each spatial loop: a slot in the parallel block and one in the rest
        if all(d != dim for d, _ in lead):
            lead.append((dim, None))
        if all(d != dim for d, _ in rest):
            at = next((i for i, (d, _) in enumerate(rest) if d == LAMBDA), len(rest))
            rest.insert(at, (dim, None))
    missing = [(d, None) for d in reductions if all(e != d for e, _ in rest)]
    first = next((i for i, (d, _) in enumerate(rest) if d in space.reduction_dims), 0)
    rest[first:first] = missing
    if all(d != LAMBDA for d, _ in rest):  # the innermost level of the composition loop: after its last slot
        comp = space.roles["comp"]
        last = max((i for i, (d, _) in enumerate(rest) if d == comp), default=len(rest) - 1)
        rest.insert(last + 1, (LAMBDA, None))
    slots = lead + rest
    positions = [0] * len(stack)
    for position, (_, i) in enumerate(slots):
        if i is not None:
            positions[i] = position
    return tuple(d for d, _ in slots), positions


def _ranked_selections(space: MicrokernelSpace, anchor: Selection | None) -> list[Selection]:
    def fraction(s: Selection) -> float:
        return min(space.fractions.get(k) or 0.0 for k in _kernels(s))

    def intensity(s: Selection) -> float:
        mk = s.kernel
        h = mk.h if s.combo is None else max(s.combo[0], s.combo[2])
        return mk.vec * h * mk.w / (mk.vec + h * mk.w)

    order = sorted(space.selections, key=lambda s: (-round(fraction(s), 2), -intensity(s), s.combo is not None,
                                                    s.kernel.class_key, s.h_value))
    firsts, seconds, classes = [], [], set()
    for s in order:  # one per class of sizes first
        (seconds if s.kernel.class_key in classes else firsts).append(s)
        classes.add(s.kernel.class_key)
    ranked = firsts + seconds
    if anchor is not None:
        ranked = [anchor] + [s for s in ranked if s != anchor]
    return ranked


def _slots(template: Sequence[str], dim: str) -> int:
    return sum(1 for d in template if d == dim)


def _split_length(space: MicrokernelSpace, dim: str, template: Sequence[str]) -> int:
    """How many trip counts a split of ``dim`` gives: every slot for the reuse loop's dimension (the reuse loop
    takes the rest), else all slots but the last."""
    slots = _slots(template, dim)
    return slots if dim == space.roles["reuse"] else slots - 1


def _ranked_splits(space: MicrokernelSpace, dim: str, template: Sequence[str], selections: Sequence[Selection],
                   reference: Selection) -> list[tuple[int, ...]]:
    """Every split of ``dim`` that fits at least one selection, the favourite first (see the module docs)."""
    length = _split_length(space, dim, template)
    trips = sorted({space.quotients(s)[dim] for s in selections})
    candidates = set()
    for q in trips:
        for split in itertools.product(divisors(q), repeat=length):
            if q % math.prod(split) == 0:
                candidates.add(split)
    kind = _axis_kind(space, dim)
    if kind == "reduction":
        def key(split):
            p = math.prod(split)
            return (p != 1, abs(math.log2(p) - 2), p, split)
    elif kind == "other":
        def key(split):
            return (math.prod(split), split)
    else:
        half = math.log2(max(1, space.quotients(reference)[dim])) / 2

        def key(split):
            p = math.prod(split)
            return (round(abs(math.log2(p) - half), 6), -p, tuple(-t for t in split))
    return sorted(candidates, key=key)


def _values_of(space: MicrokernelSpace, stack: Sequence[tuple[str, int]], template: Sequence[str],
               positions: Sequence[int]) -> dict[str, Any]:
    """The anchor's split of every loop: its stack's trip counts in the template's slots."""
    filled = [1] * len(template)
    for (_, t), position in zip(stack, positions):
        filled[position] = t
    values: dict[str, Any] = {}
    for dim in _loops(space):
        split = tuple(t for d, t in zip(template, filled) if d == dim)
        values[dim] = split if dim == space.roles["reuse"] else split[:-1]
    return values


def _parallel_value(space: MicrokernelSpace, stack: Sequence[tuple[str, int]], p: int) -> str | int:
    for rule in PARALLEL_RULES:
        if _parallel(space, stack, rule) == p:
            return rule
    return int(p)


def _parallel(space: MicrokernelSpace, stack: Sequence[tuple[str, int]], rule: str | int) -> int | None:
    """The number of parallel loops ``rule`` gives ``stack`` (None: the rule gives none)."""
    run = space.parallel_run(stack)
    if isinstance(rule, int):
        return rule if rule <= run else None
    cores = max(1, space.target.num_cores)
    even = [p for p in range(1, run + 1) if math.prod(t for _, t in stack[:p]) % cores == 0]
    if not even:
        return None
    return even[-1] if rule == "all" and even[-1] == run else (even[0] if rule == "fewest" else None)


def _enumerate(space: MicrokernelSpace, selection: Selection, template: tuple[str, ...],
               axes: Mapping[str, Sequence]) -> list[Config]:
    """The configs of one selection in the sub-space (see the module docs), in a fixed order."""
    q = space.quotients(selection)
    reuse_dim, comp = space.roles["reuse"], space.roles["comp"]
    loops = _loops(space)
    choices: list[list[tuple[int, ...]]] = []
    for dim in loops:
        fits = [tuple(v) for v in axes[dim] if q[dim] % math.prod(v) == 0]
        choices.append(fits or [(1,) * _split_length(space, dim, template)])
    out: dict[Config, None] = {}
    for values in itertools.product(*choices):
        trips = dict(zip(loops, values))
        filled: list[tuple[str, int]] = []
        used = {d: 0 for d in loops}
        reuse = q[reuse_dim] // math.prod(trips[reuse_dim])
        for d in template:
            if d == LAMBDA:
                if selection.combo is not None:
                    filled.append((LAMBDA, 1))
                continue
            split = trips[d]
            k = used[d]
            used[d] += 1
            t = split[k] if k < len(split) else q[d] // math.prod(split)
            if t > 1:
                filled.append((d, t))
        if selection.combo is not None:
            at = next(i for i, (d, _) in enumerate(filled) if d == LAMBDA)
            if any(d == comp for d, _ in filled[at + 1:]):
                continue  # a y tile below the λ entry: not a config of the space
        ps = {_parallel(space, filled, rule) for rule in axes[PARALLEL_AXIS]} - {None}
        if not ps:  # no even split over the cores: the whole leading run in parallel
            ps = {space.parallel_run(filled)}
        for p in sorted(ps):
            config = space.make_config(selection, reuse, filled, p)
            if _valid_in_full(space, config):
                out[config] = None
    return list(out)


def _checked_bounds(bounds: Mapping[str, Any], space: MicrokernelSpace) -> dict[str, Any]:
    """``bounds`` as tuples, checked against ``space``'s loops (one-line errors)."""
    if not isinstance(bounds, Mapping) or not {"template", "selections", "axes"} <= set(bounds):
        raise SpaceError("bounds of a microkernel benchmark space hold 'template', 'selections' and 'axes'")
    loops = _loops(space)
    template = tuple(bounds["template"])
    bad = [d for d in template if d != LAMBDA and d not in loops]
    if bad or any(d not in template for d in loops) or template.count(LAMBDA) != 1:
        raise SpaceError(f"the template {list(template)} must name every loop of {loops} and λ once")
    axes = bounds["axes"]
    if not isinstance(axes, Mapping) or any(d not in axes for d in [*loops, PARALLEL_AXIS]):
        raise SpaceError(f"the bounds' axes must give splits of {loops} and the parallel rules")
    out_axes: dict[str, list] = {}
    for dim in loops:
        length = _split_length(space, dim, template)
        splits = [tuple(int(t) for t in v) for v in axes[dim]]
        if not splits or any(len(s) != length or min(s, default=1) < 1 for s in splits):
            raise SpaceError(f"each split of {dim!r} is {length} positive trip counts; got {axes[dim]!r}")
        out_axes[dim] = splits
    rules = list(axes[PARALLEL_AXIS])
    if not rules or any(not (r in PARALLEL_RULES or (isinstance(r, int) and r >= 0)) for r in rules):
        raise SpaceError(f"parallel choices are {PARALLEL_RULES} or a number of loops; got {rules!r}")
    out_axes[PARALLEL_AXIS] = rules
    selections = [(tuple(int(x) for x in k), tuple(int(x) for x in h)) for k, h in bounds["selections"]]
    if not selections:
        raise SpaceError("the bounds keep no selection")
    return {"template": template, "selections": selections, "axes": out_axes}


def _check_conv2d(workload: Workload) -> None:
    if not isinstance(workload, Conv2d):
        raise SpaceError(f"the microkernel benchmark space is defined for conv2d layers, not "
                         f"{getattr(workload, 'op', type(workload).__name__)} ({getattr(workload, 'label', workload)})")


def _kernels(selection: Selection) -> tuple[Microkernel, ...]:
    """The microkernels a selection calls: one, or the two of a combination."""
    mk = selection.kernel
    return (mk,) if selection.combo is None else (mk, mk.with_h(selection.combo[2]))


def _valid_in_full(space: MicrokernelSpace, config: Config) -> bool:
    """Whether the full space's rules accept ``config`` (whatever bounds ``space`` has)."""
    try:
        MicrokernelSpace.check(space, config)
    except SpaceError:
        return False
    return True


def _subset(catalogue: Catalogue, microkernels, fractions: Mapping[Microkernel, float | None]) -> Catalogue:
    """``catalogue`` with only the entries of ``microkernels`` (what a benchmark space keeps and a landscape
    carries). A microkernel without an entry (the space's 1-vector fallback) is entered at its fraction."""
    wanted = set(microkernels)
    entries = [e for e in catalogue.entries if e.microkernel in wanted]
    for mk in sorted(wanted - {e.microkernel for e in entries}):
        fraction = fractions.get(mk)
        entries.append(CatalogueEntry(mk, "ok", fraction * catalogue.peak_gflops if fraction is not None else None))
    return dataclasses.replace(catalogue, entries=tuple(sorted(entries, key=lambda e: e.microkernel.key)))


def _json(bounds: Mapping[str, Any]) -> dict[str, Any]:
    """Bounds as JSON gives them back (lists, not tuples)."""
    return {"template": list(bounds["template"]),
            "selections": [[list(k), list(h)] for k, h in bounds["selections"]],
            "axes": {a: [v if isinstance(v, (str, int)) else list(v) for v in vs] for a, vs in bounds["axes"].items()}}
