"""The methodology score: a search's best-so-far curve against random search (0) and the best known result (1).

The score of *A Methodology for Comparing Auto-Tuning Optimization Algorithms*
(Willemsen, van Nieuwpoort, van Werkhoven, Future Generation Computer Systems,
2024), whose authors' ``autotuning-methodology`` package computes it, for a
maximised objective (GFLOP/s). Over an x axis of function evaluations or of
seconds:

* ``C(x)``, the strategy's curve: the **mean** over its runs of the best-so-far;
* ``B(x)``, the random-search baseline: the best random search is expected to
  have reached by ``x`` (its exact expectation);
* ``O``, the optimum;
* ``P(x) = (C(x) - B(x)) / (O - B(x))``, the standardised curve: 0 is random
  search, 1 the optimum, below 0 worse than random;
* the **score** is the mean of ``P`` over a uniform grid of the x range: the area
  under ``P`` divided by the range's length.

``P`` is linear in ``C``, so with the mean curve and the exact expectation as
baseline, random search's own score is 0 in expectation, whatever the shape of
the space's values. A median curve does not have that property: the best of
``M`` random draws is skewed (most runs end near the top, a few lag far below),
so its median sits above its mean. With the median curve (and the value at the
expected rank as baseline), random search scored +0.37 on the shipped R5
landscape and +0.18 on M3 (20 seeds of 512 trials), and every agent was lifted
alike; found by the cross-check with the package
(``bench/bench_methodology_crosscheck.py``), which has the same mismatch over
evaluations (it takes the median rank) and avoids it over time (it fits the
mean rank).

The package needs a brute-forced search space: its optimum is the true one, and
its baseline is the value at the expected rank of the best of ``M`` draws
without replacement from the whole space (the paper's eq. 6). tensorgym's spaces
are far too large to enumerate, so (:func:`score_runs`):

* ``O`` is the best result any run of the comparison found (the best *known*;
  scores read higher than against the true optimum);
* the space is represented by the random agent's own trials, a uniform sample of
  it, failed kernels counting 0 GFLOP/s; ``B(M)`` is the exact expected best of
  ``M`` draws *with* replacement from that sample,
  ``sum_k v_(k) ((k/N)^M - ((k-1)/N)^M)`` over the sorted values ``v_(1..N)``
  (:func:`expected_best`), the right model for a sample of a huge space, and
  defined for fractional ``M``;
* the x range is the comparison's own budget, 1..n trials, and over time
  ``tpf .. n * tpf`` seconds of tuning clock, ``tpf`` being the random agent's
  mean seconds per trial; at ``t`` seconds random search has finished
  ``floor(t / tpf)`` draws: ``B(t) = expected_best(floor(t / tpf))`` (:func:`draws_by`;
  with ``t / tpf`` draws, a fraction of a draw ahead, random search itself scored
  below 0 over time).

On a *landscape* (an exhaustively measured benchmark space, :mod:`tensorgym.landscape`)
the space is known whole, and :func:`exhaustive_reference` scores against it: ``O`` is
the true optimum, the population is every config of the space (failed: 0), ``tpf`` is
the space's mean seconds per trial, and ``B(M)`` is the exact expected best of ``M``
draws *without* replacement, ``sum_k v_(k) C(k-1, M-1) / C(N, M)``
(:func:`expected_best_without_replacement`; linear between whole ``M``). The package
instead takes the value at the expected rank of that best, ``M (N + 1) / (M + 1)``
(:func:`value_at_expected_rank`), which is the expectation only where the values are
evenly spaced, and it reads that 1-based rank as a 0-based index (one rank too good).
``bench/reports/landscapes/methodology_crosscheck.txt`` sets both scores side by side on
the shipped landscapes and accounts for every difference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tensorgym.tuner import TuningResult

TIME_GRID_POINTS = 256  # points of the uniform time grid (the package's default is 1000; the curves are step functions)


def _values_and_draws(values: Sequence[float], draws: Sequence[float] | np.ndarray, name: str
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``values`` sorted (non-empty, finite) and ``draws`` as an array (each at least 1), or a ValueError naming
    ``name``."""
    v = np.sort(np.asarray(values, dtype=float))
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"{name} needs a non-empty sample of finite values")
    m = np.asarray(draws, dtype=float)
    if np.any(m < 1):
        raise ValueError(f"the number of draws must be at least 1, got {m.min()}")
    return v, m


def expected_best(values: Sequence[float], draws: Sequence[float] | np.ndarray) -> np.ndarray:
    """The expected best of ``draws`` (each >= 1, fractional allowed) uniform draws with replacement from ``values``."""
    v, m = _values_and_draws(values, draws, "expected_best")
    k = np.arange(1, v.size + 1, dtype=float) / v.size
    # P(the best of M draws is the k-th smallest) = (k/N)^M - ((k-1)/N)^M
    weights = k[None, :] ** m.reshape(-1, 1) - (k - 1.0 / v.size)[None, :] ** m.reshape(-1, 1)
    return (weights @ v).reshape(m.shape)


