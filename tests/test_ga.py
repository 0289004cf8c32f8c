"""The Ansor-style GA agent: budgets, determinism, operators, resume; one run on real kernels."""

from __future__ import annotations

from math import prod

import numpy as np
import pytest
from fakes import SyntheticEvaluator, peak_at, run_search, small_matmul_space, synthetic_tuner

import tensorgym
from tensorgym.agents.ga import (
    GAAgent, crossover, mutate_compute_location, mutate_parallel, mutate_tile_size, mutate_unroll,
)
from tensorgym.agents.random_search import RandomAgent
from tensorgym.tuner import Tuner

SMALL = dict(population=64, generations=2, batch_size=16, num_warmup_sample=16)


@pytest.fixture(scope="module")
def space():
    return small_matmul_space()


@pytest.mark.parametrize("budget", [1, 7, 64, 100])
def test_budget_respected_exactly(budget):
    tuner = synthetic_tuner(budget=budget)
    result = run_search(GAAgent(**SMALL), tuner)
    assert len(result.trials) == budget
    assert tuner.evaluator.measured == budget  # nothing measured beyond the budget
    configs = [t.config for t in result.trials]
    assert len(set(configs)) == budget
    assert all(tuner.space.is_valid(c) for c in configs)


def test_batches_of_batch_size_and_model_guided_after_warmup():
    tuner = synthetic_tuner(budget=40)
    result = run_search(GAAgent(**SMALL), tuner)
    assert result.extra["rounds"] == 3  # 16 + 16 + 8
    assert result.extra["model_guided_rounds"] == 2
    assert result.extra["model_fits"] == 2


def test_deterministic_per_seed():
    a = run_search(GAAgent(**SMALL), synthetic_tuner(budget=50), seed=3)
    b = run_search(GAAgent(**SMALL), synthetic_tuner(budget=50), seed=3)
    c = run_search(GAAgent(**SMALL), synthetic_tuner(budget=50), seed=4)
    assert [t.config for t in a.trials] == [t.config for t in b.trials]
    assert [t.config for t in a.trials] != [t.config for t in c.trials]


@pytest.mark.parametrize("features", ["generic", "af"])
def test_model_guidance_beats_random_search(space, features):
    """On a smooth landscape the model-guided rounds find better configs than random sampling."""
    perf = peak_at(space, space.sample(np.random.default_rng(99)))
    ga, rnd = [], []
    for seed in range(3):
        ga.append(run_search(GAAgent(features, population=256, batch_size=32, num_warmup_sample=32),
                      synthetic_tuner(space, perf, budget=128), seed).best_gflops)
        rnd.append(run_search(RandomAgent(), synthetic_tuner(space, perf, budget=128), seed).best_gflops)
    assert np.mean(ga) > np.mean(rnd)


def test_short_run_is_prefix_of_long_run_and_resumes_from_records(space):
    """A run cut after k trials, re-run with the same seed and records, replays them for free."""
    perf = peak_at(space, space.sample(np.random.default_rng(5)))
    evaluator = SyntheticEvaluator(space, perf)  # plays the database
    short = run_search(GAAgent(**SMALL), Tuner(evaluator, budget=23), seed=1)
    long = run_search(GAAgent(**SMALL), Tuner(evaluator, budget=45), seed=1)
    assert [t.config for t in long.trials[:23]] == [t.config for t in short.trials]
    assert not any(t.fresh for t in long.trials[:23]) and all(t.fresh for t in long.trials[23:])
    assert long.reused == 23 and long.measured == 22


def test_time_budget_ends_the_search():
    tuner = synthetic_tuner(budget=None, time_budget=0.5)  # no trial budget: only the clock ends it
    result = run_search(GAAgent(**SMALL), tuner)
    assert tuner.exhausted and len(result.trials) > 0


def test_mutate_tile_size_moves_a_divisor_between_levels(space):
    rng = np.random.default_rng(0)
    config = space.sample(rng)
    for _ in range(300):
        child = mutate_tile_size(space, config, rng)
        assert child is not None and child != config
        changed = [k for k in config if config[k] != child[k]]
        assert len(changed) == 1
        loop = changed[0]
        assert prod(child[loop]) == space.extents[loop]
        assert child[loop][-1] <= space.max_innermost
        diff = [i for i, (a, b) in enumerate(zip(config[loop], child[loop])) if a != b]
        assert len(diff) == 2  # one level divided by a factor, another multiplied by it
        assert space.is_valid(child)
        config = child


def test_other_rules(space):
    rng = np.random.default_rng(1)
    config = space.sample(rng)
    assert mutate_unroll(space, config, rng)["unroll"] != config["unroll"]
    assert mutate_compute_location(space, config, rng)["cache_write"] == 1 - config["cache_write"]
    for _ in range(100):
        child = mutate_parallel(space, config, rng)
        if child is None:
            continue
        (loop,) = [k for k in config if config[k] != child[k]]
        assert space.levels[loop] == 4  # a spatial loop
        assert config[loop][2:] == child[loop][2:]  # only the parallel level and S1 change
        assert space.is_valid(child)
        config = child


