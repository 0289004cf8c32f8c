"""Gymnasium's conventions in the single-layer envs: typed classes, TimeLimit from the registry, autoreset
metadata, specs made of data, make_vec with one measurer, async refused, check_env.

The envs here measure with :class:`fakes.SyntheticMeasurer` (nothing is compiled), given explicitly or put
in place of the measurer that envs without one share (the default contexts' ``measurer_factory``,
:data:`tensorgym.context.DEFAULT_CONTEXTS`).
"""

from __future__ import annotations

import copy
import math
import typing
import warnings

import gymnasium as gym
import numpy as np
import pytest
from fakes import SyntheticMeasurer
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import TimeLimit

import tensorgym
from tensorgym.context import DEFAULT_CONTEXTS
from tensorgym.database import Database
from tensorgym.envs.base import DEFAULT_MAX_STEPS, ParallelTimingError, TuningEnv
from tensorgym.envs.network_env import NetworkEnv
from tensorgym.errors import TensorgymError

ID, SHAPE = "tensorgym/Matmul-v0", dict(M=48, N=64, K=32)


@pytest.fixture()
def shared_synthetic(monkeypatch):
    """The measurers that envs given no measurer= share are synthetic; returns those started."""
    started: list[SyntheticMeasurer] = []

    def factory(target):
        measurer = SyntheticMeasurer(target=target)
        started.append(measurer)
        return measurer

    monkeypatch.setattr(DEFAULT_CONTEXTS, "measurer_factory", factory)
    return started


def _first_allowed(info) -> int:
    return int(np.flatnonzero(info["action_mask"])[0])


def test_env_classes_are_typed_and_declare_next_step_autoreset():
    for cls in (TuningEnv, NetworkEnv):
        typed = [b for b in cls.__orig_bases__ if typing.get_origin(b) is gym.Env]
        assert [typing.get_args(b) for b in typed] == [(np.ndarray, np.int64)], cls
        assert cls.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
        assert "observation_space" in cls.__annotations__ and "action_space" in cls.__annotations__
    assert TuningEnv.metadata is not NetworkEnv.metadata  # each class edits only its own


def test_registered_ids_carry_max_episode_steps_and_time_limit_truncates(tmp_path):
    assert gym.spec(ID).max_episode_steps == DEFAULT_MAX_STEPS
    assert gym.spec("Conv2d-ResNet-R5-v0").max_episode_steps == DEFAULT_MAX_STEPS
    db = Database(tmp_path / "t.db")
    env = gym.make(ID, db=db, measurer=SyntheticMeasurer(), max_episode_steps=3, **SHAPE)
    assert isinstance(env, TimeLimit) and env.unwrapped.max_steps == math.inf  # no limit of its own
    _, info = env.reset(seed=0)
    flags = []
    for _ in range(3):
        _, _, terminated, truncated, info = env.step(_first_allowed(info))
        flags.append((terminated, truncated))
    assert flags == [(False, False), (False, False), (False, True)]
    # The env under the TimeLimit goes on: it does not cut episodes itself.
    assert env.unwrapped.step(_first_allowed(info))[3] is False
    env.close()
    db.close()


def test_max_steps_through_gym_make_is_a_time_limit(tmp_path):
    db = Database(tmp_path / "t.db")
    env = gym.make(ID, db=db, measurer=SyntheticMeasurer(), max_steps=np.int64(2), **SHAPE)
    limits = []
    layer = env
    while layer is not env.unwrapped:
        if isinstance(layer, TimeLimit):
            limits.append(layer._max_episode_steps)
        layer = layer.env
    assert limits == [DEFAULT_MAX_STEPS, 2]  # the registered one, and max_steps's inside it
    assert isinstance(env.unwrapped, TuningEnv) and env.unwrapped.max_steps == math.inf
    _, info = env.reset(seed=3)
    assert env.step(_first_allowed(info))[3] is False
    _, _, _, truncated, info = env.step(_first_allowed(info))
    assert truncated
    env.reset(seed=3)  # a new episode: the counts start again
    assert env.step(_first_allowed(info))[3] is False
    env.close()
    with pytest.raises(ValueError, match="max_steps"):
        gym.make(ID, db=db, measurer=SyntheticMeasurer(), max_steps=0, **SHAPE)
    # Built directly (no TimeLimit around it), the env cuts its episodes itself.
    direct = tensorgym.make_env(tensorgym.matmul(48, 64, 32), db=db, measurer=SyntheticMeasurer(), max_steps=2)
    _, info = direct.reset(seed=3)
    assert [direct.step(_first_allowed(info))[3] for _ in range(2)] == [False, True]
    assert tensorgym.make_env(tensorgym.matmul(48, 64, 32), db=db).max_steps == DEFAULT_MAX_STEPS
    direct.close()
    db.close()


