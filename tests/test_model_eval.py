"""The offline evaluation: datasets read from a database, held-out splits, models against chance, transfer."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import SyntheticEvaluator, peak_at, run_search, small_matmul_space

from tensorgym.agents.model_eval import (
    Dataset, common_columns, evaluate, evaluate_transfer, model_specs, random_dataset, splits,
)
from tensorgym.agents.random_search import RandomAgent
from tensorgym.database import Database
from tensorgym.spaces import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.tuner import Tuner
from tensorgym.workloads import conv2d, matmul


@pytest.fixture(scope="module")
def space():
    return small_matmul_space()


def synthetic(space, n: int, seed: int = 0, optimum_seed: int = 1234) -> Dataset:
    perf = peak_at(space, space.sample(np.random.default_rng(optimum_seed)))
    configs = space.sample_many(np.random.default_rng(seed), n)
    return Dataset(space, configs, [perf(c) for c in configs])


def test_the_random_agent_draws_what_the_dataset_regenerates(space):
    """random_dataset relies on it: RandomAgent(seed s) measures sample_many(default_rng(s), N), in order."""
    tuner = Tuner(SyntheticEvaluator(space, lambda c: 1.0), budget=70)
    result = run_search(RandomAgent(batch_size=16), tuner, seed=5)
    assert [t.config for t in result.trials] == space.sample_many(np.random.default_rng(5), 70)


def test_random_dataset_reads_the_records_it_finds(space):
    db = Database(":memory:")
    perf = peak_at(space, space.sample(np.random.default_rng(3)))
    evaluator = SyntheticEvaluator(space, lambda c: None if perf(c) < 1e-3 else perf(c))
    run_search(RandomAgent(), Tuner(evaluator, budget=30), seed=2)
    for record in evaluator._records.values():
        db.commit(record)
    data = random_dataset(db, space, seeds=(2,), n=40)  # 10 of the 40 were never measured
    assert data.configs == space.sample_many(np.random.default_rng(2), 30)
    assert data.gflops == [evaluator.lookup(c).gflops for c in data.configs]
    assert all((g is None) == (m == 0.0) for g, m in zip(data.gflops, data.measured))
    db.close()


def test_splits_hold_out_the_same_configs_for_every_size():
    parts = splits(100, 30, count=3, seed=0)
    assert len(parts) == 3
    for part in parts:
        assert len(part.test) == 30 and len(part.train) == 70
        assert not set(part.test) & set(part.train) and set(part.test) | set(part.train) == set(range(100))
    assert not np.array_equal(parts[0].test, parts[1].test)
    with pytest.raises(ValueError, match="test_size"):
        splits(10, 10, count=1)


def test_evaluate_models_against_chance_on_a_smooth_landscape(space):
    data = synthetic(space, 240)
    specs = model_specs(["ansor", "log-shallow"], ["generic"])
    result = evaluate(data, specs, sizes=(32, 128, 400), n_splits=2, test_size=100)  # 400 does not fit: skipped
    table = {(r["model"], r["n"]): r for r in result.table()}
    assert {n for _, n in table} == {32, 128}
    assert len(result.rows) == 2 * 2 * len(specs)
    assert {r["test"] for r in result.rows} == {100}
    for model in ("ansor/generic", "log-shallow/generic"):
        assert table[(model, 128)]["spearman"] > 0.3 > abs(table[("random", 128)]["spearman"])
        assert table[(model, 128)]["spearman"] > table[(model, 32)]["spearman"] - 0.1
    assert "draft only" in {m for m, _ in table}  # the draft alone is a baseline row


def test_transfer_uses_the_features_layers_share():
    target = TilesSpace(matmul(64, 64, 64, name="mm64"), local_cpu())
    other = TilesSpace(matmul(64, 128, 32, name="mm-b"), local_cpu())
    conv = TilesSpace(conv2d(1, 16, 8, 8, 16, 3, 3, 1, 1, name="c"), local_cpu())
    names, cols = common_columns([synthetic(target, 4), synthetic(conv, 4)], "generic")
    assert "log2_S0_parallel" in names and not any(n.startswith("log2_i.") for n in names)
    assert [len(c) for c in cols] == [len(names)] * 2
    data, source = synthetic(target, 120), synthetic(other, 120, optimum_seed=7)
    result = evaluate_transfer(data, [source], model_specs(["ansor"], ["af"]), sizes=(0, 16), n_splits=2,
                               test_size=60)
    assert {(r["model"], r["n"]) for r in result.rows} == {("transfer:ansor/af", 0), ("transfer:ansor/af", 16)}
    with pytest.raises(ValueError, match="source"):
        evaluate_transfer(data, [], model_specs(["ansor"], ["af"]))


def test_unknown_setups_are_refused():
    with pytest.raises(ValueError, match="set-ups"):
        model_specs(["lambdamart"])
