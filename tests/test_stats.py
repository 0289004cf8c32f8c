"""Statistics over seeds on hand-made data: intervals, tests, the ratio interval, and the board's CI column."""

from __future__ import annotations

import math

import pytest

from tensorgym.baselines.board import Leaderboard, Stat
from tensorgym.tuner import Trial, TuningResult
from tensorgym.baselines.render import text_table
from tensorgym.baselines.stats import (
    compare_runs, geomean, intervals_overlap, mann_whitney, mean_ci, paired_difference, ratio_ci, welch,
)


def _timeline(gflops, seed=0):
    trials, best = [], 0.0
    for i, g in enumerate(gflops):
        best = max(best, g)
        trials.append(Trial(i + 1, float(i + 1), None, "ok", g, best, True))
    return TuningResult("a", "w", "w", "tiles", "t", seed, len(gflops), None, trials, None, best)


def test_mean_ci_is_the_t_interval():
    mean, low, high = mean_ci([1, 2, 3, 4, 5])
    half = 2.7764451051977987 * math.sqrt(2.5) / math.sqrt(5)  # t(0.975, 4) * sd / sqrt(n)
    assert mean == 3.0 and low == pytest.approx(3 - half) and high == pytest.approx(3 + half)
    assert mean_ci([7.0]) == (7.0, None, None)
    assert mean_ci([None, 4.0, 6.0])[0] == 5.0  # unknown values are left out
    assert mean_ci([]) == (None, None, None)


def test_welch_matches_its_formula():
    from scipy.stats import t

    a, b = [10.0, 12.0, 11.0, 13.0, 14.0], [9.0, 8.0, 10.0, 7.0, 9.5]
    va, vb = 2.5 / 5, 1.45 / 5  # sample variances / n
    stat = (12.0 - 8.7) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va ** 2 / 4 + vb ** 2 / 4)
    assert welch(a, b) == pytest.approx(2 * t.sf(stat, dof))
    assert welch([1.0, 1.0], [1.0, 1.0]) is None  # no variance at all: no test
    assert welch([1.0], [2.0, 3.0]) is None


def test_mann_whitney_exact_small_sample():
    # 5 runs all above 5 others: the most extreme of C(10, 5) = 252 orderings, two-sided.
    assert mann_whitney([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == pytest.approx(2 / 252)
    assert mann_whitney([1, 3, 5, 7, 9], [2, 4, 6, 8, 10]) > 0.5


def test_ratio_ci_bootstrap():
    ratio, low, high = ratio_ci([20, 22, 21, 19, 18], [10, 11, 9, 10, 10])
    assert ratio == pytest.approx(20 / 10)
    assert low < ratio < high and low > 1.5 and high < 2.5
    assert ratio_ci([20, 22, 21], [10, 11, 9], seed=3) == ratio_ci([20, 22, 21], [10, 11, 9], seed=3)
    assert ratio_ci([1.0], [2.0]) == (0.5, None, None)
    assert ratio_ci([1.0, 2.0], [0.0, 0.0]) == (None, None, None)


def test_comparison_of_a_better_a_worse_and_an_undecided_agent():
    random = [100.0, 104.0, 98.0, 102.0, 101.0]
    better = compare_runs([120.0, 125.0, 118.0, 122.0, 121.0], random)
    assert better.separated and better.a_better and better.ratio > 1.15 and better.p_welch < 0.001
    worse = compare_runs([80.0, 85.0, 78.0, 82.0, 81.0], random)  # an agent that loses is reported losing
    assert worse.separated and worse.a_better is False and worse.ratio < 1
    noisy = compare_runs([90.0, 130.0, 100.0, 125.0, 95.0], random)
    assert noisy.separated is False and noisy.a_better is False
    single = compare_runs([150.0], random)
    assert single.a_better is None and single.p_welch is None
    assert better.to_json()["a_better"] is True


def test_helpers():
    assert intervals_overlap((1, 2), (2.5, 3)) is False and intervals_overlap((1, 3), (2, 4)) is True
    assert intervals_overlap((None, None), (1, 2)) is None
    assert geomean([1.0, 4.0, None]) == pytest.approx(2.0) and geomean([]) is None


def test_board_ci_column():
    stat = Stat((1.0, 2.0, 3.0, 4.0, 5.0))
    low, high = stat.ci95
    assert low == pytest.approx(mean_ci([1, 2, 3, 4, 5])[1]) and high == pytest.approx(mean_ci([1, 2, 3, 4, 5])[2])
    assert stat.format_ci() == f"3.0 [{low:.1f}, {high:.1f}]"
    assert Stat((2.0, None)).format_ci() == "2.0 [1/2]"
    assert stat.to_json()["ci95"] == [low, high]
    board = Leaderboard(env_ids=["e"], agents=["a"], seeds=[0, 1, 2], budget=3, trial_points=(3,), time_points=())
    board.results[("e", "a")] = [_timeline([v, v, v], seed=i) for i, v in enumerate((10.0, 20.0, 30.0))]
    row = text_table(board, spread="ci").splitlines()[-1]
    low, high = Stat((10.0, 20.0, 30.0)).ci95
    assert f"20.0 [{low:.1f}, {high:.1f}]" in row and "(10.0-30.0)" in text_table(board)
    with pytest.raises(ValueError, match="spread"):
        text_table(board, spread="sd")


def test_paired_difference_resolves_what_separate_intervals_hide():
    import numpy as np
    from scipy.stats import t

    a = [1.0, 2.0, 3.0, 4.0, 5.0]  # each seed's value, spread wide by what the seeds share
    b = [0.5, 1.6, 2.4, 3.7, 4.3]
    assert intervals_overlap(mean_ci(a)[1:], mean_ci(b)[1:])  # apart, the two cannot be told apart
    diff = paired_difference(a, b)
    d = np.array([0.5, 0.4, 0.6, 0.3, 0.7])
    half = t.ppf(0.975, 4) * d.std(ddof=1) / np.sqrt(5)
    assert diff.mean == pytest.approx(0.5) and diff.ci == pytest.approx((0.5 - half, 0.5 + half))
    assert diff.above is True and (diff.wins, diff.losses, diff.n) == (5, 0, 5)
    assert diff.p_wilcoxon == pytest.approx(2 / 32)  # exact two-sided: all five signs alike
    assert paired_difference(b, a).above is False
    # A pair with a missing side is dropped; one pair has no interval, so nothing is claimed.
    short = paired_difference([1.0, None, 3.0], [0.0, 2.0, None])
    assert short.n == 1 and short.ci == (None, None) and short.above is None and short.p_wilcoxon is None
    with pytest.raises(ValueError, match="as many on each side"):
        paired_difference([1.0, 2.0], [1.0])
