"""The methodology score on hand-made curves: random search scores 0, the best known 1, halfway 0.5."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tensorgym.baselines import methodology
from tensorgym.baselines.board import Leaderboard
from tensorgym.tuner import Trial, TuningResult

SAMPLE = [0.0, 10.0, 20.0, 30.0]  # GFLOP/s of four random trials (a failed kernel counts 0)


def test_expected_best_of_random_draws_by_hand():
    # best of 1 draw: the mean, 15; of 2: sum_k v_k ((k/4)^2 - ((k-1)/4)^2) = (0*1 + 10*3 + 20*5 + 30*7) / 16
    assert methodology.expected_best(SAMPLE, [1, 2]) == pytest.approx([15.0, 340 / 16])
    # fractional draws: the same formula with a real exponent, between the integer neighbours
    between = methodology.expected_best(SAMPLE, [1.5])[0]
    assert between == pytest.approx(sum(v * ((k / 4) ** 1.5 - ((k - 1) / 4) ** 1.5)
                                        for k, v in enumerate(SAMPLE, start=1)))
    assert 15.0 < between < 340 / 16
    rng = np.random.default_rng(0)
    simulated = rng.choice(SAMPLE, size=(200_000, 3)).max(axis=1).mean()
    assert methodology.expected_best(SAMPLE, [3])[0] == pytest.approx(simulated, rel=0.01)
    with pytest.raises(ValueError):
        methodology.expected_best(SAMPLE, [0.5])


def test_score_is_zero_for_random_one_for_the_optimum_and_between_in_between():
    baseline = methodology.expected_best(SAMPLE, [1, 2, 3, 4])
    optimum = 40.0
    assert methodology.score(baseline, baseline, optimum) == pytest.approx(0.0)
    assert methodology.score([optimum] * 4, baseline, optimum) == pytest.approx(1.0)
    halfway = baseline + 0.5 * (optimum - baseline)
    assert methodology.score(halfway, baseline, optimum) == pytest.approx(0.5)
    # a curve that is the baseline for two points and the optimum for two: the mean of 0, 0, 1, 1
    assert methodology.score([*baseline[:2], optimum, optimum], baseline, optimum) == pytest.approx(0.5)
    assert methodology.score([0.0] * 4, baseline, optimum) < 0  # never better than nothing: worse than random
    with pytest.raises(ValueError, match="baseline reaches the optimum"):
        methodology.standardise([1.0], [40.0], 40.0)


def _run(agent: str, gflops: list[float], seed: int, step_s: float = 1.0) -> TuningResult:
    trials, best = [], 0.0
    for i, g in enumerate(gflops):
        best = max(best, g)
        trials.append(Trial(i + 1, (i + 1) * step_s, None, "ok" if g else "build_error", g or None, best, True))
    return TuningResult(agent, "w", "w", "tiles", "t", seed, len(gflops), None, trials, None, best)


def _board() -> Leaderboard:
    board = Leaderboard(env_ids=["E"], agents=["random", "perfect", "baseline", "halfway"], seeds=[0, 1], budget=4,
                        trial_points=(4,), time_points=(2.0,))
    board.results[("E", "random")] = [_run("random", SAMPLE, 0), _run("random", SAMPLE[::-1], 1)]
    board.results[("E", "perfect")] = [_run("perfect", [40.0] * 4, s) for s in (0, 1)]
    baseline = methodology.expected_best(SAMPLE, [1, 2, 3, 4])  # both random runs together hold SAMPLE twice
    board.results[("E", "baseline")] = [_run("baseline", list(baseline), s) for s in (0, 1)]
    board.results[("E", "halfway")] = [_run("halfway", list(baseline + 0.5 * (40.0 - baseline)), s) for s in (0, 1)]
    return board


def test_the_board_scores_each_agent_against_random_and_the_best_known():
    board = _board()
    ref = board.methodology_reference("E")
    assert ref.optimum == 40.0 and sorted(ref.sample) == sorted(SAMPLE * 2) and ref.trials == 4
    assert ref.seconds_per_trial == pytest.approx(1.0)
    stats = {agent: board.stats("E", agent) for agent in board.agents}
    assert stats["perfect"]["score"].mean == pytest.approx(1.0)
    assert stats["perfect"]["score(t)"].mean == pytest.approx(1.0)  # the best known from its first second
    assert stats["baseline"]["score"].mean == pytest.approx(0.0, abs=1e-12)
    assert stats["halfway"]["score"].mean == pytest.approx(0.5)
    assert -1.0 < stats["random"]["score"].mean < 0.5
    # the area under the best-so-far curve, as a fraction of the best known's (4 trials x 40 GFLOP/s)
    assert stats["random"]["AUC"].values == pytest.approx(((0 + 10 + 20 + 30) / 160, (30 * 4) / 160))
    assert stats["perfect"]["AUC"].values == pytest.approx((1.0, 1.0))
    assert board.to_json()["methodology"]["E"]["best_known_gflops"] == 40.0


def test_without_random_runs_there_is_no_score():
    board = _board()
    board.agents = ["perfect"]
    assert board.methodology_reference("E") is None
    assert board.stats("E", "perfect")["score"].format() == "-"
    assert board.stats("E", "perfect")["AUC"].mean == pytest.approx(1.0)  # the area needs no baseline


def test_on_a_landscape_the_baseline_is_drawn_without_replacement_from_the_whole_space():
    population = [0.0, 10.0, 20.0, 30.0, 40.0]  # every config of a (tiny) landscape
    # best of M draws without replacement: expected rank M (N + 1) / (M + 1) from the worst (N = 5); the values
    # are evenly spaced, so the value at that rank is the expected best
    assert methodology.expected_best_without_replacement(population, [1, 2, 5]) == pytest.approx([20.0, 30.0, 40.0])
    assert methodology.value_at_expected_rank(population, [1, 2, 5]) == pytest.approx([20.0, 30.0, 40.0])
    rng = np.random.default_rng(0)
    draws = np.array([rng.choice(population, size=2, replace=False).max() for _ in range(100_000)])
    # the exact mean of the best of 2 is 30 (ranks 2..5 weighted 1..4 of 10): the expected rank's value agrees
    assert draws.mean() == pytest.approx(30.0, rel=0.01)
    ref = methodology.exhaustive_reference(population, seconds_per_trial=0.5, trials=3)
    assert ref is not None and ref.exhaustive and ref.optimum == 40.0
    baseline = ref.baseline_trials()
    assert methodology.score([40.0] * 3, baseline, ref.optimum) == pytest.approx(1.0)
    assert methodology.score(baseline, baseline, ref.optimum) == pytest.approx(0.0)
    assert ref.time_grid()[0] == pytest.approx(0.5)
    assert methodology.exhaustive_reference([5.0, 5.0], 0.5, 3) is None  # one draw already finds the optimum
    assert methodology.exhaustive_reference([], 0.5, 3) is None


SKEWED = [0.0, 0.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0]  # a landscape whose best configs are far apart (2 failed)


def test_the_landscape_baseline_is_the_exact_expected_best_not_the_value_at_the_expected_rank():
    for m in range(1, len(SKEWED) + 1):
        exact = np.mean([max(subset) for subset in itertools.combinations(SKEWED, m)])
        assert methodology.expected_best_without_replacement(SKEWED, [m])[0] == pytest.approx(exact)
    # one draw: the mean (39.375), where the value at the expected rank 4.5 is 15
    assert methodology.value_at_expected_rank(SKEWED, [1])[0] == pytest.approx(15.0)
    # between whole numbers of draws: linear; beyond the population: its best
    two, three = methodology.expected_best_without_replacement(SKEWED, [2, 3])
    between = methodology.expected_best_without_replacement(SKEWED, [2.25])[0]
    assert between == pytest.approx(two + 0.25 * (three - two))
    assert methodology.expected_best_without_replacement(SKEWED, [20])[0] == pytest.approx(160.0)


def test_random_search_scores_zero_in_expectation_against_a_landscape():
    rng = np.random.default_rng(0)
    runs = [_run("random", list(rng.permutation(SKEWED)[:6]), seed) for seed in range(4000)]
    ref = methodology.exhaustive_reference(SKEWED, seconds_per_trial=1.0, trials=6)
    scores = methodology.score_runs(runs, ref)
    # the mean curve against the exact expectation: P is linear in the curve, so random search scores 0 (here
    # within the sampling error of 4000 runs); over time its k-th result is in at k seconds: floor(t / tpf) draws
    assert scores.trials == pytest.approx(0.0, abs=0.02)
    assert scores.time == pytest.approx(0.0, abs=0.02)
    # what the score was before the cross-check with the package: the median curve against the value at the
    # expected rank puts random search far above 0
    median = methodology.median_curve([[r.best_at(trials=m) for m in range(1, 7)] for r in runs])
    assert methodology.score(median, methodology.value_at_expected_rank(SKEWED, np.arange(1, 7)), ref.optimum) > 0.3


def test_over_time_random_search_has_finished_whole_draws():
    assert list(methodology.draws_by([0.1, 1.0, 1.5, 2.0 - 1e-12, 3.0], 1.0)) == [1.0, 1.0, 1.0, 2.0, 3.0]
    assert list(methodology.draws_by(np.array([0.3, 0.6, 0.9]) * 3, 0.3)) == [3.0, 6.0, 9.0]  # no rounding down


def test_each_seeds_score_averages_to_the_score_of_the_mean_curve():
    rng = np.random.default_rng(1)
    runs = [_run("ga", list(rng.permutation(SKEWED)[:6]), seed) for seed in range(7)]
    ref = methodology.exhaustive_reference(SKEWED, seconds_per_trial=1.0, trials=6)
    per_seed = methodology.seed_scores(runs, ref)
    assert len(per_seed) == 7 and len(set(per_seed)) > 1
    assert np.mean(per_seed) == pytest.approx(methodology.score_runs(runs, ref).trials)  # P is linear in C
    assert methodology.seed_scores(runs, None) == []


def test_a_run_without_trials_keeps_its_place_so_seeds_pair_correctly():
    from tensorgym.baselines.learning import analyse

    ref = methodology.exhaustive_reference(SKEWED, seconds_per_trial=1.0, trials=6)
    runs = [_run("dgd", list(SKEWED[:6]), 0), _run("dgd", [], 1), _run("dgd", list(SKEWED[6:12]), 2)]
    scores = methodology.seed_scores(runs, ref)
    assert len(scores) == 3 and scores[1] is None and None not in (scores[0], scores[2])
    # The ablation's seed 2 equals DGD's seed 2; seed 0 differs. Were seed 1's empty run dropped, DGD's seed 2 would
    # be paired with the ablation's seed 1.
    blind = [_run("dgd-random-model", list(SKEWED[6:12]), 0), _run("dgd-random-model", list(SKEWED[:6]), 1),
             _run("dgd-random-model", list(SKEWED[6:12]), 2)]
    report = analyse({"E": {"dgd": runs, "dgd-random-model": blind}}, budgets=(6,), dgd_seconds=1.0,
                     references={"E": ref})
    paired = report["envs"]["E"]["ablations"]["dgd"]["score_paired"]
    first_difference = scores[0] - methodology.seed_scores(blind, ref)[0]  # seed 2's difference is 0
    assert paired["n"] == 2 and paired["mean"] == pytest.approx(first_difference / 2)
