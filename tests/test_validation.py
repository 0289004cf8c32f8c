"""Bad input gets a clear, documented error before anything is built; good input of any numeric kind works."""

from __future__ import annotations

import json
import random
import time

import gymnasium as gym
import numpy as np
import pytest

import tensorgym  # noqa: F401 - registers the ids
from fakes import SyntheticMeasurer, synthetic_tuner
from tensorgym.catalog import make_agent
from tensorgym.config import Config, ConfigError
from tensorgym.errors import InvalidArgumentError, InvalidTypeError, TensorgymError
from tensorgym.factors import count_factorizations, factorizations, nth_factorization
from tensorgym.spaces import SpaceError, TilesSpace
from tensorgym.target import local_cpu
from tensorgym.tuner import check_budget
from tensorgym.workloads import MAX_EXTENT, WorkloadError, conv2d, matmul


def small_env(**kwargs):
    return gym.make("tensorgym/Matmul-v0", M=48, N=64, K=32, db=":memory:", measurer=SyntheticMeasurer(), **kwargs)


# -- configs and spaces -------------------------------------------------------------------------------------------
def test_a_list_is_not_a_config_even_through_reset():
    with pytest.raises(ConfigError, match="mapping"):
        Config([1, 2])
    env = small_env()
    with pytest.raises(ConfigError, match="mapping"):
        env.reset(options={"config": [1, 2]})
    with pytest.raises(InvalidArgumentError, match="unknown reset option"):
        env.reset(options={"start": 1})
    env.close()


@pytest.mark.parametrize("method", ["encode", "neighbours", "hop_mask", "features", "scaled_features",
                                    "normalised_features", "generic_features", "describe", "info", "candidate_of"])
def test_space_methods_refuse_configs_of_another_shape(method):
    space = TilesSpace(matmul(48, 64, 32), local_cpu())
    valid = space.sample(np.random.default_rng(0))
    broken = [Config({"i": [1, 2, 3, 4]}), valid.replace(i=(2, 2, 2, 2)), valid.replace(unroll=3), valid.to_json()]
    for config in broken:
        with pytest.raises(SpaceError):
            getattr(space, method)(config)
    getattr(space, method)(valid)


def test_hops_and_coordinates_are_checked():
    space = TilesSpace(matmul(48, 64, 32), local_cpu())
    config = space.sample(np.random.default_rng(0))
    with pytest.raises(InvalidArgumentError, match="coordinate"):
        space.hop(config, len(space.coordinates), 1)
    with pytest.raises(InvalidArgumentError, match="direction"):
        space.hop(config, 0, 2)
    with pytest.raises(InvalidArgumentError, match="hops must be <= 4"):
        space.neighbours(config, 9)
    assert space.neighbours(config, np.int64(1)) == space.neighbours(config, 1)


@pytest.mark.parametrize("options, error, message", [
    ({"unroll_choices": "0,16"}, InvalidTypeError, "list of auto-unroll steps"),
    ({"unroll_choices": (0, -16)}, InvalidArgumentError, "distinct integers >= 0"),
    ({"unroll_choices": ()}, InvalidArgumentError, "distinct integers"),
    ({"max_innermost": 0}, InvalidArgumentError, "max_innermost must be >= 1"),
    ({"max_innermost": 2.5}, InvalidTypeError, "max_innermost must be an integer"),
    ({"measurer": "x"}, InvalidTypeError, "measurer must be a tensorgym Measurer"),
    ({"max_steps": 0}, InvalidArgumentError, "max_steps"),
    ({"backend": "x"}, InvalidArgumentError, "backend"),
    ({"render_mode": "human"}, InvalidArgumentError, "render_mode"),
    ({"target": 5}, TensorgymError, "target"),
    ({"M": 48}, InvalidArgumentError, "takes no option M"),
])
def test_env_kwargs_are_checked(options, error, message):
    kwargs = {"db": ":memory:", "measurer": SyntheticMeasurer(), **options}
    with pytest.raises(error, match=message):
        gym.make("Matmul-BERT-M2-v0", **kwargs)


def test_numpy_numbers_work_end_to_end(tmp_path):
    """Shapes, steps and budgets given as NumPy scalars: through gym.make, reset (the database stores the
    workload as JSON), a tuning run, and its saved result."""
    db = tmp_path / "np.db"
    env = gym.make("tensorgym/Conv2d-v0", C=np.int64(8), H=np.int32(10), F=np.int64(16), R=np.int64(3),
                   stride=np.int64(1), db=str(db), measurer=SyntheticMeasurer(), max_steps=np.int64(4),
                   unroll_choices=np.array([0, 16]), max_innermost=np.int64(32))
    obs, info = env.reset(seed=0)
    obs, reward, *_ = env.step(np.int64(int(np.flatnonzero(info["action_mask"])[0])))
    result = make_agent("random", batch_size=np.int64(2)).tune(env, budget=np.int64(3), time_budget=np.float32(60),
                                                               seed=np.int64(1))
    result.save(tmp_path / "run.json")
    assert json.loads((tmp_path / "run.json").read_text())["budget"] == 3
    workload = env.unwrapped.workload
    assert type(workload.C) is int and workload.key == conv2d(1, 8, 10, 10, 16, 3, 3).key
    env.close()