def test_gym_make_passes_the_database_and_measurer_and_its_spec_holds_data(tmp_path):
    db = Database(tmp_path / "spec.db")
    measurer = SyntheticMeasurer()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a spec Gymnasium cannot copy is a warning ("An exception occurred")
        env = gym.make(ID, db=db, measurer=measurer, **SHAPE)
        base_env = env.unwrapped
        assert base_env.measurer is measurer and base_env.database is db
        spec = env.spec  # every wrapper deep-copies the spec under it
    assert spec.kwargs["db"] == db.path and "measurer" not in spec.kwargs
    assert spec.max_episode_steps == DEFAULT_MAX_STEPS
    copy.deepcopy(spec)
    env.reset(seed=0)
    assert len(db) >= 1 and measurer.measured  # the given objects measured and stored
    again = gym.make(spec)  # made again from the spec: the same database file, the shared measurer
    assert again.unwrapped.database.path == db.path and again.unwrapped.database is not db
    again.close()
    env.close()
    assert len(db) >= 1  # still open: the env closes only what it opened
    db.close()
    with pytest.raises(TypeError):
        copy.deepcopy(db)  # an open connection is not copied, and nothing asks for it any more


def test_make_vec_sync_envs_share_one_measurer_and_record(tmp_path, shared_synthetic):
    db = str(tmp_path / "vec.db")
    vec = gym.make_vec(ID, num_envs=4, vectorization_mode="sync", db=db, **SHAPE)
    assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    obs, info = vec.reset(seed=0)
    assert obs.shape[0] == 4
    measurers = [env.unwrapped.measurer for env in vec.envs]
    assert len(shared_synthetic) == 1 and all(m is shared_synthetic[0] for m in measurers)
    shared = DEFAULT_CONTEXTS.get(vec.envs[0].unwrapped.target)
    assert shared.users == 4 and all(env.unwrapped.context is not shared for env in vec.envs)  # a database each
    actions = np.array([int(np.flatnonzero(mask)[0]) for mask in info["action_mask"]])
    _, rewards, terminated, truncated, info = vec.step(actions)
    assert rewards.shape == (4,) and not terminated.any() and not truncated.any()
    with Database(db, readonly=True) as records:
        # Every env's start and move went through the one measurer into the one database.
        assert len(shared_synthetic[0].measured) == len(records) >= 4
    vec.close()
    assert shared.users == 0 and DEFAULT_CONTEXTS.get(shared.target) is None  # the last env gave it back


def test_make_vec_with_a_given_measurer_shares_it(tmp_path):
    measurer = SyntheticMeasurer()
    vec = gym.make_vec(ID, num_envs=4, vectorization_mode="sync", db=str(tmp_path / "v.db"), measurer=measurer,
                       **SHAPE)
    assert all(env.unwrapped.measurer is measurer for env in vec.envs)
    vec.reset(seed=1)
    vec.step(np.zeros(4, dtype=np.int64))
    assert len(measurer.measured) >= 4
    vec.close()


def test_async_vectorisation_of_measuring_envs_is_refused(tmp_path):
    with pytest.raises(ParallelTimingError, match="overlap on the cores") as caught:
        gym.make_vec(ID, num_envs=2, vectorization_mode="async", db=str(tmp_path / "a.db"),
                     measurer=SyntheticMeasurer(), **SHAPE)
    assert isinstance(caught.value, TensorgymError) and "\n" not in str(caught.value)
    with pytest.raises(ParallelTimingError):
        gym.vector.AsyncVectorEnv([lambda: gym.make(ID, db=":memory:", measurer=SyntheticMeasurer(), **SHAPE)] * 2)


def test_async_vectorisation_replays_without_timing(tmp_path):
    """The replay backend measures nothing: its envs may run in parallel processes."""
    db = str(tmp_path / "replay.db")
    env = gym.make(ID, db=db, measurer=SyntheticMeasurer(), **SHAPE)
    _, info = env.reset(seed=0)
    for _ in range(12):
        _, _, _, _, info = env.step(_first_allowed(info))
    env.close()
    vec = gym.make_vec(ID, num_envs=2, vectorization_mode="async", db=db, backend="replay", **SHAPE)
    try:
        obs, info = vec.reset(seed=0)
        assert obs.shape[0] == 2
        vec.step(np.array([int(np.flatnonzero(mask)[0]) for mask in info["action_mask"]]))
    finally:
        vec.close()


def test_check_env_passes_on_the_tile_hop_env(tmp_path, shared_synthetic):
    """With every check: the render and close checks make the env again from its spec (the same database
    file; the measurer that envs without one share, synthetic here)."""
    measurer = SyntheticMeasurer()
    env = gym.make(ID, db=str(tmp_path / "check.db"), measurer=measurer, render_mode="ansi", **SHAPE)
    check_env(env.unwrapped)
    assert measurer.measured
    env.close()
