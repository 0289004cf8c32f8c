"""The DGD agent: budgets, determinism, the walk's moves, thresholds, restarts, resume; real kernels."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import SyntheticEvaluator, peak_at, run_search, small_matmul_space, synthetic_tuner

import tensorgym
from tensorgym.agents.cost_model import CostModel
from tensorgym.agents.dgd import DGDAgent
from tensorgym.spaces import Config
from tensorgym.tuner import Tuner


FAST_MODEL = {"num_boost_round": 100}  # the walk's logic, not the model's quality, is under test


@pytest.fixture(scope="module")
def space():
    return small_matmul_space()


def two_peaks(space):
    """A wide basin with a local optimum (60 GFLOP/s) and a narrow one with the global optimum (100)."""
    rng = np.random.default_rng(21)
    top, local = space.sample(rng), space.sample(rng)
    high, wide = peak_at(space, top, 100.0), peak_at(space, local, 60.0)

    def perf(config: Config) -> float:
        return max(100.0 * (high(config) / 100.0) ** 4, wide(config))

    return perf, top, local


def segments(result):
    """(event, trials measured after it until the next event) for every walk event."""
    walk = result.extra["walk"]
    out = []
    for i, event in enumerate(walk):
        end = walk[i + 1]["trial"] if i + 1 < len(walk) else len(result.trials)
        out.append((event, result.trials[event["trial"]:end]))
    return out


@pytest.mark.parametrize("budget", [1, 7, 64, 100])
def test_budget_respected_exactly(budget):
    tuner = synthetic_tuner(budget=budget)
    result = run_search(DGDAgent(), tuner)
    assert len(result.trials) == budget
    assert tuner.evaluator.measured == budget
    assert len({t.config for t in result.trials}) == budget
    assert result.extra["initial_samples"] == min(budget, 64)


def test_small_budget_is_random_sampling():
    result = run_search(DGDAgent(), synthetic_tuner(budget=40))
    assert result.extra["moves"] == 0 and result.extra["walk"] == [] and result.extra["model_fits"] == 0


def test_deterministic_per_seed():
    a = run_search(DGDAgent(initial_samples=16), synthetic_tuner(budget=80), seed=2)
    b = run_search(DGDAgent(initial_samples=16), synthetic_tuner(budget=80), seed=2)
    c = run_search(DGDAgent(initial_samples=16), synthetic_tuner(budget=80), seed=3)
    assert [t.config for t in a.trials] == [t.config for t in b.trials]
    assert a.extra["walk"] == b.extra["walk"]
    assert [t.config for t in a.trials] != [t.config for t in c.trials]


@pytest.mark.parametrize("features", ["af", "generic"])
def test_walk_moves_only_to_measured_improvements_and_restarts_at_local_optima(space, features):
    perf, _, _ = two_peaks(space)
    tuner = synthetic_tuner(space, perf, budget=200)
    result = run_search(DGDAgent(features, initial_samples=32, model_options=FAST_MODEL), tuner, seed=0)
    walk = result.extra["walk"]
    assert result.extra["moves"] > 0 and result.extra["restarts"] > 0
    targets = []
    for i, event in enumerate(walk):
        if event["event"] == "move":
            # A move goes to a measured config that beats the base it left.
            assert event["gflops"] > event["from_gflops"]
            assert tuner.seen(Config.from_json(event["config"])).gflops == event["gflops"]
            assert walk[i - 1]["event"] in ("start", "move") and walk[i - 1]["gflops"] == event["from_gflops"]
            targets.append(event["config"])
        if event["event"] == "local_optimum" and i + 1 < len(walk):
            assert walk[i + 1]["event"] == "start"  # a local optimum is followed by a restart
    assert len(targets) == len(set(targets))  # never moved to the same config twice
    assert result.best_gflops == max(t.gflops for t in result.trials)


def test_walk_settles_on_true_local_optima(space, monkeypatch):
    """With an oracle model the walk climbs to the wide basin's peak, settles there and restarts elsewhere."""
    perf, top, local = two_peaks(space)
    monkeypatch.setattr(CostModel, "predict", lambda self, configs: np.array([perf(c) for c in configs]))
    result = run_search(DGDAgent(initial_samples=32, model_options=FAST_MODEL),
                        synthetic_tuner(space, perf, budget=300), seed=0)
    walk = result.extra["walk"]
    optima = {e["config"]: e["gflops"] for e in walk if e["event"] == "local_optimum"}
    assert optima.get(local.key) == pytest.approx(60.0)
    settled = [i for i, e in enumerate(walk) if e["event"] == "local_optimum" and e["config"] == local.key]
    assert walk[settled[0] + 1]["event"] == "start"


