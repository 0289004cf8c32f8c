"""The network env: Gymnasium's and stable-baselines3's checkers, masks, rewards, replay, registered ids."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from fakes import SyntheticMeasurer
from gymnasium.utils.env_checker import check_env

from tensorgym import catalog
from tensorgym.database import Database
from tensorgym.envs.network_env import CANDIDATE_FEATURES, TASK_FEATURES, NetworkEnv, relative_reduction
from tensorgym.errors import InvalidArgumentError
from tensorgym.networks import Network
from tensorgym.workloads import conv2d, matmul

TOY = Network.from_pairs("toy", [(matmul(64, 64, 64, name="a"), 2), (matmul(16, 16, 16, name="z"), 0),
                                 (conv2d(1, 8, 16, 16, 16, 3, 3, name="c"), 3), (matmul(1, 1, 1, name="one"), 1)])


@pytest.fixture(autouse=True)
def candidates_space(monkeypatch):
    """The ``tiles`` space with one candidate per unroll choice (4): multi-candidate tasks."""
    monkeypatch.setitem(catalog.SPACES, "tiles", "fakes:CandidateTilesSpace")


def _env(db=None, **kwargs) -> NetworkEnv:
    kwargs.setdefault("measurer", SyntheticMeasurer())
    kwargs.setdefault("agent", "random")
    kwargs.setdefault("measure_per_round", 8)
    return NetworkEnv(TOY, db=db if db is not None else Database(":memory:"), **kwargs)


def test_gymnasium_and_sb3_env_checkers_pass():
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    # Through gym.make: the spec says the env is nondeterministic (an episode starts where the last one
    # ended), so the checker does not expect two resets with one seed to give one observation.
    env = gym.make("tensorgym/Network-v0", network=TOY, db=Database(":memory:"), measurer=SyntheticMeasurer(),
                   agent="random", measure_per_round=8, render_mode="ansi", kappa=0.5).unwrapped
    # (The render check makes the env again from its spec: a new in-memory database, a real measurer.)
    check_env(env, skip_render_check=True)
    assert env.render().startswith("toy step")
    sb3_check_env(env)
    env.close()


def test_spaces_and_masks_hide_weight_zero_dead_and_pruned_actions():
    env = _env(kappa=0.25, measure_per_round=12)  # 3 trials per candidate in the warm-up
    assert env.action_space.n == 4 * 4
    assert env.observation_space.shape == (4 * (len(TASK_FEATURES) + 4 * len(CANDIDATE_FEATURES)),)
    obs, info = env.reset(seed=0)
    mask = info["action_mask"].reshape(4, 4)
    assert not mask[1].any()  # weight 0: never tuned
    # "one" (matmul 1x1x1) has 2 configs per candidate (cache_write 0/1): its warm-up round ran dry.
    assert not mask[3].any() and env._tuner.tasks[3].dead
    assert mask[0].sum() == mask[2].sum() == 1  # kappa 0.25 of 4 candidates: one kept per task
    rows = obs.reshape(4, -1)
    assert rows[1, 0] == 0 and rows[3, 0] == 0 and rows[0, 0] == 1 and rows[2, 0] == 1  # the "live" feature
    assert np.array_equal(env.action_masks(), info["action_mask"])
    obs, reward, terminated, truncated, info = env.step(1 * 4 + 0)  # a masked action
    assert reward == -1.0 and info["status"] == "masked" and info["trials"] == 12 + 12 + 8


def test_reward_is_the_relative_reduction_of_the_network_estimate():
    env = _env()
    _, info = env.reset(seed=1)
    before = info["estimate_s"]
    total = 0.0
    for _ in range(6):
        action = int(np.flatnonzero(env.action_masks())[0])
        _, reward, _, _, info = env.step(action)
        assert reward == pytest.approx((before - info["estimate_s"]) / before) and reward >= 0
        assert info["round_trials"] == 8 and info["task"] == action // 4
        total += reward
        before = info["estimate_s"]
    assert relative_reduction(None, 2.0) == 1.0 and relative_reduction(None, None) == 0.0
    env.close()


def test_episodes_are_truncated_after_max_steps():
    env = _env(max_steps=3)  # built directly, with max_steps: the env cuts its episodes itself
    env.reset(seed=0)
    flags = [env.step(int(np.flatnonzero(env.action_masks())[0]))[3] for _ in range(3)]
    assert flags == [False, False, True]


def test_the_replay_backend_replays_what_the_database_holds(tmp_path):
    db = Database(tmp_path / "net.db")
    live = _env(db=db)
    rng = np.random.default_rng(5)
    obs, _ = live.reset(seed=3)
    steps = [(obs, None)]
    actions = []
    for _ in range(8):
        action = int(rng.choice(np.flatnonzero(live.action_masks())))
        actions.append(action)
        obs, reward, *_ = live.step(action)
        steps.append((obs, reward))
    live.close()
    measured = len(db)

    replay = _env(db=db, backend="replay", measurer=None)
    # Replay has no GA: each (task, candidate) replays its records in the order they were measured,
    # so the same actions see the same kernels.
    obs, info = replay.reset(seed=3)
    assert np.allclose(obs, steps[0][0])
    for action, (expected_obs, expected_reward) in zip(actions, steps[1:]):
        obs, reward, *_ = replay.step(action)
        assert reward == pytest.approx(expected_reward) and np.allclose(obs, expected_obs)
    assert len(db) == measured  # nothing was measured
    replay.close()

    empty = _env(db=Database(":memory:"), backend="replay", measurer=None)
    _, info = empty.reset(seed=0)
    assert not info["action_mask"].any()  # nothing recorded: every task is dead
    _, _, terminated, _, _ = empty.step(0)
    assert terminated


def test_bad_arguments_are_refused(monkeypatch):
    with pytest.raises(InvalidArgumentError, match="replay"):
        NetworkEnv(TOY, db=":memory:", backend="replay", measurer=SyntheticMeasurer())
    with pytest.raises(InvalidArgumentError, match="backend"):
        NetworkEnv(TOY, db=":memory:", backend="cuda")
    with pytest.raises(InvalidArgumentError, match="kappa"):
        NetworkEnv(TOY, db=":memory:", kappa=0)
    with pytest.raises(InvalidArgumentError, match="max_tasks"):
        NetworkEnv(TOY, db=":memory:", max_tasks=2)
    with monkeypatch.context() as patch:  # a space that declares the dtypes it schedules
        from tensorgym.spaces import TilesSpace

        patch.setattr(TilesSpace, "supported_dtypes", ("int8",), raising=False)
        with pytest.raises(InvalidArgumentError, match="schedules int8, not float32"):
            NetworkEnv(TOY, db=":memory:")
    env = _env()
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(99)


def test_registered_network_ids(monkeypatch, tmp_path):
    monkeypatch.setitem(catalog.SPACES, "tiles", "tensorgym.spaces.tiles:TilesSpace")
    env = gym.make("Network-ResNet18-v0", space="tiles", db=str(tmp_path / "r18.db"))
    base = env.unwrapped
    assert isinstance(base, NetworkEnv) and base.network.name == "ResNet-18" and base.agent_name == "ga"
    assert base.action_space.n == 12 and base.observation_space.shape == (12 * (7 + 4),)
    env.close()
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"layers": [{"op": "matmul", "M": 8, "N": 8, "K": 8, "count": 2}]}))
    env = gym.make("tensorgym/Network-v0", network=str(path), db=str(tmp_path / "mine.db"), max_candidates=3)
    assert env.unwrapped.action_space.n == 3
    env.close()
    with pytest.raises(InvalidArgumentError, match="network="):
        gym.make("tensorgym/Network-v0")
