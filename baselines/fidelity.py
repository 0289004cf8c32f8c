"""How well a landscape stands for the space a user tunes: its difficulty profile against a full-space sample's.

A landscape is a bounded sub-space of a layer's tiles space, measured exhaustively. Agents compared
on it are only as informative as the landscape is hard in the way the whole space is. The
*difficulty profile* says how hard: random search's expected best after ``N`` uniform draws, as a
share of the best known kernel (:func:`random_search_profile`, exact, through
:func:`~tensorgym.baselines.methodology.expected_best`). A full-space sample (``tensorgym landscape sample``:
configs drawn uniformly from the whole space, measured live) gives the whole space's profile; the
landscape's own profile is taken against its optimum. :func:`landscape_fidelity` puts them side by
side: a landscape is representative where the two agree within :data:`TOLERANCE` at each ``N``.

The sample's share is taken against the best known kernel (the best of the sample and the
landscape, whose anchor is a strong search's best in the whole space), so that a sample that never
drew a good kernel reads as hard, as the whole space is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .methodology import expected_best
from tensorgym.landscape import Landscape

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
    """The fidelity of ``landscape`` against ``sample``, a full-space sample of the same layer and CPU."""
    if sample.workload_key != landscape.workload_key or sample.cpu_folder != landscape.cpu_folder:
        raise ValueError(f"{sample!r} is not a sample of {landscape!r}'s layer on its CPU")
    land = np.asarray(landscape.scores, dtype=float)
    drawn = np.asarray(sample.scores, dtype=float)
    optimum = float(land.max())
    best = max(optimum, float(drawn.max()))
    return LandscapeFidelity(
        draws=tuple(draws), landscape=random_search_profile(land, optimum, draws),
        sample=random_search_profile(drawn, best, draws), landscape_optimum=optimum, sample_best=float(drawn.max()),
        best_known=best, near_optimal_landscape=float(np.mean(land >= 0.95 * optimum)),
        near_optimal_sample=float(np.mean(drawn >= 0.95 * best)))