def test_oracle_walk_finds_the_peak_and_measures_nothing_there(space, monkeypatch):
    """With an oracle model the walk reaches the optimum; its neighbours all predict < 0.6 x it: none is measured."""
    optimum = space.sample(np.random.default_rng(8))
    perf = peak_at(space, optimum)
    monkeypatch.setattr(CostModel, "predict", lambda self, configs: np.array([perf(c) for c in configs]))
    agent = DGDAgent(initial_samples=8, model_options=FAST_MODEL)
    result = run_search(agent, synthetic_tuner(space, perf, budget=200), seed=0)
    assert result.best_config == optimum
    at_peak = [trials for event, trials in segments(result) if event["event"] in ("start", "move")
               and event["config"] == optimum.key]
    assert at_peak == [[]]  # the peak's neighbours all predict <= half of it: nothing is measured there


def test_score_early_stop_checks_the_first_of_each_window(space, monkeypatch):
    """The artifact's rule: a window is measured whole if its first (best-predicted) candidate clears
    0.6 x the base's prediction; the first window whose first candidate does not ends the hop set."""
    monkeypatch.setattr(CostModel, "predict",
                        lambda self, configs: np.r_[1.0, 0.9, 0.5, 0.4, np.full(len(configs) - 4, 0.3)])
    first: list[Config] = []

    def perf(config):
        if not first:
            first.append(config)
        return 50.0 if config == first[0] else 40.0  # no move, and never < 0.6 x the best

    result = run_search(DGDAgent(initial_samples=1), synthetic_tuner(space, perf, budget=12), seed=0)
    base = first[0]
    near = list(dict.fromkeys(space.neighbours(base, 1) + space.neighbours(base, 2)))
    far = [c for c in space.neighbours(base, 3)]
    # One window of 1+2-hop neighbours (0.9, 0.5, 0.4: two of them below 0.6), then one of 3-hop ones.
    assert [t.config for t in result.trials[1:4]] == near[:3]
    assert [t.config for t in result.trials[4:7]] == far[:3]
    walk = result.extra["walk"]
    assert walk[1] == {"event": "local_optimum", "trial": 7, "config": base.key, "gflops": 50.0}
    logged = result.extra["predictions"]["log"]
    assert [(r["trial"], r["n"], r["hops"], r["moved"]) for r in logged[:2]] == [(1, 3, "1+2", False),
                                                                                 (4, 3, "3", False)]


def test_measured_early_stop_and_three_hop_fallback(space, monkeypatch):
    """Constant predictions: 9 useless 1/2-hop neighbours stop the window loop, then 9 three-hop ones."""
    monkeypatch.setattr(CostModel, "predict", lambda self, configs: np.ones(len(configs)))
    first: list[Config] = []

    def perf(config):
        if not first:
            first.append(config)
        return 50.0 if config == first[0] else 1.0  # every other config is < 0.6 x the best

    result = run_search(DGDAgent(initial_samples=1), synthetic_tuner(space, perf, budget=25), seed=0)
    walk = result.extra["walk"]
    assert walk[0] == {"event": "start", "trial": 1, "config": first[0].key, "gflops": 50.0}
    assert walk[1]["event"] == "local_optimum" and walk[1]["trial"] == 1 + 9 + 9
    one_two = set(space.neighbours(first[0], 1) + space.neighbours(first[0], 2))
    three = set(space.neighbours(first[0], 3))
    assert all(t.config in one_two for t in result.trials[1:10])
    assert all(t.config in three and t.config not in one_two for t in result.trials[10:19])
    assert result.extra["random_starts"] >= 1 and walk[2]["event"] == "start"


