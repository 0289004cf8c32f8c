"""The XGBoost cost model: features, training target, determinism, and ranking quality (Kendall tau)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fakes import peak_at, small_matmul_space

import tensorgym
from tensorgym.agents.cost_model import CostModel, holdout_kendall_tau, normalised_targets
from tensorgym.spaces import Config


@pytest.fixture(scope="module")
def space():
    return small_matmul_space()


@pytest.fixture(scope="module")
def landscape(space):
    """300 random configs of a 64^3 matmul scored by a smooth synthetic landscape."""
    rng = np.random.default_rng(7)
    perf = peak_at(space, space.sample(np.random.default_rng(1234)))
    configs = space.sample_many(rng, 300)
    return configs, [perf(c) for c in configs]


def test_generic_features_of_a_known_config(space):
    config = Config({"i": (2, 4, 1, 8), "j": (1, 2, 2, 16), "k": (8, 8), "unroll": 16, "cache_write": 1})
    names = space.generic_feature_names
    values = dict(zip(names, space.generic_features(config)))
    assert len(names) == len(space.generic_features(config))
    assert values["log2_i.0"] == 1 and values["log2_i.3"] == 3 and values["log2_j.3"] == 4
    assert values["log2_S0_parallel"] == math.log2(2 * 1)
    assert values["log2_S1"] == math.log2(4 * 2)
    assert values["log2_S3"] == math.log2(8 * 16)
    assert values["log2_R0"] == 3 and values["log2_R1"] == 3
    assert values["log2_S1S2S3"] == math.log2(4 * 1 * 8 * 2 * 2 * 16)
    assert values["log2_R1S3"] == math.log2(8 * 8 * 16)
    assert values["log2_vector_len"] == 4
    assert values["log2_unroll"] == math.log2(17)
    assert values["cache_write"] == 1.0


def test_analytical_features_are_logged_space_features(space):
    config = space.sample(np.random.default_rng(0))
    raw = space.features(config)
    logged = space.scaled_features(config)
    names = list(space.feature_names)
    assert logged[names.index("oi_l1")] == pytest.approx(math.log2(1 + raw[names.index("oi_l1")]))
    assert logged[names.index("lane_util")] == raw[names.index("lane_util")]


def test_targets_normalised_by_best_and_failures_zero():
    assert list(normalised_targets([50.0, None, 100.0, float("nan"), 0.0])) == [0.5, 0.0, 1.0, 0.0, 0.0]
    assert list(normalised_targets([None, None])) == [0.0, 0.0]


def test_fit_predict_update_and_determinism(space, landscape):
    configs, gflops = landscape
    a = CostModel(space, "generic").fit(configs[:100], gflops[:100])
    b = CostModel(space, "generic").fit(configs[:100], gflops[:100])
    pa, pb = a.predict(configs[100:]), b.predict(configs[100:])
    assert pa.shape == (200,) and np.array_equal(pa, pb)
    assert a.num_samples == 100 and a.fits == 1
    a.update(configs[100:150], gflops[100:150])
    assert a.num_samples == 150 and a.fits == 2
    a.update(configs[:10], [None] * 10)  # re-measured as failures: replaced, not added
    assert a.num_samples == 150
    assert a.predict([]).shape == (0,)


def test_model_ranks_better_than_random_on_synthetic_landscape(space, landscape):
    configs, gflops = landscape
    for features in ("generic", "af"):
        tau = holdout_kendall_tau(space, configs, gflops, features=features, seed=0)
        assert tau > 0.2, (features, tau)
    # A model trained on shuffled targets has nothing to learn: its tau is near 0.
    shuffled = list(np.random.default_rng(3).permutation(gflops))
    assert abs(holdout_kendall_tau(space, configs, shuffled, seed=0)) < 0.2


def test_user_errors(space, landscape):
    configs, gflops = landscape
    with pytest.raises(ValueError, match="features"):
        CostModel(space, "ast")
    with pytest.raises(RuntimeError, match="fit"):
        CostModel(space).predict(configs[:3])
    with pytest.raises(ValueError, match="values"):
        CostModel(space).fit(configs[:3], gflops[:2])
    with pytest.raises(ValueError, match="too few"):
        holdout_kendall_tau(space, configs[:2], gflops[:2])


@pytest.mark.slow
def test_model_ranks_real_measurements(tmp_path, measurer):
    """Kendall tau > 0 on held-out splits of real, compiled and timed kernels.

    With a few dozen training kernels the tau of one split is noisy (it ranged
    from -0.17 to 0.29 over splits of 60 kernels), so 120 kernels are recorded
    and the mean over five 70/30 splits must be positive.
    """
    env = tensorgym.make_env(tensorgym.matmul(128, 128, 128), db=tmp_path / "x.db", measurer=measurer)
    try:
        space = env.search_space
        configs = space.sample_many(np.random.default_rng(11), 120)
        records = env.evaluator.evaluate(configs)
        assert sum(r.ok for r in records) >= 100
        gflops = [r.gflops if r.ok else None for r in records]
        for features in ("generic", "af"):
            taus = [holdout_kendall_tau(space, configs, gflops, features=features, train_fraction=0.7, seed=s)
                    for s in range(5)]
            assert np.mean(taus) > 0, (features, taus)
    finally:
        env.close()