def expected_best_without_replacement(values: Sequence[float], draws: Sequence[float] | np.ndarray) -> np.ndarray:
    """The exact expected best of ``draws`` draws (each >= 1; fractional: linear between whole numbers) without
    replacement from the whole population ``values``; more draws than values give its best.

    The best of ``M`` draws is the ``k``-th smallest ``v_(k)`` with probability ``C(k-1, M-1) / C(N, M)``.
    """
    v = np.sort(np.asarray(values, dtype=float))
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError("expected_best_without_replacement needs a non-empty population of finite values")
    m = np.minimum(np.asarray(draws, dtype=float), v.size)
    if np.any(m < 1):
        raise ValueError(f"the number of draws must be at least 1, got {m.min()}")
    n = v.size
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=float)))])
    whole = np.unique(np.concatenate([np.floor(m).ravel(), np.ceil(m).ravel()])).astype(np.int64)
    k = np.arange(1, n + 1)
    best = {}
    for draw in whole.tolist():
        rows = k[draw - 1:]  # the best of `draw` draws is at least the draw-th smallest
        # log C(k-1, M-1) - log C(N, M)
        log_p = (log_factorial[rows - 1] - log_factorial[draw - 1] - log_factorial[rows - draw]
                 - (log_factorial[n] - log_factorial[draw] - log_factorial[n - draw]))
        p = np.exp(log_p)
        best[draw] = float(p @ v[draw - 1:] / p.sum())
    low, high = np.floor(m), np.ceil(m)
    at_low = np.vectorize(best.__getitem__, otypes=[float])(low.astype(np.int64))
    at_high = np.vectorize(best.__getitem__, otypes=[float])(high.astype(np.int64))
    return at_low + (m - low) * (at_high - at_low)


def value_at_expected_rank(values: Sequence[float], draws: Sequence[float] | np.ndarray) -> np.ndarray:
    """The value at the expected rank of the best of ``draws`` draws without replacement from the population
    ``values``: rank ``M (N + 1) / (M + 1)`` from the worst (1-based), interpolated between ranks.

    The paper's eq. 6 and the ``autotuning-methodology`` package's baseline, except that the package rounds the
    rank and reads it as a 0-based index (the next value up). It is the expected best only where the values are
    evenly spaced; :func:`expected_best_without_replacement` is the expectation itself.
    """
    v, m = _values_and_draws(values, draws, "value_at_expected_rank")
    rank = np.minimum(m * (v.size + 1) / (m + 1), v.size)  # 1-based, worst first
    return np.interp(rank - 1.0, np.arange(v.size, dtype=float), v)


def mean_curve(curves: Sequence[Sequence[float]]) -> np.ndarray:
    """The point-by-point mean of several runs' curves on one grid (the score's ``C``)."""
    return np.mean(np.asarray(curves, dtype=float), axis=0)


def median_curve(curves: Sequence[Sequence[float]]) -> np.ndarray:
    """The point-by-point median of several runs' curves on one grid (not the score's: see the module docs)."""
    return np.median(np.asarray(curves, dtype=float), axis=0)


def standardise(curve: Sequence[float], baseline: Sequence[float], optimum: float) -> np.ndarray:
    """``P = (C - B) / (O - B)``: 0 where the curve is the baseline, 1 where it is the optimum."""
    baseline = np.asarray(baseline, dtype=float)
    gap = optimum - baseline
    if np.any(gap <= 0):
        raise ValueError("the baseline reaches the optimum: the standardised curve is undefined")
    return (np.asarray(curve, dtype=float) - baseline) / gap


def score(curve: Sequence[float], baseline: Sequence[float], optimum: float) -> float:
    """The methodology score: the mean over a uniform grid of the standardised curve."""
    return float(np.mean(standardise(curve, baseline, optimum)))


@dataclass(frozen=True)
class Scores:
    """An agent's methodology scores on one env (None: not defined, e.g. no random runs to compare with)."""

    trials: float | None
    time: float | None


@dataclass(frozen=True)
class Reference:
    """What an env's runs are scored against: the random sample, its seconds per trial, the best known, the range."""

    sample: np.ndarray  # GFLOP/s of the random agent's trials, or of every config of a landscape (failed: 0)
    seconds_per_trial: float
    optimum: float
    trials: int  # the x range over trials is 1..trials
    exhaustive: bool = False  # the sample is the whole space (a landscape): draws are without replacement

    def _expected_best(self, draws: np.ndarray) -> np.ndarray:
        if self.exhaustive:
            return expected_best_without_replacement(self.sample, draws)
        return expected_best(self.sample, draws)

    def baseline_trials(self) -> np.ndarray:
        return self._expected_best(np.arange(1, self.trials + 1))

    def time_grid(self) -> np.ndarray:
        return np.linspace(self.seconds_per_trial, self.trials * self.seconds_per_trial, TIME_GRID_POINTS)

    def baseline_time(self) -> np.ndarray:
        return self._expected_best(draws_by(self.time_grid(), self.seconds_per_trial))


