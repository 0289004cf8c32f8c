"""Cost models scored on landscapes: the dataset, the metrics where the answer is known, transfer, code features.

Small synthetic landscapes: bounded tiles spaces of tiny matmuls on a constructed Zen 4, every config
"measured" by a smooth function of its coordinates (a few failed), exported as a real :class:`Landscape`.
Nothing is compiled or timed.
"""

from __future__ import annotations

import numpy as np
import pytest
from fakes import SYMBOLIC_CPU, smooth_perf, synthetic_record

from tensorgym.agents.code_features import CODE_FEATURE_NAMES, code_features, has_code_features
from tensorgym.agents.cost_model import SETUPS, CostModel, Featurizer
from tensorgym.agents.model_eval import ModelSpec
from tensorgym.agents.model_landscape import (
    EnsembleSpec, FixedScores, TransferSpec, batch_rounds, evaluate_landscape, landscape_dataset, noise_ceiling,
)
from tensorgym.catalog import make_space
from tensorgym.config import Config
from tensorgym.database import Database
from tensorgym.landscape import Landscape, export_landscape
from tensorgym.workloads import matmul

BOUNDS = {"i.1": (1, 2), "i.2": (1,), "i.3": (1, 2, 4), "j.1": (1, 2), "j.2": (1,), "j.3": (8, 16), "k.1": (1, 4, 8),
          "unroll": (0, 16, 64), "cache_write": (0, 1)}  # 432 configs


def tiny_space(m: int = 16, n: int = 32, k: int = 16, name: str = "tiny"):
    return make_space("tiles", matmul(m, n, k, name=name), SYMBOLIC_CPU, bounds=BOUNDS)


def synthetic_landscape(space, seed: int = 0, failed_every: int = 0) -> Landscape:
    """Every config of ``space`` with a smooth GFLOP/s (every ``failed_every``-th one failed, if > 0)."""
    perf = smooth_perf(space, seed=seed)
    db = Database(":memory:")
    db.register(space.workload, space.target)
    for i, config in enumerate(space.configs()):
        failed = failed_every and i % failed_every == failed_every - 1
        db.commit(synthetic_record(space, config, None if failed else perf(config)))
    try:
        return export_landscape(db, space, llvm_version="test")
    finally:
        db.close()


@pytest.fixture(scope="module")
def landscape():
    return synthetic_landscape(tiny_space(), failed_every=37)


@pytest.fixture(scope="module")
def dataset(landscape):
    return landscape_dataset(landscape)


# -- the dataset --------------------------------------------------------------------------------------------------
def test_a_landscape_becomes_a_dataset_of_every_config(landscape, dataset):
    assert len(dataset) == len(landscape) == 432
    assert dataset.configs == list(landscape.configs) and dataset.label == landscape.workload_label
    failed = ~landscape.ok
    assert failed.sum() == 432 // 37
    assert all(dataset.gflops[i] is None for i in np.flatnonzero(failed))
    assert dataset.measured[failed].tolist() == [0.0] * int(failed.sum())  # failed configs count as 0
    ok = np.flatnonzero(landscape.ok)
    np.testing.assert_allclose(dataset.measured[ok], landscape.scores[ok])


# -- the metrics where the answer is known -------------------------------------------------------------------------
def test_perfect_constant_and_reversed_scores(dataset):
    truth = tuple(dataset.measured)
    specs = [FixedScores("perfect", truth), FixedScores("constant", (1.0,) * len(truth)),
             FixedScores("reversed", tuple(-v for v in truth))]
    result = evaluate_landscape(dataset, specs, sizes=(32, 128), seeds=range(3))
    table = {(r["model"], r["n"]): r for r in result.table()}
    for n in (32, 128):
        perfect, constant, reversed_ = table[("perfect", n)], table[("constant", n)], table[("reversed", n)]
        assert perfect["recall10"] == 1.0 and perfect["best_of_1"] == 1.0
        assert perfect["spearman"] > 0.99 and perfect["top_quartile_spearman"] > 0.99
        assert constant["spearman"] == 0.0 and constant["top_quartile_spearman"] == 0.0
        assert constant["recall10"] < 0.35  # chance: the first configs of a random order
        assert reversed_["recall10"] == 0.0 and reversed_["spearman"] < -0.99


