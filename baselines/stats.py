"""Statistics over seeds: confidence intervals of a mean, and whether one agent beats another.

Tuning runs are few (3-5 seeds) and their best values are skewed, so every
helper here is small-sample and says what it assumes:

* :func:`mean_ci`: Student's t interval of the mean (assumes roughly normal
  per-seed values; with 5 seeds the interval is wide, as it should be);
* :func:`welch`: Welch's t-test of two means (unequal variances), two-sided;
* :func:`mann_whitney`: the exact Mann-Whitney U test, two-sided, which
  assumes nothing about the distribution (with 5 vs 5 runs its smallest
  possible p-value is 0.008, so it can reject at 0.05);
* :func:`ratio_ci`: a percentile-bootstrap interval of the ratio of two
  means (seeded, so a report is reproducible);
* :func:`compare_runs`: all of the above for agent A against agent B;
* :func:`paired_difference`: A against B run for run, where the two share
  each seed's random numbers (an agent and its ablation draw the same
  initial sample): the mean of the per-seed differences with its t interval,
  the seeds each side won, and Wilcoxon's signed-rank test. Pairing removes
  what the seeds share, so it resolves a difference that separate intervals
  hide.

A test that cannot be computed (fewer than 2 values on a side, or no
variance at all) gives ``None``, never a made-up number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CONFIDENCE = 0.95
ALPHA = 0.05


def _values(values: Sequence[float | None]) -> np.ndarray:
    return np.array([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)


def mean_ci(values: Sequence[float | None], confidence: float = CONFIDENCE) -> tuple[float | None, float | None,
                                                                                       float | None]:
    """(mean, low, high): Student's t interval of the mean (low/high None with fewer than 2 values)."""
    from scipy.stats import t

    x = _values(values)
    if len(x) == 0:
        return None, None, None
    mean = float(x.mean())
    if len(x) < 2:
        return mean, None, None
    half = float(t.ppf(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return mean, mean - half, mean + half


def intervals_overlap(a: tuple[float | None, float | None], b: tuple[float | None, float | None]) -> bool | None:
    """Whether two (low, high) intervals overlap (None if either is unknown)."""
    if None in a or None in b:
        return None
    return not (a[1] < b[0] or b[1] < a[0])  # type: ignore[operator]


def welch(a: Sequence[float | None], b: Sequence[float | None]) -> float | None:
    """Two-sided p-value of Welch's t-test that the means of ``a`` and ``b`` differ."""
    from scipy.stats import ttest_ind

    x, y = _values(a), _values(b)
    if len(x) < 2 or len(y) < 2 or (x.std() == 0 and y.std() == 0):
        return None
    p = ttest_ind(x, y, equal_var=False).pvalue
    return float(p) if math.isfinite(p) else None


def mann_whitney(a: Sequence[float | None], b: Sequence[float | None]) -> float | None:
    """Two-sided p-value of the Mann-Whitney U test (exact for small samples without ties)."""
    from scipy.stats import mannwhitneyu

    x, y = _values(a), _values(b)
    if len(x) < 2 or len(y) < 2:
        return None
    p = mannwhitneyu(x, y, alternative="two-sided").pvalue
    return float(p) if math.isfinite(p) else None


def ratio_ci(a: Sequence[float | None], b: Sequence[float | None], confidence: float = CONFIDENCE,
             resamples: int = 10_000, seed: int = 0) -> tuple[float | None, float | None, float | None]:
    """(mean(a) / mean(b), low, high): a percentile bootstrap of the ratio of means, runs resampled per side."""
    x, y = _values(a), _values(b)
    if len(x) == 0 or len(y) == 0 or y.mean() <= 0:
        return None, None, None
    ratio = float(x.mean() / y.mean())
    if len(x) < 2 or len(y) < 2:
        return ratio, None, None
    rng = np.random.default_rng(seed)
    xs = x[rng.integers(len(x), size=(resamples, len(x)))].mean(axis=1)
    ys = y[rng.integers(len(y), size=(resamples, len(y)))].mean(axis=1)
    ok = ys > 0
    ratios = xs[ok] / ys[ok]
    low, high = np.quantile(ratios, [0.5 - confidence / 2, 0.5 + confidence / 2])
    return ratio, float(low), float(high)


def geomean(values: Sequence[float | None]) -> float | None:
    """Geometric mean of the positive values (None if there are none)."""
    x = _values(values)
    x = x[x > 0]
    return float(np.exp(np.log(x).mean())) if len(x) else None


@dataclass(frozen=True)
class Comparison:
    """Agent A's per-seed values against agent B's."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    mean_a: float | None
    mean_b: float | None
    ci_a: tuple[float | None, float | None]
    ci_b: tuple[float | None, float | None]
    ratio: float | None
    ratio_ci: tuple[float | None, float | None]
    p_welch: float | None
    p_mann_whitney: float | None

    @property
    def separated(self) -> bool | None:
        """A's and B's 95 % intervals do not overlap (None if unknown)."""
        overlap = intervals_overlap(self.ci_a, self.ci_b)
        return None if overlap is None else not overlap

    @property
    def a_better(self) -> bool | None:
        """A's mean is higher, its interval lies above B's, and Welch's test rejects equal means at 0.05."""
        if self.mean_a is None or self.mean_b is None or self.separated is None or self.p_welch is None:
            return None
        return self.mean_a > self.mean_b and self.separated and self.p_welch < ALPHA

    def to_json(self) -> dict[str, Any]:
        return {"a": list(self.a), "b": list(self.b), "mean_a": self.mean_a, "mean_b": self.mean_b,
                "ci_a": list(self.ci_a), "ci_b": list(self.ci_b), "ratio": self.ratio, "ratio_ci": list(self.ratio_ci),
                "p_welch": self.p_welch, "p_mann_whitney": self.p_mann_whitney, "separated": self.separated,
                "a_better": self.a_better}


def compare_runs(a: Sequence[float | None], b: Sequence[float | None], seed: int = 0) -> Comparison:
    """Means, 95 % intervals, the ratio of means (bootstrap interval) and both tests, A against B."""
    mean_a, *ci_a = mean_ci(a)
    mean_b, *ci_b = mean_ci(b)
    ratio, *r_ci = ratio_ci(a, b, seed=seed)
    return Comparison(tuple(_values(a).tolist()), tuple(_values(b).tolist()), mean_a, mean_b,
                      (ci_a[0], ci_a[1]), (ci_b[0], ci_b[1]), ratio, (r_ci[0], r_ci[1]), welch(a, b),
                      mann_whitney(a, b))


@dataclass(frozen=True)
class PairedDifference:
    """A - B, seed by seed."""

    n: int
    mean: float | None
    ci: tuple[float | None, float | None]
    wins: int
    losses: int
    p_wilcoxon: float | None

    @property
    def above(self) -> bool | None:
        """A is above B: the 95 % interval of the mean difference lies above 0 (None if unknown)."""
        return None if self.ci[0] is None else self.ci[0] > 0

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "mean": self.mean, "ci": list(self.ci), "wins": self.wins, "losses": self.losses,
                "p_wilcoxon": self.p_wilcoxon, "above": self.above}


def p_text(value: float | None) -> str:
    """A p-value as a table shows it: three decimals, ``<0.001`` below that, ``-`` when unknown."""
    return "-" if value is None else (f"{value:.3f}" if value >= 0.001 else "<0.001")


def paired_text(diff: dict[str, Any] | None) -> str:
    """A :class:`PairedDifference` (its JSON) in one cell: ``+0.05 [+0.01, +0.09] 27/40 p 0.031``."""
    if not diff or diff["mean"] is None:
        return "-"
    low, high = diff["ci"]
    interval = f" [{low:+.2f}, {high:+.2f}]" if low is not None else ""
    return f"{diff['mean']:+.2f}{interval} {diff['wins']}/{diff['n']} p {p_text(diff['p_wilcoxon'])}"


def paired_by_seed(mine: Mapping[int, float | None], theirs: Mapping[int, float | None]) -> PairedDifference:
    """:func:`paired_difference` of two agents' per-seed values (seed -> value), over the seeds both ran."""
    seeds = [seed for seed in mine if seed in theirs]
    return paired_difference([mine[s] for s in seeds], [theirs[s] for s in seeds])


def paired_difference(a: Sequence[float | None], b: Sequence[float | None]) -> PairedDifference:
    """A - B over pairs (``a[i]`` with ``b[i]``; a pair with a missing side is dropped): the mean difference with
    its t interval, wins and losses, and the two-sided p-value of Wilcoxon's signed-rank test."""
    from scipy.stats import wilcoxon

    if len(a) != len(b):
        raise ValueError(f"paired values need as many on each side, got {len(a)} and {len(b)}")
    diffs = [float(x) - float(y) for x, y in zip(a, b) if x is not None and y is not None
             and math.isfinite(x) and math.isfinite(y)]
    mean, low, high = mean_ci(diffs)
    p = None
    if len(diffs) >= 2 and any(d != 0 for d in diffs):
        value = wilcoxon(diffs).pvalue
        p = float(value) if math.isfinite(value) else None
    return PairedDifference(len(diffs), mean, (low, high), sum(d > 0 for d in diffs), sum(d < 0 for d in diffs), p)
