"""The learned-search report on hand-made runs: who beats random, what the model adds, the headline, the targets."""

from __future__ import annotations

import pytest

from tensorgym.baselines.learning import analyse, plot, render, trials_to_reach
from tensorgym.tuner import Trial, TuningResult

NOISE = (-2.0, -1.0, 0.0, 1.0, 2.0)  # five seeds around each mean


def run(agent: str, final: float, seed: int, step_s: float = 1.0, trials: int = 8, extra=None) -> TuningResult:
    """A run whose k-th trial measured final * k / trials GFLOP/s at k * step_s seconds of clock."""
    out, best = [], 0.0
    for k in range(1, trials + 1):
        g = final * k / trials
        best = max(best, g)
        out.append(Trial(k, k * step_s, None, "ok", g, best, True))
    return TuningResult(agent, "w", "w", "tiles", "t", seed, trials, None, out, None, best,
                        extra={"remeasured_gflops": final * 0.9, **(extra or {})})


def runs(agent: str, mean: float, **kw) -> list[TuningResult]:
    return [run(agent, mean + d, seed, **kw) for seed, d in enumerate(NOISE)]


def results(ga_b: float = 120.0):
    ga_log = {"predictions": {"mean_rho": 0.4, "log": [{"guided": True, "model_mean": 50.0, "random_mean": 30.0}]}}
    return {
        "A": {"random": runs("random", 100), "ga": runs("ga", 120, extra=ga_log), "dgd": runs("dgd", 130),
              "ga-random-model": runs("ga-random-model", 104), "dgd-random-model": runs("dgd-random-model", 131)},
        "B": {"random": runs("random", 100), "ga": runs("ga", ga_b), "dgd": runs("dgd", 80)},
        "C": {"random": runs("random", 100), "ga": runs("ga", 90), "dgd": runs("dgd", 125, step_s=0.1)},
    }


def test_agents_against_random_and_their_ablations():
    report = analyse(results(), budgets=(4, 8), time_points=(2.0,), dgd_seconds=4.0)
    a = report["envs"]["A"]
    assert report["envs"]["A"]["threshold"] == pytest.approx(100.0)  # random's mean best at 8 trials
    ga = a["agents"]["ga"]
    assert ga["@8"]["mean"] == pytest.approx(120.0) and ga["@4"]["mean"] == pytest.approx(60.0)
    assert ga["@8"]["ci"][0] < 120.0 < ga["@8"]["ci"][1]
    assert ga["vs_random@8"]["a_better"] and ga["vs_random@8"]["ratio"] == pytest.approx(1.2)
    assert ga["re-timed"]["mean"] == pytest.approx(108.0)
    assert ga["@2s"]["mean"] == pytest.approx(30.0)
    # 120 * k / 8 >= 100 first at k = 7; a seed at 118 reaches it at 7 as well, one at 122 too.
    assert ga["to_random@8"] == {"values": [7, 7, 7, 7, 7], "reached": 5, "median": 7.0}
    assert a["agents"]["random"]["to_random@8"]["reached"] >= 2  # its own mean: some seeds reach it
    # The model's contribution: GA clearly above its random-model ablation, DGD not.
    assert a["ablations"]["ga"]["@8"]["a_better"] is True
    assert a["ablations"]["dgd"]["@8"]["a_better"] is False
    assert ga["predictions"]["mean_rho"]["mean"] == pytest.approx(0.4)
    assert ga["predictions"]["model_pick_gflops"] == 50.0 and ga["predictions"]["random_pick_gflops"] == 30.0