def test_an_ensemble_averages_its_members_ranks(dataset):
    truth = tuple(dataset.measured)
    perfect, reversed_ = FixedScores("perfect", truth), FixedScores("reversed", tuple(-v for v in truth))
    specs = [EnsembleSpec("twice perfect", (perfect, perfect)), EnsembleSpec("cancelled", (perfect, reversed_)),
             EnsembleSpec("bag", (ModelSpec("m", "all", "xgb", (("setup", "ansor-shallow"),)),) * 2)]
    table = {r["model"]: r for r in evaluate_landscape(dataset, specs, sizes=(64,), seeds=[0]).table()}
    assert table["twice perfect"]["recall10"] == 1.0
    assert table["cancelled"]["spearman"] == 0.0  # every config's average rank is the same
    assert table["bag"]["spearman"] > 0.5


def test_every_model_is_scored_on_every_config_it_did_not_see(dataset):
    specs = [ModelSpec("random", "generic", "random"), FixedScores("perfect", tuple(dataset.measured))]
    result = evaluate_landscape(dataset, specs, sizes=(32, 64, 430), seeds=range(2))  # 430 leaves too few: skipped
    assert {(r["n"], r["test"]) for r in result.rows} == {(32, 400), (64, 368)}
    assert len(result.rows) == 2 * 2 * len(specs)
    assert {r["split"] for r in result.rows} == {0, 1}
    with pytest.raises(ValueError, match="scores"):
        evaluate_landscape(dataset, [FixedScores("short", (1.0, 2.0))], sizes=(32,), seeds=[0])


def test_the_agents_model_learns_the_landscape(dataset):
    specs = [ModelSpec("ansor-shallow/all", "all", "xgb", (("setup", "ansor-shallow"),)),
             ModelSpec("log-shallow/both", "both", "xgb", (("setup", "log-shallow"),)),
             ModelSpec("random", "generic", "random")]
    table = {(r["model"], r["n"]): r for r in evaluate_landscape(dataset, specs, sizes=(128,), seeds=range(3)).table()}
    for model in ("ansor-shallow/all", "log-shallow/both"):
        assert table[(model, 128)]["spearman"] > 0.6
        assert table[(model, 128)]["recall10"] > table[("random", 128)]["recall10"] + 0.2


def test_noise_ceiling_of_a_landscape_without_noise(landscape):
    """One sample per config: each synthetic config was timed once, so re-sampling gives the median back."""
    ceiling = noise_ceiling(landscape, seeds=range(2))
    assert [c["recall10"] for c in ceiling] == [1.0, 1.0]


def test_batch_rounds_count_the_true_top(landscape):
    order = np.argsort(-landscape.scores, kind="stable")
    configs = [landscape.configs[i] for i in order[:10]] + [landscape.configs[i] for i in order[-10:]]
    rounds = [{"trial": 0, "n": 10, "rho": 0.5}, {"trial": 10, "n": 10, "rho": 0.1}, {"trial": 5, "n": 10}]
    joined = batch_rounds(rounds, configs, landscape)
    assert [r["true_top"] for r in joined] == [1.0, 0.0, 0.5]
    assert joined[0]["rho"] == 0.5 and joined[0]["true_mean"] == pytest.approx(landscape.scores[order[:10]].mean())


# -- transfer -----------------------------------------------------------------------------------------------------
def test_transfer_learns_from_other_layers_only(dataset):
    other = landscape_dataset(synthetic_landscape(tiny_space(32, 16, 32, name="other"), seed=3), label="other")
    specs = [TransferSpec("warm", "all", "warm", (("setup", "ansor-shallow"),)),
             TransferSpec("pooled", "all", "pooled", (("setup", "ansor-shallow"),), target_weight=5.0)]
    result = evaluate_landscape(dataset, specs, sizes=(32,), seeds=range(2), sources=[other])
    assert {r["model"] for r in result.rows} == {"warm", "pooled"}
    assert all(-1 <= r["spearman"] <= 1 for r in result.rows)
    with pytest.raises(ValueError, match="leave-one-layer-out"):
        evaluate_landscape(dataset, specs, sizes=(32,), seeds=[0], sources=[other, dataset])
    with pytest.raises(ValueError, match="source layer"):
        evaluate_landscape(dataset, specs, sizes=(32,), seeds=[0])
    with pytest.raises(ValueError, match="method"):
        TransferSpec("x", method="finetune")


