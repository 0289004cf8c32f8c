"""The tile-hop environment on real measurements."""

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import tensorgym  # noqa: F401  (registers the ids)
from tensorgym.envs import FAILED_KERNEL_PENALTY, INVALID_ACTION_PENALTY
from tensorgym.spaces import SpaceError

SMALL = {
    "conv": ("tensorgym/Conv2d-v0", dict(C=8, H=10, W=12, F=16, R=3)),
    "matmul": ("tensorgym/Matmul-v0", dict(M=48, N=64, K=32)),
}


@pytest.fixture()
def make(tmp_path, measurer):
    envs = []

    def _make(kind="matmul", **kwargs):
        env_id, shape = SMALL[kind]
        env = gym.make(env_id, db=str(tmp_path / "env.db"), measurer=measurer, **shape, **kwargs)
        envs.append(env)
        return env

    yield _make
    for env in envs:
        env.close()


@pytest.mark.parametrize("kind", ["conv", "matmul"])
def test_gymnasium_and_sb3_env_checkers_pass(make, kind):
    env = make(kind)
    gym_check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(env.unwrapped)


def test_reset_and_step_follow_the_documented_contract(make):
    env = make("matmul", render_mode="ansi")
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert info["status"] == "ok" and info["gflops"] > 0 and info["measurements"] >= 1
    assert info["action_mask"].shape == (env.action_space.n,)
    base = env.unwrapped
    rng = np.random.default_rng(0)
    for _ in range(6):
        before = info["gflops"]
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, reward, terminated, truncated, info = env.step(action)
        assert not terminated and env.observation_space.contains(obs)
        if info["status"] == "ok":
            assert reward == pytest.approx(math.log2(info["gflops"] / before))
        else:
            assert reward == FAILED_KERNEL_PENALTY and info["gflops"] == before
    assert "GFLOP/s" in env.render()
    assert np.array_equal(base.action_masks(), info["action_mask"])


def test_a_masked_action_is_penalised_and_changes_nothing(make):
    env = make("matmul")
    obs, info = env.reset(seed=1)
    masked = np.flatnonzero(~info["action_mask"])
    assert masked.size, "every start config has moves off the end of some divisor list"
    obs2, reward, _, _, info2 = env.step(int(masked[0]))
    assert reward == INVALID_ACTION_PENALTY and info2["status"] == "masked"
    assert np.array_equal(obs, obs2) and info2["config"] == info["config"]


def test_same_seed_gives_the_same_configs_and_observations(make):
    def rollout(env):
        obs, info = env.reset(seed=42)
        configs, encodings = [info["config"]], [obs[: env.unwrapped.search_space.encoding_size]]
        for step in range(5):
            mask = info["action_mask"]
            obs, _, _, _, info = env.step(int(np.flatnonzero(mask)[step % mask.sum()]))
            configs.append(info["config"])
            encodings.append(obs[: env.unwrapped.search_space.encoding_size])
        return configs, np.array(encodings)

    c1, e1 = rollout(make("matmul"))
    c2, e2 = rollout(make("matmul"))
    assert c1 == c2 and np.array_equal(e1, e2)


def test_truncation_after_max_steps(make):
    env = make("matmul", max_steps=2)
    _, info = env.reset(seed=3)
    a = int(np.flatnonzero(info["action_mask"])[0])
    assert env.step(a)[3] is False
    assert env.step(a)[3] is True


def test_cached_configs_are_not_measured_again(make):
    env = make("matmul")
    _, info = env.reset(seed=5)
    action = int(np.flatnonzero(info["action_mask"])[0])
    env.step(action)
    measured = env.unwrapped.evaluator.measured
    env.reset(seed=5)
    env.step(action)
    assert env.unwrapped.evaluator.measured == measured


def test_invalid_inputs_raise_clear_errors(make):
    env = make("matmul")
    with pytest.raises(gym.error.ResetNeeded):
        env.unwrapped.step(0)
    _, info = env.reset(seed=0)
    n = env.action_space.n
    for bad in (n, -1, 2.5, "up"):
        with pytest.raises(ValueError, match="outside the action space"):
            env.unwrapped.step(bad)
    with pytest.raises(SpaceError):
        env.reset(options={"config": {"i": [1, 2, 3, 4]}})
    with pytest.raises(ValueError, match="unknown space"):
        gym.make("Conv2d-ResNet-R5-v0", space="nope")
    with pytest.raises(ValueError, match="max_steps"):
        make("matmul", max_steps=0)


def test_a_start_config_can_be_given(make):
    env = make("matmul")
    _, info = env.reset(seed=0)
    _, info2 = env.reset(options={"config": info["config"]})
    assert info2["config"] == info["config"]


def test_the_env_survives_crashing_and_hanging_kernels(tmp_path):
    from tensorgym.measure import Measurer

    workload = tensorgym.matmul(48, 64, 32)
    probe = tensorgym.make_env(workload, db=str(tmp_path / "probe.db"))
    space = probe.search_space
    start = space.sample(np.random.default_rng(7))  # what reset(seed=7) draws
    moves = [a for a in range(probe.action_space.n) if space.hop_mask(start)[a]]
    crash_target, hang_target = (space.hop(start, a // 2, -1 if a % 2 else 1) for a in moves[:2])
    probe.close()

    with Measurer(faults={crash_target: "crash", hang_target: "hang"}, run_timeout=8.0) as measurer:
        env = tensorgym.make_env(workload, db=str(tmp_path / "env.db"), measurer=measurer)
        _, info = env.reset(seed=7)
        assert info["config"] == start.to_json()
        for action, status in ((moves[0], "runtime_error"), (moves[1], "timeout")):
            _, reward, _, _, info = env.step(action)
            assert info["status"] == status and reward == FAILED_KERNEL_PENALTY
            assert info["config"] == start.to_json()  # the state stayed where it was
        _, _, _, _, info = env.step(moves[2])
        assert info["status"] == "ok"  # and the env keeps working
        records = env.database.records(workload.key)
        assert sorted(r.status.value for r in records).count("runtime_error") == 1
        env.close()


def test_replay_answers_from_the_database_without_compiling(make, tmp_path):
    env = make("matmul")
    _, info = env.reset(seed=0)
    for _ in range(4):
        env.step(int(np.flatnonzero(info["action_mask"])[0]))
    recorded = {r.config for r in env.unwrapped.database.records()}
    env.close()

    replay = gym.make(SMALL["matmul"][0], db=str(tmp_path / "env.db"), backend="replay", **SMALL["matmul"][1])
    _, info = replay.reset(seed=1)
    for _ in range(10):
        allowed = np.flatnonzero(info["action_mask"])
        if not allowed.size:
            break
        _, _, _, _, info = replay.step(int(allowed[0]))
        assert info["status"] == "ok"
    assert replay.unwrapped.measurer is None and not replay.unwrapped.context.measurer_started
    assert replay.unwrapped.evaluator.measured == 0
    assert {r.config for r in replay.unwrapped.database.records()} == recorded
    replay.close()
    with pytest.raises(ValueError, match="backend"):
        gym.make("Conv2d-ResNet-R5-v0", backend="gpu")