def test_an_agent_that_loses_is_shown_losing():
    report = analyse(results(), budgets=(4, 8), dgd_seconds=4.0)
    b_dgd = report["envs"]["B"]["agents"]["dgd"]["vs_random@8"]
    assert b_dgd["ratio"] == pytest.approx(0.8) and b_dgd["a_better"] is False and b_dgd["separated"]
    targets = report["targets"]
    assert targets["ga above random@8"] == {"envs": ["A", "B"], "met": True}
    assert targets["dgd above random@8"] == {"envs": ["A", "C"], "met": True}
    assert targets["ga above random, final bests re-timed"] == {"envs": ["A", "B"], "met": True}
    assert report["envs"]["B"]["agents"]["dgd"]["re-timed_vs_random"]["ratio"] == pytest.approx(0.8)
    worse = analyse(results(ga_b=95.0), budgets=(4, 8), dgd_seconds=4.0)["targets"]
    assert worse["ga above random@8"] == {"envs": ["A"], "met": False}
    text = render(analyse(results(ga_b=95.0), budgets=(4, 8), dgd_seconds=4.0))
    assert "NOT MET ga above random@8: envs: A" in text and "MET     dgd above random@8" in text


def test_dgd_clock_headline_and_capped_runs():
    report = analyse(results(), budgets=(4, 8), dgd_seconds=4.0)
    head_a = report["envs"]["A"]["headline"]
    assert head_a["ratio"] == pytest.approx(65.0 / 120.0)  # DGD at 4 s has made 4 of 8 trials
    assert head_a["dgd_runs_capped_by_budget"] == 0
    head_c = report["envs"]["C"]["headline"]
    assert head_c["ratio"] == pytest.approx(125.0 / 90.0) and head_c["dgd_runs_capped_by_budget"] == 5
    geomean = report["targets"]["dgd@4s / ga@8"]["geomean"]
    assert geomean == pytest.approx((65 / 120 * 40 / 120 * 125 / 90) ** (1 / 3))
    assert report["targets"]["dgd@4s / ga@8"]["met"] is False


def test_trials_to_reach_and_plot(tmp_path):
    r = run("x", 80.0, 0)
    assert trials_to_reach(r, 50.0) == 5 and trials_to_reach(r, 81.0) is None and trials_to_reach(r, 0.0) is None
    paths = plot({"A": results()["A"]}, tmp_path)
    assert [p.name for p in paths] == ["A.png"] and paths[0].stat().st_size > 0


def test_landscape_report_optimum_long_headline_every_budget_and_variability():
    res = results()
    res["A"]["ga@16"] = runs("ga@16", 140, trials=16)  # a longer GA: its 16th trial is its best
    report = analyse(res, budgets=(4, 8), dgd_seconds=4.0, optima={"A": 200.0}, headline_ga="ga@16",
                     headline_trials=16)
    a = report["envs"]["A"]
    assert a["optimum"] == 200.0
    assert a["agents"]["ga"]["opt@8"]["mean"] == pytest.approx(0.6)
    assert "opt@8" not in report["envs"]["B"]["agents"]["ga"]  # no optimum known there
    head = a["headline"]
    assert head["ratio"] == pytest.approx(65.0 / 140.0)
    # Seed 000's Eq. 1: (max - min) / max of the five runs' bests (142 and 138 for the long GA).
    assert head["variability"]["ga_at_trials"] == pytest.approx(4.0 / 142.0)
    assert report["envs"]["B"]["headline"] is None  # no ga@16 runs there
    targets = report["targets"]
    # GA above random at 4 and at 8 trials on A and B (at 4 trials its mean 60 is above random's 50 too).
    assert targets["ga above random@4,8"] == {"envs": ["A", "B"], "met": True}
    assert targets["ga above ga-random-model@8"] == {"envs": ["A"], "met": False}
    assert targets["dgd above dgd-random-model@8"]["envs"] == []
    assert "dgd@4s / ga@16" in targets
    text = render(report)
    assert "%opt@8" in text and "variability (max - min) / max" in text and "dgd@4s / ga@16 (runs: dgd, ga@16)" in text


def test_runs_without_re_timing_have_no_re_timed_targets_or_columns():
    res = results()
    for by_agent in res.values():
        for agent_runs in by_agent.values():
            for r in agent_runs:
                r.extra.pop("remeasured_gflops")
    report = analyse(res, budgets=(4, 8), dgd_seconds=4.0)
    assert not any("re-timed" in name for name in report["targets"])
    assert "re-timed" not in render(report)