def test_three_hop_move_when_one_and_two_hops_fail(space, monkeypatch):
    """No 1/2-hop neighbour beats the base (none is bad enough to stop early): a 3-hop one is found."""
    monkeypatch.setattr(CostModel, "predict", lambda self, configs: np.ones(len(configs)))
    # A budget-1 run draws the same first config as a long one (the short run is a prefix).
    base = run_search(DGDAgent(initial_samples=1), synthetic_tuner(space, budget=1)).trials[0].config
    near = set(space.neighbours(base, 1) + space.neighbours(base, 2))
    far = [c for c in space.neighbours(base, 3) if c not in near]
    goal = far[len(far) // 2]

    def perf(config):
        if config == base:
            return 50.0
        return 80.0 if config == goal else 40.0  # >= 0.6 x the best: the measured early stop never fires

    budget = 1 + len(near) + len(far)
    result = run_search(DGDAgent(initial_samples=1), synthetic_tuner(space, perf, budget=budget), seed=0)
    walk = result.extra["walk"]
    assert walk[0]["event"] == "start" and walk[0]["config"] == base.key
    assert walk[1]["event"] == "move" and walk[1]["hops"] == "3" and walk[1]["config"] == goal.key
    assert {t.config for t in result.trials[1:1 + len(near)]} == near  # every 1/2-hop neighbour came first
    assert result.extra["hop3_moves"] == 1


def test_short_run_is_prefix_of_long_run_and_resumes_from_records(space):
    perf, _, _ = two_peaks(space)
    evaluator = SyntheticEvaluator(space, perf)  # plays the database
    short = run_search(DGDAgent(initial_samples=16), Tuner(evaluator, budget=37), seed=5)
    long = run_search(DGDAgent(initial_samples=16), Tuner(evaluator, budget=90), seed=5)
    assert [t.config for t in long.trials[:37]] == [t.config for t in short.trials]
    assert long.reused == 37 and long.measured == 53


def test_constructor_errors():
    with pytest.raises(ValueError, match="features"):
        DGDAgent("ast")
    with pytest.raises(ValueError, match="initial_samples"):
        DGDAgent(initial_samples=0)
    with pytest.raises(ValueError, match="tolerance"):
        DGDAgent(tolerance=2.0)


@pytest.mark.slow
def test_real_measurements_and_resume(tmp_path, measurer):
    """On compiled kernels: exact budget, walk moves on measured improvements, resume from the database."""
    db = tmp_path / "x.db"
    agent = DGDAgent("af", initial_samples=4)
    env = tensorgym.make_env(tensorgym.matmul(64, 64, 64), db=db, measurer=measurer)
    try:
        first = agent.tune(env, budget=7, seed=0)  # "interrupted" after 7 trials
        assert len(first.trials) == 7 and first.measured == 7 and first.extra["initial_samples"] == 4
        full = agent.tune(env, budget=14, seed=0)
        assert [t.config for t in full.trials[:7]] == [t.config for t in first.trials]
        assert full.reused == 7 and full.measured == 7
        for event in full.extra["walk"]:
            if event["event"] == "move":
                assert event["gflops"] > event["from_gflops"]
        again = agent.tune(env, budget=14, seed=0)
        assert again.measured == 0 and [t.config for t in again.trials] == [t.config for t in full.trials]
    finally:
        env.close()


def test_random_model_ablation_and_prediction_log(space):
    from tensorgym.agents import make_agent

    perf, _, _ = two_peaks(space)
    ablation = make_agent("dgd-random-model", initial_samples=16)
    assert isinstance(ablation, DGDAgent) and ablation.model == "random"
    blind = run_search(ablation, synthetic_tuner(space, perf, budget=90), seed=1)
    learned = run_search(DGDAgent(initial_samples=16, model_options=FAST_MODEL), synthetic_tuner(space, perf, 90),
                         seed=1)
    assert [t.config for t in blind.trials[:16]] == [t.config for t in learned.trials[:16]]  # the same warm start
    assert blind.extra["model"] == "random scores" and learned.extra["model"].startswith("xgb both")
    for result in (blind, learned):
        log = result.extra["predictions"]["log"]
        assert log and all(r["trial"] >= 16 and r["n"] >= 1 and r["hops"] in ("1+2", "3") for r in log)
        # Each logged step's configs were measured after it started, in the order of the log.
        assert [r["trial"] for r in log] == sorted(r["trial"] for r in log)
        assert sum(r["n"] for r in log) <= len(result.trials) - 16