# -- extents -----------------------------------------------------------------------------------------------------
def test_huge_extents_are_refused_at_once():
    t0 = time.monotonic()
    with pytest.raises(WorkloadError, match="largest extent"):
        gym.make("tensorgym/Matmul-v0", M=99999999999, N=1, K=1, db=":memory:")
    with pytest.raises(WorkloadError, match="2\\^28"):
        matmul(MAX_EXTENT, MAX_EXTENT, 1)
    with pytest.raises(WorkloadError, match="FLOPs"):
        conv2d(1, 64, 1024, 1024, 64, 63, 63, padding=0)  # 3e13 FLOPs, every tensor within bounds
    matmul(16384, 16384, 16384)  # the largest square matmul
    assert time.monotonic() - t0 < 1.0


def test_the_largest_extent_makes_an_env_and_samples_quickly():
    t0 = time.monotonic()
    env = gym.make("tensorgym/Matmul-v0", M=14414400, N=1, K=1, db=":memory:", measurer=SyntheticMeasurer())
    space = env.unwrapped.search_space
    configs = space.sample_many(np.random.default_rng(0), 20)
    space.neighbours(configs[0])
    env.close()
    assert len(configs) == 20 and time.monotonic() - t0 < 30.0


def test_factorisations_are_drawn_without_listing_them():
    for n, parts, last in [(12, 2, 64), (3072, 4, 64), (720720, 4, 64), (1, 4, 64), (96, 4, 1)]:
        listed = factorizations(n, parts, last)
        assert count_factorizations(n, parts, last) == len(listed)
        assert [nth_factorization(n, parts, last, i) for i in range(0, len(listed), 37)] == list(listed[::37])
    assert count_factorizations(14414400, 4, 64) > 100_000  # never listed: a draw is instant


# -- the Tuner -----------------------------------------------------------------------------------------------------
def test_tuner_measure_takes_lists_of_configs_dicts_or_json():
    tuner = synthetic_tuner(budget=8)
    configs = tuner.space.sample_many(np.random.default_rng(0), 3)
    records = tuner.measure([configs[0], configs[1].to_json(), configs[2].key])
    assert [r.config for r in records] == configs
    with pytest.raises(InvalidTypeError, match="pass \\[config\\]"):
        tuner.measure(configs[0].to_json())
    with pytest.raises(InvalidTypeError, match="list of configs"):
        tuner.measure(configs[0].key)
    with pytest.raises(SpaceError):
        tuner.measure([{"i": 3}])
    with pytest.raises(InvalidTypeError):
        tuner.measure(5)
    assert len(tuner.trials) == 3  # nothing was measured by the refused calls


def test_tuner_sampling_needs_a_numpy_generator():
    tuner = synthetic_tuner()
    with pytest.raises(InvalidTypeError, match="numpy.random.Generator"):
        tuner.sample(random.Random(0))
    with pytest.raises(InvalidArgumentError, match="n must be <="):
        tuner.sample(np.random.default_rng(0), 2**40)
    assert len(tuner.sample(np.random.default_rng(0), np.int64(2))) == 2


@pytest.mark.parametrize("budget, time_budget", [(None, float("nan")), (None, float("inf")), (4, float("nan")),
                                                 (0, None), (True, None), (None, None), (4, -1.0), ("4", None)])
def test_budgets_that_never_end_or_make_no_sense_are_refused(budget, time_budget):
    with pytest.raises(InvalidArgumentError):
        check_budget(budget, time_budget)


# -- agents ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, options, error", [
    ("ga", {"population": "2048"}, InvalidTypeError), ("ga", {"mutation_prob": float("nan")}, InvalidArgumentError),
    ("ga", {"model_options": {"depth": 3}}, InvalidArgumentError), ("dgd", {"initial_samples": None}, InvalidTypeError),
    ("dgd", {"tolerance": 2}, InvalidArgumentError), ("optuna", {"storage": 5}, InvalidTypeError),
    ("optuna", {"storage": "study.db"}, InvalidArgumentError), ("optuna", {"sampler": "x"}, InvalidArgumentError),
    ("random", {"batch_size": 0}, InvalidArgumentError), ("random", {"size": 2}, InvalidArgumentError),
])
def test_agent_options_are_checked(name, options, error):
    with pytest.raises(error):
        make_agent(name, **options)