def test_row_weights_decide_which_rows_count(dataset):
    """Rows weighted 0 are ignored: their reversed labels cannot undo what the other rows teach."""
    x = Featurizer(dataset.space, "all").matrix(dataset.configs)
    rows = np.arange(len(dataset))
    truth = dataset.measured
    gflops = [v if v > 0 else None for v in truth] + [float(truth.max() + 1 - v) for v in truth]
    doubled = np.vstack([x, x])
    for weight, sign in ((0.0, 1), (1.0, -1)):
        weights = np.r_[np.ones(len(rows)), np.full(len(rows), weight)]
        model = CostModel(dataset.space, "all", setup="ansor-shallow").train_matrix(doubled, gflops, weights=weights)
        rho = np.corrcoef(model.predict_matrix(x), truth)[0, 1]
        assert (rho > 0.5) if sign > 0 else (rho < 0.5)
    with pytest.raises(ValueError, match="weights"):
        CostModel(dataset.space, "all").train_matrix(x, list(truth), weights=np.ones(3))


# -- code features ------------------------------------------------------------------------------------------------
def test_code_features_of_known_configs():
    space = tiny_space()
    names = dict.fromkeys(CODE_FEATURE_NAMES)
    # Innermost first, the vectorised j.3 left out: i.3 = 4 (S3), k.1 = 8 (R1), k.0 = 2 (R0), j.1 = i.1 = 2 (S1).
    base = {"i": (2, 2, 1, 4), "j": (1, 2, 1, 16), "k": (2, 8), "cache_write": 0}
    values = {u: dict(zip(names, code_features(space, Config({**base, "unroll": u})))) for u in (0, 16, 64)}
    assert values[0]["unrolled_loops"] == 0 and values[0]["log2_rolled_extent"] == 2  # nothing: i.3 stays a loop
    assert values[16]["log2_unrolled_steps"] == 2 and values[16]["s3_unrolled"] == 1  # i.3 (4); 4 x 8 > 16
    assert values[16]["r1_unrolled"] == 0 and values[16]["log2_rolled_extent"] == 3
    assert values[64]["log2_unrolled_steps"] == 6 and values[64]["r1_unrolled"] == 1  # 4 x 8 x 2 (k.0) = 64
    assert values[64]["unrolled_loops"] == 3 and values[64]["log2_rolled_extent"] == 1  # j.1 = 2 left: 128 > 64
    assert values[64]["log2_unrolled_vector_ops"] == 6  # 64 steps x 1 vector of 16 lanes


def test_all_features_add_the_code_features_where_the_space_has_them(dataset):
    space = dataset.space
    assert has_code_features(space)
    featurizer = Featurizer(space, "all")
    both = Featurizer(space, "both")
    assert featurizer.names == both.names + CODE_FEATURE_NAMES
    row = featurizer.row(dataset.configs[5])
    np.testing.assert_array_equal(row[:len(both.names)], both.row(dataset.configs[5]))
    assert len(row) == len(featurizer.names)


def test_the_agents_default_model_and_the_opt_in_are_setups_the_models_know():
    """The default stays what the recorded leaderboards ran (log-shallow, both); ansor-shallow/all is opt-in."""
    from tensorgym.agents.dgd import DGDAgent
    from tensorgym.agents.ga import GAAgent

    assert GAAgent.default_model == DGDAgent.default_model == "log-shallow" and "ansor-shallow" in SETUPS
    assert GAAgent().features == DGDAgent().features == "both"
    for agent in (GAAgent("all", model="ansor-shallow"), DGDAgent("all", model="ansor-shallow")):
        assert agent.features == "all" and agent.model == "ansor-shallow"
