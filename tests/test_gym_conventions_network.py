"""Gymnasium's conventions in the network env: one warm-up per session, episodes that start from the tuned
state, ``reset(options={"fresh": True})``, TimeLimit from the registry, and ``check_env`` without re-warming.

Small networks and :class:`fakes.SyntheticMeasurer`: nothing is compiled.
"""

from __future__ import annotations

import functools
import time

import gymnasium as gym
import numpy as np
import pytest
from fakes import SyntheticMeasurer, synthetic_default_measurers
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import TimeLimit

from tensorgym import catalog
from tensorgym.database import Database
from tensorgym.envs.network_env import NetworkEnv, default_episode_steps
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.networks import NETWORKS, Network
from tensorgym.workloads import conv2d, matmul

# Three live tasks (one of weight 0), four candidates each (the fixture's space).
TOY = Network.from_pairs("toy", [(matmul(64, 64, 64, name="a"), 2), (matmul(16, 16, 16, name="z"), 0),
                                 (conv2d(1, 8, 16, 16, 16, 3, 3, name="c"), 3), (matmul(32, 16, 64, name="b"), 1)])
ROUND = 8


@pytest.fixture(autouse=True)
def candidates_space(monkeypatch):
    """The ``tiles`` space with one candidate per unroll choice (4): multi-candidate tasks."""
    monkeypatch.setitem(catalog.SPACES, "tiles", "fakes:CandidateTilesSpace")


@pytest.fixture()
def shared_synthetic(monkeypatch):
    """The measurers that envs given no measurer= share are synthetic; returns those started."""
    return synthetic_default_measurers(monkeypatch, SyntheticMeasurer)


def _make(db, **kwargs) -> gym.Env:
    kwargs.setdefault("measurer", SyntheticMeasurer())
    return gym.make("tensorgym/Network-v0", network=TOY, db=db, agent="random", measure_per_round=ROUND, **kwargs)


def _time_limits(env) -> list[int]:
    """The limits of the TimeLimit wrappers around the env, outermost first."""
    limits = []
    while env is not env.unwrapped:
        if isinstance(env, TimeLimit):
            limits.append(env._max_episode_steps)
        env = env.env
    return limits


def _valid(env) -> int:
    return int(np.flatnonzero(env.unwrapped.action_masks())[0])


def test_check_env_warms_up_once_and_its_resets_measure_nothing(tmp_path, shared_synthetic):
    """The issue's done-when on a small network: check_env resets the env a dozen times; only the first
    reset warms up. Its render and close checks make the env again from the spec: that env's warm-up is the
    same session's (same seed), which the database answers."""
    measurer = SyntheticMeasurer()
    env = _make(str(tmp_path / "net.db"), measurer=measurer, render_mode="ansi")
    net = env.unwrapped
    calls: list[tuple[str, int]] = []  # (method, kernels it measured)

    def counted(name, method):
        @functools.wraps(method)
        def call(*args, **kwargs):
            before = len(measurer.measured)
            out = method(*args, **kwargs)
            calls.append((name, len(measurer.measured) - before))
            return out
        return call

    net.reset = counted("reset", net.reset)
    net.step = counted("step", net.step)
    start = time.monotonic()
    check_env(net)
    assert time.monotonic() - start < 60
    resets = [n for name, n in calls if name == "reset"]
    steps = [n for name, n in calls if name == "step"]
    assert len(resets) >= 8 and resets[0] > 0  # the warm-up: one round per live task
    assert resets[1:] == [0] * (len(resets) - 1)  # later resets measure nothing
    assert all(n <= ROUND for n in steps)  # a step measures at most its round (nothing when masked)
    assert len(measurer.measured) == sum(resets) + sum(steps)
    assert net._sessions == 1
    assert shared_synthetic and all(not m.measured for m in shared_synthetic)  # the envs made again
    env.close()


def test_a_second_check_env_over_the_same_database_measures_nothing(tmp_path, shared_synthetic):
    """check_env samples actions: a seeded reset seeds the action space, so the second run picks the rounds the
    first one measured (unseeded, its first step gave a round to a random task)."""
    db = str(tmp_path / "twice.db")
    counts = []
    for _ in range(2):
        env = _make(db, measurer=SyntheticMeasurer())
        check_env(env.unwrapped)
        env.close()
        with Database(db) as records:
            counts.append(len(records))
    assert counts[0] > 0 and counts[1] == counts[0]