def test_crossover_takes_every_knob_from_a_parent(space):
    rng = np.random.default_rng(2)
    a, b = space.sample(rng), space.sample(rng)
    children = [crossover(a, b, rng) for _ in range(50)]
    for child in children:
        assert all(child[k] in (a[k], b[k]) for k in a)
        assert space.is_valid(child)
    assert len(set(children)) > 2


def test_constructor_errors():
    with pytest.raises(ValueError, match="features"):
        GAAgent("ast")
    with pytest.raises(ValueError, match="mutation_weights"):
        GAAgent(mutation_weights={"swap": 1.0})
    with pytest.raises(ValueError, match="mutation_prob"):
        GAAgent(mutation_prob=1.5)


@pytest.mark.slow
def test_real_measurements_and_resume(tmp_path, measurer):
    """On compiled kernels: exact budget, every trial in the database, and a re-run replays it for free."""
    db = tmp_path / "x.db"
    agent = GAAgent("af", population=64, generations=2, batch_size=4, num_warmup_sample=4)
    env = tensorgym.make_env(tensorgym.matmul(64, 64, 64), db=db, measurer=measurer)
    try:
        first = agent.tune(env, budget=6, seed=0)  # "interrupted" after 6 trials
        assert len(first.trials) == 6 and first.measured == 6
        assert first.best_gflops > 0
        full = agent.tune(env, budget=10, seed=0)
        assert [t.config for t in full.trials[:6]] == [t.config for t in first.trials]
        assert full.reused == 6 and full.measured == 4
        again = agent.tune(env, budget=10, seed=0)
        assert again.measured == 0 and [t.config for t in again.trials] == [t.config for t in full.trials]
        assert [t.gflops for t in again.trials] == [t.gflops for t in full.trials]
    finally:
        env.close()


def test_initial_population_is_a_population_of_random_configs_plus_the_best_measured(monkeypatch):
    sizes = []
    original = GAAgent._evolve

    def spy(self, tuner, rng, population, scorer, out_size):
        sizes.append((len(population), sum(tuner.seen(c) is not None for c in population)))
        return original(self, tuner, rng, population, scorer, out_size)

    monkeypatch.setattr(GAAgent, "_evolve", spy)
    run_search(GAAgent(**SMALL), synthetic_tuner(budget=48))
    # Round 1: 64 random; later rounds: 64 random + the best int(0.2 * 64) = 12 measured configs.
    assert sizes == [(64, 0), (76, 12), (76, 12)]


def test_prediction_log_per_round():
    result = run_search(GAAgent(**{**SMALL, "eps_greedy": 0.25}), synthetic_tuner(budget=48))
    log = result.extra["predictions"]["log"]
    assert [r["trial"] for r in log] == [0, 16, 32]
    assert log[0]["guided"] is False and log[0]["n"] == 0  # warm-up: random scores, nothing to test
    for entry in log[1:]:
        assert entry["guided"] is True and entry["n"] == 16 and -1 <= entry["rho"] <= 1
        assert entry["model_picks"] == 12 and entry["model_mean"] is not None and entry["random_mean"] is not None
        assert entry["pick"] <= entry["best"]
    assert result.extra["predictions"]["rounds"] == 3
    assert result.extra["model"] == "xgb both regression/log/none depth 4"


def test_the_opt_in_model_recalls_with_the_code_features():
    """``model="ansor-shallow", features="all"``: Ansor's target and weights, shallow trees, the code features."""
    result = run_search(GAAgent("all", model="ansor-shallow", **SMALL), synthetic_tuner(budget=48))
    assert result.extra["model"] == "xgb all regression/normalised/throughput depth 4"
    assert result.extra["features"] == "all" and result.extra["model_guided_rounds"] == 2


def test_random_model_ablation_makes_the_same_moves_blind():
    """ga-random-model: the same first (warm-up) batch as ga, then the same evolution on random scores."""
    from tensorgym.agents import make_agent

    ablation = make_agent("ga-random-model", **SMALL)
    assert isinstance(ablation, GAAgent) and ablation.model == "random" and ablation.name == "ga-random-model"
    ga = run_search(GAAgent(**SMALL), synthetic_tuner(budget=48), seed=2)
    blind = run_search(ablation, synthetic_tuner(budget=48), seed=2)
    assert [t.config for t in ga.trials[:16]] == [t.config for t in blind.trials[:16]]
    assert [t.config for t in ga.trials[16:]] != [t.config for t in blind.trials[16:]]
    assert blind.extra["model"] == "random scores" and blind.extra["model_guided_rounds"] == 2
    again = run_search(make_agent("ga-random-model", **SMALL), synthetic_tuner(budget=48), seed=2)
    assert [t.config for t in again.trials] == [t.config for t in blind.trials]  # deterministic per seed
    with pytest.raises(ValueError, match="model"):
        GAAgent(model="oracle")


def test_draft_model_guides_the_search(space):
    perf = peak_at(space, space.sample(np.random.default_rng(99)))
    result = run_search(GAAgent("both", model="draft", population=128, batch_size=32, num_warmup_sample=32),
                        synthetic_tuner(space, perf, budget=96), seed=0)
    assert len(result.trials) == 96 and "draft prior" in result.extra["model"]