def test_the_headline_is_each_agents_score_with_its_interval_over_seeds():
    import numpy as np

    from tensorgym.baselines.methodology import exhaustive_reference

    space = np.linspace(0.0, 140.0, 400)  # a landscape's configs: the true optimum 140
    refs = {e: exhaustive_reference(space, seconds_per_trial=1.0, trials=8) for e in ("A", "B", "C")}
    report = analyse(results(), budgets=(4, 8), dgd_seconds=4.0, references=refs)
    a = report["envs"]["A"]["agents"]
    assert a["dgd"]["score"]["mean"] > a["ga"]["score"]["mean"] > a["random"]["score"]["mean"]
    low, high = a["ga"]["score"]["ci"]
    assert low < a["ga"]["score"]["mean"] < high and a["ga"]["score"]["n"] == 5
    assert report["targets"]["ga above random by score"]["envs"] == ["A", "B"]
    assert report["targets"]["dgd above dgd-random-model by score"]["envs"] == []  # 130 against 131
    text = render(report)
    assert text.index("== headline: methodology score") < text.index("== A")
    assert "by score" not in render(analyse(results(), budgets=(4, 8), dgd_seconds=4.0))  # no references


def test_a_descent_s_walks_are_set_beside_its_ablation_s():
    walk = {"moves": 30, "restarts": 9, "random_starts": 5}
    blind = {"moves": 20, "restarts": 3, "random_starts": 1}
    data = results()
    data["A"]["dgd"] = runs("dgd", 130, extra=walk)
    data["A"]["dgd-random-model"] = runs("dgd-random-model", 131, extra=blind)
    report = analyse(data, budgets=(4, 8), dgd_seconds=4.0)
    assert report["envs"]["A"]["agents"]["dgd"]["walk"] == {"moves": 30.0, "restarts": 9.0, "random_starts": 5.0}
    assert report["envs"]["A"]["agents"]["ga"]["walk"] is None  # not a descent
    text = render(report)
    assert ("dgd walks: 30.0 moves and 9.0 restarts a run (5.0 from random configs); dgd-random-model: 20.0 and 3.0 "
            "(1.0)") in text
    assert text.count(" walks: ") == 1  # B and C have no ablation runs to set beside


def test_the_ablation_is_compared_seed_by_seed_where_the_seeds_share_their_draws():
    import numpy as np

    from tensorgym.baselines.methodology import exhaustive_reference

    refs = {e: exhaustive_reference(np.linspace(0.0, 140.0, 400), seconds_per_trial=1.0, trials=8)
            for e in ("A", "B", "C")}
    data = results()
    # Every seed of the ablation 2 GFLOP/s below the same seed of DGD: apart, the +-2 spread of the seeds hides it.
    data["A"]["dgd-random-model"] = runs("dgd-random-model", 128)
    report = analyse(data, budgets=(4, 8), dgd_seconds=4.0, references=refs)
    targets = report["targets"]
    assert targets["dgd above dgd-random-model by score"]["envs"] == []
    assert targets["dgd above dgd-random-model by score, paired by seed"]["envs"] == ["A"]
    paired = report["envs"]["A"]["ablations"]["dgd"]["score_paired"]
    assert paired["mean"] > 0 and paired["wins"] == paired["n"] == 5 and paired["above"] is True
    # The GA's ablation is far below on every seed; B and C have no ablation runs.
    assert targets["ga above ga-random-model by score, paired by seed"]["envs"] == ["A"]
    text = render(report)
    assert "what the model adds: the score minus the ablation's, seed by seed" in text
    assert "dgd - dgd-random-model  +0." in text
    # Seeds are paired by number, whatever order the runs come in.
    data["A"]["dgd-random-model"] = runs("dgd-random-model", 128)[::-1]
    again = analyse(data, budgets=(4, 8), dgd_seconds=4.0, references=refs)
    assert again["envs"]["A"]["ablations"]["dgd"]["score_paired"]["mean"] == pytest.approx(paired["mean"])
