"""tensorgym's random-search baseline against the ``autotuning-methodology`` package's, on a synthetic T4 landscape.

The package's baseline (``RandomSearchCalculatedBaseline``) is the value at the expected rank of the best of
``M`` draws without replacement, ``r = M (N + 1) / (M + 1)`` (1-based, worst first), but it rounds ``r`` and
reads it as a 0-based index: its value is the next one up, ``v_(r + 1)`` (capped at the optimum). tensorgym's
:func:`~baselines.methodology.value_at_expected_rank` reads it as the rank it is, and its landscape baseline
(:func:`~baselines.methodology.exhaustive_reference`) is the exact expectation, which equals the value at the
expected rank wherever the values are evenly spaced. So on a landscape of evenly spaced GFLOP/s, at every
whole rank, tensorgym's baseline is exactly the package's moved down one value; between whole ranks the
package rounds where tensorgym interpolates, so they differ by at most half a step more.
``bench/reports/landscapes/methodology_crosscheck.txt`` does the same on the shipped landscapes, with scores.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from test_landscape_data import filled_database, tiny_space
from tensorgym.baselines import methodology
from tensorgym.landscape import export_landscape, write_t4
from tensorgym.record import Record, Status

pytest.importorskip("autotuning_methodology")
from autotuning_methodology.baseline import RandomSearchCalculatedBaseline  # noqa: E402
from autotuning_methodology.searchspace_statistics import SearchspaceStatistics  # noqa: E402

TIME_KEYS = ["compilation", "runtimes", "framework", "search_algorithm", "validation"]  # the package's "all"
STEP = 1.0  # GFLOP/s between neighbouring configs


def evenly_spaced_landscape(failed_every: int | None = None):
    """The tiny tiles space (144 configs), config i running at (1 + a permutation of i) GFLOP/s, or failing."""
    space = tiny_space()
    wl = space.workload
    configs = space.configs()
    order = np.random.default_rng(0).permutation(len(configs))
    records = []
    for i, config in enumerate(configs):
        common = dict(workload=wl.key, target=space.target.fingerprint, space=space.name, config=config,
                      build_s=0.2, created=time.time())
        if failed_every and i % failed_every == 1:
            records.append(Record(status=Status.BUILD_ERROR, error="synthetic", wall_s=0.1, **common))
            continue
        gflops = STEP * (1 + int(order[i]))
        latency = wl.flops / (gflops * 1e9)
        records.append(Record(status=Status.OK, latency_s=latency, latency_cv=0.0, samples=(latency,), number=1,
                              gflops=gflops, run_s=0.1 + 0.001 * i, wall_s=0.2 + 0.001 * i, **common))
    with filled_database(space, records) as db:
        return export_landscape(db, space, llvm_version="test")


def package_baseline(landscape, tmp_path):
    path = write_t4(landscape, tmp_path / "tiny_T4.json")
    stats = SearchspaceStatistics(application_name="tiny", device_name="cpu", minimization=False,
                                  objective_time_keys=TIME_KEYS, objective_performance_keys=["GFLOP/s"],
                                  full_search_space_file_path=path)
    return stats, RandomSearchCalculatedBaseline(stats)


def whole_ranks(n: int) -> list[int]:
    """The numbers of draws M whose expected rank M (N + 1) / (M + 1) is a whole number."""
    return [m for m in range(1, n + 1) if m * (n + 1) % (m + 1) == 0]


def test_at_whole_ranks_tensorgyms_baseline_is_the_packages_one_value_down(tmp_path):
    land = evenly_spaced_landscape()
    n = len(land)
    stats, baseline = package_baseline(land, tmp_path)
    values = np.sort(land.scores)
    np.testing.assert_array_equal(stats.objective_performances_total_sorted, values)  # the T4 carries the values
    draws = np.arange(1, n + 1)
    theirs = baseline.get_curve(draws, "fevals")  # PCHIP through whole draws passes through the points
    ref = methodology.exhaustive_reference(land.scores, seconds_per_trial=float(land.wall_s.mean()), trials=n)
    ours = ref.baseline_trials()  # the exact expectation: here the value at the expected rank
    np.testing.assert_allclose(ours, methodology.value_at_expected_rank(land.scores, draws), atol=1e-9)

    wholes = whole_ranks(n)
    assert wholes == [4, 28, 144]  # N + 1 = 145 = 5 x 29 (M = 1: rank (N + 1) / 2 = 72.5 is not whole)
    for m in wholes:
        rank = m * (n + 1) // (m + 1)
        assert ours[m - 1] == pytest.approx(values[rank - 1])  # the expected rank, 1-based
        assert theirs[m - 1] == pytest.approx(values[min(rank, n - 1)])  # read as a 0-based index
        assert theirs[m - 1] - ours[m - 1] == pytest.approx(STEP if rank < n else 0.0)
    # Between whole ranks the package rounds the rank, tensorgym interpolates: at most one and a half steps apart,
    # and never below tensorgym's (the package's index is one too high, rounding moves it half a step at most).
    gap = theirs - ours
    assert np.all(gap >= -0.5 * STEP - 1e-9) and np.all(gap <= 1.5 * STEP + 1e-9)
    assert gap[-1] == pytest.approx(0.0)  # N draws: both the optimum


def test_over_time_both_turn_seconds_into_draws_with_the_same_seconds_per_config(tmp_path):
    land = evenly_spaced_landscape()
    n = len(land)
    stats, baseline = package_baseline(land, tmp_path)
    tpf = float(land.wall_s.mean())
    assert stats.get_time_per_feval("mean_per_feval") == pytest.approx(tpf, rel=1e-9)
    ref = methodology.exhaustive_reference(land.scores, seconds_per_trial=tpf, trials=n)
    seconds = tpf * np.arange(1, n + 1)  # whole numbers of draws: the package's rounding is exact there
    theirs = baseline.get_curve(seconds, "time")
    ours = methodology.expected_best_without_replacement(ref.sample, seconds / tpf)
    for m in whole_ranks(n):
        rank = m * (n + 1) // (m + 1)
        assert theirs[m - 1] - ours[m - 1] == pytest.approx(STEP if rank < n else 0.0)


def test_the_packages_own_simulation_sides_with_the_1_based_rank(tmp_path):
    land = evenly_spaced_landscape()
    n = len(land)
    stats, _ = package_baseline(land, tmp_path)
    simulated = RandomSearchCalculatedBaseline(stats, simulate=True)  # 500 draws per budget, the mean index
    draws = np.array([28, 72, 144])  # the best of many draws: its rank varies little, so 500 draws pin its mean
    np.random.seed(0)
    their_simulation = simulated.get_curve(draws, "fevals")
    their_formula = RandomSearchCalculatedBaseline(stats).get_curve(draws, "fevals")
    ours = methodology.value_at_expected_rank(land.scores, draws)
    np.testing.assert_allclose(their_simulation, ours, atol=STEP)  # within a rank of ours (Monte Carlo, rounded)
    assert np.all(their_formula[:-1] - their_simulation[:-1] >= STEP - 1e-9)  # its formula: a rank above both
    exact_rank = [sum(k * np.exp(_log_choose(k - 1, m - 1) - _log_choose(n, m)) for k in range(m, n + 1))
                  for m in draws]
    np.testing.assert_allclose(exact_rank, draws * (n + 1) / (draws + 1), rtol=1e-9)  # E[rank] = M(N+1)/(M+1)


def test_failed_configs_the_package_drops_tensorgym_counts_as_zero(tmp_path):
    land = evenly_spaced_landscape(failed_every=9)
    stats, baseline = package_baseline(land, tmp_path)
    valid = int(land.ok.sum())
    assert valid < len(land)
    assert stats.objective_performances_total_sorted.size == valid  # the package's N: correct configs only
    ref = methodology.exhaustive_reference(land.scores, seconds_per_trial=float(land.wall_s.mean()), trials=8)
    assert ref.sample.size == len(land) and np.count_nonzero(ref.sample == 0.0) == len(land) - valid
    # So the package's random search draws only correct configs: its baseline is higher still.
    assert np.all(baseline.get_curve(np.arange(1, 9), "fevals") > ref.baseline_trials())
    # And its seconds per draw are mean(valid) + fraction failed x mean(failed), more than the mean over all.
    failed = len(land) - valid
    theirs = land.wall_s[land.ok].mean() + failed / len(land) * land.wall_s[~land.ok].mean()
    assert stats.get_time_per_feval("mean_per_feval") == pytest.approx(theirs)
    assert theirs - land.wall_s.mean() == pytest.approx(failed / len(land) * land.wall_s[land.ok].mean())


def _log_choose(a: int, b: int) -> float:
    from math import lgamma

    return lgamma(a + 1) - lgamma(b + 1) - lgamma(a - b + 1)
