"""How well a landscape stands for the space a user tunes: its difficulty profile against a full-space sample's.

A landscape is a bounded sub-space of a layer's tiles space, measured exhaustively. Agents compared
on it are only as informative as the landscape is hard in the way the whole space is. The
*difficulty profile* says how hard: random search's expected best after ``N`` uniform draws, as a
share of the best known kernel (:func:`random_search_profile`, exact, through
:func:`~tensorgym.baselines.methodology.expected_best`). A full-space sample (``tensorgym landscape sample``:
configs drawn uniformly from the whole space, measured live) gives the whole space's profile; the
landscape's own profile is taken against its optimum. :func:`landscape_fidelity` puts them side by
side: a landscape is representative where the two agree within :data:`TOLERANCE` at each ``N``.

Random search's profile is necessary, not sufficient: a guided search (the GA, DGD) walks the space's
neighbourhoods, and a landscape's can differ from the whole space's. :func:`search_fidelity` puts an
agent's own progress on the landscape beside its progress in live runs.

The sample's share is taken against the best known kernel (the best of the sample and the
landscape, whose anchor is a strong search's best in the whole space), so that a sample that never
drew a good kernel reads as hard, as the whole space is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .methodology import expected_best
from tensorgym.landscape import Landscape, LandscapeError

DRAWS = (16, 64, 256)
TOLERANCE = 0.05  # largest gap between the profiles at which a landscape counts as representative


def random_search_profile(scores: Sequence[float], reference: float, draws: Sequence[int] = DRAWS) -> list[float]:
    """Random search's expected best of each of ``draws`` uniform draws (with replacement) from ``scores``
    (GFLOP/s, failed kernels 0), as a share of ``reference``."""
    if reference <= 0:
        raise ValueError(f"the reference must be positive, got {reference}")
    return [float(v) / reference for v in expected_best(np.asarray(scores, dtype=float), list(draws))]


@dataclass(frozen=True)
class LandscapeFidelity:
    """A landscape's profile beside its full-space sample's (shares at :data:`DRAWS`)."""

    draws: tuple[int, ...]
    landscape: list[float]
    sample: list[float]
    landscape_optimum: float
    sample_best: float
    best_known: float
    near_optimal_landscape: float  # share of the landscape's configs within 5 % of its optimum
    near_optimal_sample: float  # share of the sample's configs within 5 % of the best known

    @property
    def gap(self) -> float:
        """The largest gap between the two profiles."""
        return max(abs(a - b) for a, b in zip(self.landscape, self.sample))

    @property
    def representative(self) -> bool:
        return self.gap <= TOLERANCE


def landscape_fidelity(landscape: Landscape, sample: Landscape, draws: Sequence[int] = DRAWS) -> LandscapeFidelity:
    """The fidelity of ``landscape`` against ``sample``, a full-space sample of the same layer and CPU.

    A partial landscape (``landscape export --partial`` while its measurement runs) is rated as an estimate of the
    whole one: a landscape is measured in a seeded shuffle of its configs, so the part measured is a uniform
    sample of its space, and its profile estimates the space's before the rest is measured. Its optimum is then
    the best of what is measured and of the search that anchored it (whose best config the space holds)."""
    if sample.workload_key != landscape.workload_key or sample.cpu_folder != landscape.cpu_folder:
        raise LandscapeError(f"{sample!r} is not a sample of {landscape!r}'s layer on its CPU")
    land = np.asarray(landscape.scores, dtype=float)
    drawn = np.asarray(sample.scores, dtype=float)
    optimum = float(land.max())
    if not landscape.complete:
        optimum = max(optimum, float((landscape.metadata.notes or {}).get("anchor_gflops") or 0.0))
    best = max(optimum, float(drawn.max()))
    return LandscapeFidelity(
        draws=tuple(draws), landscape=random_search_profile(land, optimum, draws),
        sample=random_search_profile(drawn, best, draws), landscape_optimum=optimum, sample_best=float(drawn.max()),
        best_known=best, near_optimal_landscape=float(np.mean(land >= 0.95 * optimum)),
        near_optimal_sample=float(np.mean(drawn >= 0.95 * best)))


@dataclass(frozen=True)
class ThinningStep:
    """One value a coordinate gave up, and the landscape it left."""

    label: str
    value: int
    configs: int
    gap: float


def thinned_bounds(landscape: Landscape, sample: Landscape, draws: Sequence[int] = DRAWS,
                   tolerance: float = TOLERANCE) -> tuple[dict[str, list[int]], list[ThinningStep]]:
    """The bounds that bring a tiles landscape's difficulty profile within ``tolerance`` of its full-space
    sample's, by dropping values from its coordinates, and the steps taken (none when it is within already).

    A landscape kept around a strong search's best holds good kernels more often than the whole space does.
    Each step drops the one value (of a coordinate keeping three or more; never the optimum's) whose removal
    leaves the profile closest to the sample's, or, where no one value's removal brings it within ``tolerance``,
    the two values whose removal does best, until it is within ``tolerance`` or no drop brings it closer. Two at
    once, because a landscape can be too easy at many draws and too hard at few (ResNet-18 C7): dropping a good
    value alone then widens the few draws' gap, dropping a bad value alone the many draws', and only both
    together close the two. The sub-space is measured already (a sub-space of a landscape), and
    its optimum is the landscape's, so the sample's profile, taken against the best known, does not move.
    """
    if landscape.space_name != "tiles" or not landscape.metadata.space_options.get("bounds"):
        raise LandscapeError(f"{landscape!r} is not of a bounded tiles space: only such a landscape is thinned")
    if not landscape.complete:
        raise LandscapeError(f"{landscape!r} is partial ({len(landscape)} of {landscape.metadata.configs_in_space} "
                             f"configs): thinning fits the whole landscape, so measure the rest first")
    fidelity = landscape_fidelity(landscape, sample, draws)
    target = np.asarray(fidelity.sample)
    scores = np.asarray(landscape.scores, dtype=float)
    optimum = landscape.configs[int(np.argmax(scores))]
    coordinates = landscape.space().coordinates
    values = {c.label: np.array([c.value_of(config) for config in landscape.configs]) for c in coordinates}
    kept = {c.label: list(c.choices) for c in coordinates}
    keep = np.ones(len(scores), dtype=bool)

    def gap(mask: np.ndarray) -> float:
        return float(np.max(np.abs(np.asarray(random_search_profile(scores[mask], fidelity.landscape_optimum, draws))
                                   - target)))

    def without(drops: tuple[tuple[str, int], ...]) -> np.ndarray:
        mask = keep.copy()
        for label, value in drops:
            mask &= values[label] != value
        return mask

    steps: list[ThinningStep] = []
    current = fidelity.gap
    while current > tolerance:
        singles = [(c.label, v) for c in coordinates if len(kept[c.label]) > 2
                   for v in kept[c.label] if v != c.value_of(optimum)]
        options = [(gap(without((one,))), 1, (one,)) for one in singles]
        if options and min(options)[0] > tolerance:
            options += [(gap(without(pair)), 2, pair) for i, a in enumerate(singles) for pair in
                        ((a, b) for b in singles[i + 1:] if a[0] != b[0] or len(kept[a[0]]) > 3)]
        if not options:
            break
        best, _, drops = min(options)
        if best >= current:
            break
        for label, value in drops:
            keep &= values[label] != value
            kept[label].remove(value)
            steps.append(ThinningStep(label, int(value), int(keep.sum()), gap(keep)))
        current = best
    return kept, steps


NEAR_OPTIMAL = 0.95  # a seed "found the optimum" when its best is within 5 % of the reference


@dataclass(frozen=True)
class SearchFidelity:
    """One agent's progress on a landscape beside its progress live in the whole space.

    Matching random search's profile does not make a landscape faithful for a guided search: its
    neighbourhoods can differ from the whole space's. This compares the agent itself. Live bests are
    taken as shares of the best known kernel, landscape bests as shares of the landscape's optimum
    (as :func:`landscape_fidelity` takes random search's).
    """

    agent: str
    trials: tuple[int, ...]
    live: list[float]  # mean best over seeds at each trial count, as a share of the best known
    landscape: list[float]  # the same on the landscape, as a share of its optimum
    live_found: tuple[int, int]  # (seeds within 5 % of the best known at the last trial count, seeds)
    landscape_found: tuple[int, int]

    @property
    def gap(self) -> float:
        """The largest gap between the two progress profiles."""
        return max(abs(a - b) for a, b in zip(self.live, self.landscape))

    @property
    def faithful(self) -> bool:
        return self.gap <= TOLERANCE


def search_fidelity(agent: str, live: dict[int, Sequence[float]], landscape: dict[int, Sequence[float]],
                    best_known: float, landscape_optimum: float) -> SearchFidelity:
    """Compare an agent's per-seed bests (trials -> GFLOP/s per seed) live and on a landscape.

    ``best_known`` is the whole space's best known kernel (at least every live best); ``landscape_optimum``
    the landscape's. Both profiles are read at the trial counts they share.
    """
    trials = tuple(sorted(set(live) & set(landscape)))
    if not trials:
        raise ValueError(f"{agent}: no trial count has both live and landscape bests")
    if best_known <= 0 or landscape_optimum <= 0:
        raise ValueError(f"the references must be positive, got {best_known} and {landscape_optimum}")
    live_means = [float(np.mean(live[n])) / best_known for n in trials]
    land_means = [float(np.mean(landscape[n])) / landscape_optimum for n in trials]
    last = trials[-1]
    live_last, land_last = np.asarray(live[last], float), np.asarray(landscape[last], float)
    return SearchFidelity(
        agent=agent, trials=trials, live=live_means, landscape=land_means,
        live_found=(int(np.sum(live_last >= NEAR_OPTIMAL * best_known)), len(live_last)),
        landscape_found=(int(np.sum(land_last >= NEAR_OPTIMAL * landscape_optimum)), len(land_last)))