def test_a_seeded_reset_seeds_the_action_space():
    env = NetworkEnv(TOY, db=Database(":memory:"), measurer=SyntheticMeasurer(), agent="random",
                     measure_per_round=ROUND)
    env.reset(seed=5)
    first = [int(env.action_space.sample()) for _ in range(8)]
    env.reset(seed=5)
    assert [int(env.action_space.sample()) for _ in range(8)] == first
    env.close()


def test_an_episode_starts_from_the_tuned_state_and_fresh_starts_a_new_session():
    measurer = SyntheticMeasurer()
    env = NetworkEnv(TOY, db=Database(":memory:"), measurer=measurer, agent="random", measure_per_round=ROUND)
    obs, info = env.reset(seed=0)
    assert info["status"] == "warm-up" and info["session"] == 1 and info["episode_trials"] == 0
    warm = len(measurer.measured)
    assert info["trials"] == warm > 0
    for _ in range(3):
        obs, _, _, _, info = env.step(_valid(env))
    measured, estimate = len(measurer.measured), info["estimate_s"]
    obs2, info2 = env.reset(seed=0)
    assert info2["status"] == "resumed" and info2["session"] == 1 and len(measurer.measured) == measured
    assert info2["trials"] == info["trials"] and info2["episode_trials"] == 0 and info2["estimate_s"] == estimate
    assert np.array_equal(obs, obs2)  # the episode starts where the last one ended
    _, _, _, _, info3 = env.step(_valid(env))
    assert info3["episode_trials"] == info3["round_trials"] > 0
    _, fresh = env.reset(options={"fresh": True})
    assert fresh["status"] == "warm-up" and fresh["session"] == 2 and fresh["episode_trials"] == 0
    assert 0 < fresh["trials"] < info3["trials"]  # the new session counts its own trials
    with pytest.raises(InvalidTypeError, match="fresh"):
        env.reset(options={"fresh": "yes"})
    with pytest.raises(InvalidArgumentError, match="unknown reset option"):
        env.reset(options={"config": 1})
    env.close()


def test_envs_over_one_database_share_the_first_sessions_warm_up(tmp_path):
    db = str(tmp_path / "warm.db")
    first, second = SyntheticMeasurer(), SyntheticMeasurer()
    a = NetworkEnv(TOY, db=db, measurer=first, agent="random", measure_per_round=ROUND)
    obs_a, _ = a.reset(seed=1)
    b = NetworkEnv(TOY, db=db, measurer=second, agent="random", measure_per_round=ROUND)
    obs_b, _ = b.reset(seed=2)  # the first session's seed is the env's session_seed, not the reset's
    assert first.measured and not second.measured and np.array_equal(obs_a, obs_b)
    a.close()
    b.close()


def test_network_ids_are_time_limited_by_the_registry(tmp_path):
    for net in NETWORKS.values():
        spec = gym.spec(net.env_id)
        assert spec.max_episode_steps == default_episode_steps(net) and spec.nondeterministic
    env = _make(str(tmp_path / "t.db"))  # tensorgym/Network-v0: its network's limit, added by the entry point
    assert _time_limits(env) == [default_episode_steps(TOY)] == [env.spec.max_episode_steps]
    env.close()
    env = _make(str(tmp_path / "t.db"), max_steps=2)
    assert _time_limits(env) == [2]
    assert env.unwrapped.max_steps == float("inf")  # no limit of its own
    env.reset(seed=0)
    masked = int(np.flatnonzero(~env.unwrapped.action_masks())[0])  # a weight-0 task's: no trial, a step all the same
    assert [env.step(masked)[3] for _ in range(2)] == [False, True]
    env.reset()
    assert env.step(masked)[3] is False
    env.close()
    with pytest.raises(InvalidArgumentError, match="max_steps"):
        _make(":memory:", max_steps=0)


def test_the_episode_budget_truncates_and_the_next_episode_gets_its_own():
    env = NetworkEnv(TOY, db=Database(":memory:"), measurer=SyntheticMeasurer(), agent="random",
                     measure_per_round=ROUND, budget=2 * ROUND)
    for _ in range(2):  # two episodes of the one session
        env.reset()
        flags = [env.step(_valid(env))[3] for _ in range(2)]
        assert flags == [False, True]
        assert not env.action_masks().any()  # the episode's trials are spent
    assert env._sessions == 1
    env.close()