def draws_by(seconds: Sequence[float] | np.ndarray, seconds_per_trial: float) -> np.ndarray:
    """The draws random search has finished after ``seconds`` of tuning clock at ``seconds_per_trial`` each:
    ``floor(t / tpf)`` (at least 1), as a tuner's trial counts once its result is in."""
    return np.maximum(np.floor(np.asarray(seconds, dtype=float) / seconds_per_trial + 1e-9), 1.0)


def exhaustive_reference(values: Sequence[float], seconds_per_trial: float, trials: int) -> Reference | None:
    """The reference of runs on a landscape: every config's GFLOP/s (failed: 0), the space's mean seconds per
    trial, the true optimum (see the module docs); None when a score is not defined (nothing ran, or one
    random draw is already expected to be the optimum)."""
    sample = np.asarray(values, dtype=float)
    if sample.size == 0 or seconds_per_trial <= 0 or trials < 1:
        return None
    optimum = float(sample.max())
    if optimum <= 0 or not expected_best_without_replacement(sample, [1])[0] < optimum:
        return None
    return Reference(sample, float(seconds_per_trial), optimum, int(trials), exhaustive=True)


def best_known(runs: Mapping[str, Sequence[TuningResult]]) -> float:
    """The best GFLOP/s any run's timeline reached (``agent -> results``): the score's optimum."""
    return max((t.best_gflops for results in runs.values() for r in results for t in r.trials), default=0.0)


def reference(runs: Mapping[str, Sequence[TuningResult]], budget: int | None, random_agent: str = "random"
              ) -> Reference | None:
    """The reference of one env's runs (``agent -> results``), or None when a score is not defined.

    Undefined when there is no run of ``random_agent``, when nothing ran correctly, or
    when random search's first draw is already expected to be the best known.
    """
    random_runs = [r for r in runs.get(random_agent, []) if r.trials]
    if not random_runs:
        return None
    sample = np.array([t.gflops if t.status == "ok" and t.gflops else 0.0 for r in random_runs for t in r.trials])
    optimum = best_known(runs)
    trials = budget if budget is not None else min(len(r.trials) for r in random_runs)
    seconds = sum(r.trials[-1].elapsed_s for r in random_runs) / sum(len(r.trials) for r in random_runs)
    if optimum <= 0 or seconds <= 0 or not expected_best(sample, [1])[0] < optimum:
        return None
    return Reference(sample, seconds, optimum, trials)


def score_runs(results: Sequence[TuningResult], ref: Reference | None) -> Scores:
    """One agent's scores over trials and over time against ``ref`` (its runs' mean curves)."""
    runs = [r for r in results if r.trials]
    if ref is None or not runs:
        return Scores(None, None)
    xs = range(1, ref.trials + 1)
    by_trials = mean_curve([[r.best_at(trials=m) for m in xs] for r in runs])
    by_time = mean_curve([[r.best_at(seconds=float(t)) for t in ref.time_grid()] for r in runs])
    return Scores(score(by_trials, ref.baseline_trials(), ref.optimum),
                  score(by_time, ref.baseline_time(), ref.optimum))


def seed_scores(results: Sequence[TuningResult], ref: Reference | None) -> list[float | None]:
    """Each run's own score over trials against ``ref``, in the runs' order (None for a run that made no trial, so
    the scores stay aligned with the runs' seeds; empty when the score is not defined).

    ``P`` is linear in the curve, so their mean is :func:`score_runs`' score of the mean curve exactly, and their
    spread over seeds gives that score a confidence interval (:func:`.stats.mean_ci`, which skips the Nones).
    """
    if ref is None or not any(r.trials for r in results):
        return []
    baseline = ref.baseline_trials()
    return [score([r.best_at(trials=m) for m in range(1, ref.trials + 1)], baseline, ref.optimum) if r.trials
            else None for r in results]


def area_under_curve(result: TuningResult, trials: int, optimum: float) -> float | None:
    """The area under one run's best-so-far curve over 1..``trials``, as a fraction of ``optimum``'s.

    1 means the best known from the first trial on; the run's last best stands
    for trials it did not make.
    """
    if not result.trials or optimum <= 0 or trials < 1:
        return None
    area = sum(result.best_at(trials=m) for m in range(1, trials + 1))
    value = area / (trials * optimum)
    return value if math.isfinite(value) else None
