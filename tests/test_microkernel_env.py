"""The microkernel construction env: masks, phases, rewards, errors."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import SyntheticEvaluator

from tensorgym.envs.microkernel_env import FAILED_KERNEL_PENALTY, INVALID_ACTION_PENALTY, MicrokernelEnv
from tensorgym.spaces.microkernel import Catalogue, CatalogueMissing, EnumerationRules, enumerate_microkernels
from tensorgym.suites import SUITES
from tensorgym.target import local_cpu
from tensorgym.workloads import conv2d, matmul

TARGET = local_cpu()


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.unmeasured(TARGET, enumerate_microkernels(EnumerationRules.for_target(TARGET, quick=True)))


def make_env(workload, catalogue, db, perf=lambda config: 100.0, **kwargs) -> MicrokernelEnv:
    env = MicrokernelEnv(workload, catalogue=catalogue, db=db, **kwargs)
    env._evaluator = SyntheticEvaluator(env.search_space, perf)  # no compiling in these tests
    return env


WORKLOADS = [
    SUITES["ResNet-50"]["R5"], SUITES["YOLO-9000"]["Y9"], SUITES["BERT"]["M0"],
    conv2d(1, 5, 17, 17, 20, 3, 3, 1, "same"), conv2d(1, 2, 68, 68, 16, 3, 3, 2, "same"), matmul(37, 50, 29),
]


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.label)
def test_masked_random_rollouts_always_end_in_a_valid_config(workload, catalogue, db):
    env = make_env(workload, catalogue, db)
    rng = np.random.default_rng(0)
    phases = set()
    for episode in range(60):
        obs, info = env.reset(seed=episode)
        assert env.observation_space.contains(obs)
        terminated = truncated = False
        while not (terminated or truncated):
            mask = info["action_mask"]
            assert mask.dtype == bool and mask.shape == (env.action_space.n,) and mask.any()
            assert (mask == env.action_masks()).all()
            phases.add(info["phase"])
            obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
            assert env.observation_space.contains(obs)
            if not terminated:
                assert reward == 0.0  # intermediate rewards are 0
        assert terminated and not truncated
        env.search_space.check(env.config)  # the masks only ever lead to valid configs
        assert info["status"] == "ok" and info["config"] == env.config.to_json()
        assert reward == pytest.approx(100.0 / env.reward_scale)
        assert not env.action_masks().any()
    assert {"kernel", "partner", "reuse", "tiles", "parallel"} <= phases
    env.close()


def test_masks_offer_exactly_the_choices_that_stay_completable(catalogue, db):
    """Every unmasked action leads to a state where some action is unmasked, until the end."""
    env = make_env(SUITES["YOLO-9000"]["Y9"], catalogue, db)
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    while env._phase not in ("done",):
        mask = env.action_masks()
        for action in np.flatnonzero(mask):
            # probe each offered action on a copy of the construction state
            saved = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
                     for k, v in vars(env).items() if k.startswith("_") and k not in ("_evaluator", "_np_random")}
            getattr(env, f"_take_{env._phase}")(int(action) - env.segments[env._phase].start)
            if env._phase != "measure":
                assert env.action_masks().any(), f"dead end after action {action}"
            else:
                env.search_space.check(env._config)
            vars(env).update(saved)
        env.step(int(rng.choice(np.flatnonzero(mask))))
    env.close()


def test_invalid_and_masked_actions(catalogue, db):
    env = make_env(SUITES["ResNet-50"]["R5"], catalogue, db)
    with pytest.raises(Exception, match="reset"):
        env.step(0)
    obs, info = env.reset(seed=0)
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(env.action_space.n)
    with pytest.raises(ValueError):
        env.step(-1)
    masked = int(np.flatnonzero(~info["action_mask"])[0])
    obs2, reward, terminated, truncated, info2 = env.step(masked)
    assert reward == INVALID_ACTION_PENALTY and not terminated and info2["status"] == "masked"
    assert info2["phase"] == info["phase"] and (obs2 == obs).all()


def test_failed_kernel_penalty_and_truncation(catalogue, db):
    env = make_env(matmul(37, 50, 29), catalogue, db, perf=lambda config: None)  # every build fails
    _, info = env.reset(seed=0)
    terminated = False
    while not terminated:
        _, reward, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert reward == FAILED_KERNEL_PENALTY and info["status"] == "build_error"
    short = make_env(SUITES["ResNet-50"]["R5"], catalogue, db, max_steps=3)
    _, info = short.reset(seed=0)
    for _ in range(3):
        _, _, terminated, truncated, info = short.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert truncated and not terminated


def test_missing_catalogue_says_to_calibrate(tmp_path):
    with pytest.raises(CatalogueMissing, match="tensorgym microkernels calibrate"):
        MicrokernelEnv(SUITES["ResNet-50"]["R5"], cache_dir=tmp_path, db=tmp_path / "r.db", auto_calibrate=False)


def test_replay_backend_is_refused_up_front(catalogue, tmp_path):
    with pytest.raises(ValueError, match="backend='replay' is supported by the tiles env"):
        MicrokernelEnv(SUITES["ResNet-50"]["R5"], catalogue=catalogue, db=tmp_path / "r.db", backend="replay")


def test_one_real_episode(catalogue, db, measurer):
    """A full construction of a small conv, measured for real: a positive reward and the record's facts."""
    env = MicrokernelEnv(conv2d(1, 4, 14, 14, 32, 3, 3, 1, "same"), catalogue=catalogue, db=db, measurer=measurer)
    _, info = env.reset(seed=3)
    rng = np.random.default_rng(3)
    terminated = False
    while not terminated:
        _, reward, terminated, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    assert info["status"] == "ok", info
    assert reward > 0 and info["gflops"] > 0 and info["packing"] == "in-kernel"
    assert db.get(env.workload.key, TARGET.fingerprint, "microkernel", env.config) is not None
    env.close()
