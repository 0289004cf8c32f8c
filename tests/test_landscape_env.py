"""The landscape backend of the envs: the tile-hop env walking a landscape, seeded noise, no TVM, no database.

Small synthetic landscapes (a bounded tiles space of a tiny matmul on a constructed Zen 4, records
made by hand: :mod:`test_landscape_data`), plus the shipped R5 landscape, named by its CPU folder so
that the tests pass on any machine.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from fakes import SYMBOLIC_CPU
from test_landscape_data import BOUNDS, TINY, synthetic_landscape, tiny_space
import tensorgym  # noqa: F401  (registers the ids)
from tensorgym.agents.rl import LayerSampledEnv
from tensorgym.agents.rl.train import evaluate_held_out, make_training_env, train
from tensorgym.catalog import make_space
from tensorgym.cli import main
from tensorgym.context import TuningContext
from tensorgym.envs import LandscapeHopEnv, TileHopEnv, make_env
from tensorgym.envs.base import UnsupportedBackend
from tensorgym.envs.landscape_env import DRAW_STREAM, landscape_walk
from tensorgym.envs.tile_hop import FAILED_KERNEL_PENALTY, INVALID_ACTION_PENALTY
from tensorgym.errors import InvalidArgumentError, TensorgymError
from tensorgym.landscape import (AnotherCPULandscape, LandscapeEvaluator, LandscapeNotFound, NotInLandscape, cpu_folder,
                                 shipped_landscapes)
from tensorgym.landscape import shipped
from tensorgym.landscape.shipped import landscape_filename
from tensorgym.suites import all_suite_workloads

R5_ID, M3_ID, C7_ID = "Conv2d-ResNet-R5-v0", "Matmul-BERT-M3-v0", "Conv2d-ResNet18-C7-v0"
SHIPPED = {(s.layer, s.space): s for s in shipped_landscapes()}
# The CPU folder of the shipped R5 landscape, named explicitly: the tests run on whatever CPU the machine has.
R5_CPU = SHIPPED[("R5", "tiles")].cpu if ("R5", "tiles") in SHIPPED else None
needs_r5 = pytest.mark.skipif(R5_CPU is None, reason="no R5 tiles landscape is shipped")


@pytest.fixture(scope="module")
def land():
    return synthetic_landscape()


@pytest.fixture(scope="module")
def land_path(land, tmp_path_factory):
    return land.save(tmp_path_factory.mktemp("landscapes") / "tiny-tiles.json.gz")


def tiny_env(land_path, **kwargs) -> LandscapeHopEnv:
    return make_env(TINY, backend="landscape", landscape=str(land_path), **kwargs)


def walk_episode(env, seed: int, steps: int = 40, actions_seed: int = 7) -> list:
    """Observations, rewards and infos of an episode of allowed actions drawn from ``actions_seed``."""
    rng = np.random.default_rng(actions_seed)
    obs, info = env.reset(seed=seed)
    out = [(obs.tolist(), None, info["config"], info["gflops"])]
    for _ in range(steps):
        action = int(rng.choice(np.flatnonzero(env.action_masks())))
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs.tolist(), reward, info["config"], info["gflops"]))
        if truncated:
            break
    return out


# -- the env ------------------------------------------------------------------------------------------------------
def test_the_env_walks_the_landscapes_bounded_space(land, land_path):
    env = tiny_env(land_path)
    assert isinstance(env, LandscapeHopEnv) and isinstance(env, TileHopEnv) and env.backend == "landscape"
    assert isinstance(env.evaluator, LandscapeEvaluator) and env.evaluator.database is None
    space = env.search_space
    assert space.bounds == tiny_space().bounds and space.configs() == list(land.configs)
    assert env.target.fingerprint == land.fingerprint and env.measurer is None
    # The same spaces as the tile-hop env over that space: a policy trained on one fits the other.
    assert env.observation_space == env.rules.observation_space and env.action_space.n == 2 * len(space.coordinates)
    assert env.recorded_configs() == [c for c, ok in zip(land.configs, land.ok) if ok]
    env.close()


def test_steps_move_penalise_and_mask_as_the_tile_hop_env(land, land_path):
    env = tiny_env(land_path, max_steps=None)
    space, full = env.search_space, make_space("tiles", TINY, SYMBOLIC_CPU)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and info["status"] == "ok" and info["measurements"] == 0
    seen = {"masked": 0, "failed": 0, "ok": 0}
    rng = np.random.default_rng(1)
    for _ in range(400):
        config = space.parse(info["config"])
        mask = env.action_masks()
        np.testing.assert_array_equal(mask, info["action_mask"])
        for action in range(env.action_space.n):
            coordinate, down = divmod(action, 2)
            inside = space.hop(config, coordinate, -1 if down else 1)
            # Every move that stays in the bounded space is allowed; a move of the full space that leaves the
            # bounds is masked.
            assert mask[action] == (inside is not None and inside in land)
            if full.hop(config, coordinate, -1 if down else 1) is not None and inside is None:
                assert not mask[action]
        action = int(rng.integers(env.action_space.n))
        before = env.evaluator.lookup(config)
        target = space.hop(config, *divmod(action, 2)[:1], -1 if action % 2 else 1)
        obs, reward, terminated, truncated, info = env.step(action)
        assert not terminated and env.observation_space.contains(obs)
        if not mask[action]:
            seen["masked"] += 1
            assert (reward, info["status"], info["config"]) == (INVALID_ACTION_PENALTY, "masked", config.to_json())
        elif not env.evaluator.lookup(target).ok:
            seen["failed"] += 1
            assert reward == FAILED_KERNEL_PENALTY and info["config"] == config.to_json()
            assert info["status"] == env.evaluator.lookup(target).status.value and info["tried_gflops"] is None
        else:
            seen["ok"] += 1
            drawn = env.evaluator.lookup(target)
            assert info["status"] == "ok" and info["config"] == target.to_json()
            assert reward == pytest.approx(math.log2(drawn.gflops / before.gflops))
            assert info["gflops"] == drawn.gflops and info["latency_s"] == drawn.latency_s
        assert info["best_gflops"] >= info["gflops"]
        if truncated:
            obs, info = env.reset()
    assert all(seen.values()), seen
    env.close()


def test_observations_match_the_tile_hop_rules(land_path):
    for observation in ("layer", "common"):
        env = tiny_env(land_path, observation=observation)
        obs, _ = env.reset(seed=2)
        np.testing.assert_allclose(obs, env.rules.observe(env._state), rtol=1e-6)
        for action in np.flatnonzero(env.action_masks())[:3]:
            obs, *_ = env.step(int(action))
            np.testing.assert_allclose(obs, env.rules.observe(env._state), rtol=1e-6)
        env.close()


def test_every_config_of_the_landscape_is_a_state(land, land_path):
    env = tiny_env(land_path)
    walk = env.walk
    for row, config in enumerate(land.configs):
        if walk.ok[row] and walk.movable[row]:
            _, info = env.reset(options={"config": config.to_json()})
            assert info["config"] == config.to_json()
    failed = land.configs[int(np.flatnonzero(~land.ok)[0])]
    with pytest.raises(InvalidArgumentError, match="start config fails"):
        env.reset(options={"config": failed})
    outside = tiny_space(None).sample(np.random.default_rng(0)).replace(unroll=512)
    with pytest.raises(NotInLandscape) as err:
        env.reset(options={"config": outside})
    assert "\n" not in str(err.value)
    env.close()


def test_episodes_are_reproducible_per_seed(land_path):
    a, b = tiny_env(land_path), tiny_env(land_path)
    assert walk_episode(a, seed=3) == walk_episode(b, seed=3)
    # Another seed draws other latencies: the same config answers another throughput.
    config = a.landscape.configs[int(np.flatnonzero(a.landscape.ok)[0])]
    a.reset(seed=3)
    first = a.evaluator.lookup(config).gflops
    a.reset(seed=4)
    assert a.evaluator.lookup(config).gflops != first
    a.reset()  # no seed: the draws stay
    assert a.evaluator.lookup(config).gflops == a.scores[a.landscape.index_of(config)]
    # The draws are a stream of their own, seeded from the reset's seed.
    expected = LandscapeEvaluator(a.landscape, seed=np.random.default_rng([3, DRAW_STREAM]))
    a.reset(seed=3)
    assert a.evaluator.lookup(config).gflops == expected.lookup(config).gflops
    b.reseed(3)  # what reset(seed=3) seeds, without an episode
    assert b.evaluator.lookup(config).gflops == expected.lookup(config).gflops
    a.close()
    b.close()


def test_the_envs_of_a_process_share_the_walk(land, land_path):
    a, b = tiny_env(land_path), tiny_env(land_path)
    assert a.walk is b.walk and a.landscape is b.landscape  # the file is read once
    c = make_env(TINY, backend="landscape", landscape=synthetic_landscape())  # another object, the same content
    assert c.walk is a.walk
    common = tiny_env(land_path, observation="common")
    assert common.walk is not a.walk and common.walk.graph is a.walk.graph  # one hop graph for both layouts
    assert landscape_walk(land, a.rules) is a.walk
    with pytest.raises(ValueError):
        a.walk.moves[0, 0] = 5  # shared: read-only
    mask = a.reset(seed=0)[1]["action_mask"]
    mask[:] = False  # the env's masks are the env's: a consumer may change its copy
    assert a.action_masks().any()
    for env in (a, b, c, common):
        env.close()


def test_check_env_passes(land_path):
    env = tiny_env(land_path)
    check_env(env, skip_render_check=True)
    env.close()
    wrapped = gym.make(R5_ID, backend="landscape", landscape=R5_CPU) if R5_CPU else None
    if wrapped is not None:
        check_env(wrapped.unwrapped, skip_render_check=True)
        again = gym.make(wrapped.spec)  # the spec holds data: the env is made again from it
        assert isinstance(again.unwrapped, LandscapeHopEnv) and again.unwrapped.walk is wrapped.unwrapped.walk
        again.close()
        wrapped.close()


def test_an_env_given_a_landscape_evaluator_uses_it(land):
    evaluator = LandscapeEvaluator(land, noise="none")
    env = make_env(TINY, backend="landscape", evaluator=evaluator)
    assert env.evaluator is evaluator and env.landscape is land
    _, info = env.reset(seed=0)
    assert info["gflops"] == pytest.approx(land.scores[land.index_of(env.search_space.parse(info["config"]))], rel=1e-5)
    spec_env = gym.make("tensorgym/Matmul-v0", M=8, N=16, K=8, backend="landscape", evaluator=evaluator)
    assert spec_env.spec.kwargs.get("landscape") is not None and "evaluator" not in spec_env.spec.kwargs
    env.close()


# -- which landscape --------------------------------------------------------------------------------------------
@needs_r5
def test_gym_make_answers_from_the_shipped_r5_landscape():
    env = gym.make(R5_ID, backend="landscape", landscape=R5_CPU)
    base = env.unwrapped
    assert isinstance(base, LandscapeHopEnv) and base.landscape.cpu_folder == R5_CPU
    assert len(base.search_space.configs()) == len(base.landscape) and base.search_space.bounds is not None
    obs, info = env.reset(seed=0)
    for _ in range(200):
        obs, reward, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        assert info["status"] in ("ok", "masked", "build_error", "runtime_error", "timeout", "wrong_result")
        if truncated:
            obs, info = env.reset()
    env.close()
    if cpu_folder() == R5_CPU:  # this machine's own landscape needs no name
        env = gym.make(R5_ID, backend="landscape")
        assert env.unwrapped.landscape.cpu_folder == R5_CPU
        env.close()


def test_another_cpus_landscape_is_used_where_this_cpu_has_none_and_says_so(land, tmp_path, monkeypatch):
    other = cpu_folder(SYMBOLIC_CPU)
    assert other != cpu_folder()  # a constructed CPU: never this machine's
    (tmp_path / other).mkdir()
    land.save(tmp_path / other / landscape_filename(TINY))
    monkeypatch.setattr(shipped, "LANDSCAPES_DIR", tmp_path)
    for named in (None, other):
        with pytest.warns(AnotherCPULandscape) as warned:
            env = make_env(TINY, backend="landscape", landscape=named)
        message = str(warned[0].message)
        assert "\n" not in message and other in message and "not of this machine" in message
        assert env.landscape.cpu_folder == other
        env.close()
    with pytest.raises(LandscapeNotFound, match="no landscapes are shipped for CPU 'elsewhere'"):
        make_env(TINY, backend="landscape", landscape="elsewhere")


def test_refusals_are_one_line(land, land_path):
    r5 = all_suite_workloads()[R5_ID]
    cases = [
        lambda: make_env(TINY, space="microkernel", backend="landscape"),  # none shipped for a shape of one's own
        lambda: make_env(r5, space="mapping", backend="landscape"),
        lambda: gym.make("tensorgym/Conv2d-v0", C=8, H=8, F=16, R=3, space="microkernel", backend="landscape"),
        lambda: make_env(TINY, backend="tvm", landscape=str(land_path)),
        lambda: tiny_env(land_path, db=":memory:"),
        lambda: tiny_env(land_path, measurer=object()),
        lambda: tiny_env(land_path, context=TuningContext.local(SYMBOLIC_CPU, ":memory:")),
        lambda: tiny_env(land_path, bounds=BOUNDS),
        lambda: make_env(r5, backend="landscape", landscape=str(land_path)),  # another layer's landscape
        lambda: make_env(TINY, backend="landscape", landscape=str(land_path) + ".missing.json.gz"),
        lambda: make_env(TINY, backend="landscape", landscape=3),
        lambda: make_env(TINY, backend="landscape", landscape=land, evaluator=LandscapeEvaluator(land)),
        lambda: TileHopEnv(TINY, backend="landscape"),
    ]
    for case in cases:
        with pytest.raises(TensorgymError) as err:
            case()
        assert "\n" not in str(err.value), str(err.value)
    with pytest.raises(LandscapeNotFound, match="no microkernel landscape of"):
        cases[0]()
    with pytest.raises(UnsupportedBackend, match="no landscapes of the mapping space"):
        cases[1]()


# -- nothing is run ---------------------------------------------------------------------------------------------
def test_no_tvm_import_and_no_database_file(land_path, tmp_path):
    """In a fresh process: gym.make, reset and steps import no TVM and create no SQLite file."""
    db_file, home = tmp_path / "records.db", tmp_path / "home"
    home.mkdir()
    landscape = repr(R5_CPU) if R5_CPU else repr(str(land_path))
    env_id = R5_ID if R5_CPU else "tensorgym/Matmul-v0"
    shape = "" if R5_CPU else ", M=8, N=16, K=8"
    code = (
        "import sys, numpy as np, tensorgym, gymnasium as gym\n"
        f"env = gym.make({env_id!r}, backend='landscape', landscape={landscape}{shape})\n"
        "obs, info = env.reset(seed=0)\n"
        "for _ in range(100):\n"
        "    obs, r, te, tr, info = env.step(int(np.flatnonzero(info['action_mask'])[-1]))\n"
        "    if tr: obs, info = env.reset()\n"
        "env.close()\n"
        "assert 'tvm' not in sys.modules, 'tvm was imported'\n")
    environ = {**os.environ, "TENSORGYM_DB": str(db_file), "HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=environ)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not db_file.exists() and not list(home.rglob("*.db"))


def test_no_database_file_in_process(land_path, tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORGYM_DB", str(tmp_path / "records.db"))
    env = tiny_env(land_path)
    env.reset(seed=0)
    env.step(int(np.flatnonzero(env.action_masks())[0]))
    env.close()
    assert not (tmp_path / "records.db").exists()


# -- vector envs and training ----------------------------------------------------------------------------------------
@needs_r5
def test_make_vec_sync():
    envs = gym.make_vec(R5_ID, num_envs=3, vectorization_mode="sync", backend="landscape", landscape=R5_CPU)
    obs, info = envs.reset(seed=0)
    assert obs.shape == (3, *envs.single_observation_space.shape)
    for _ in range(20):
        masks = np.stack(info["action_mask"])
        actions = np.array([int(np.flatnonzero(m)[0]) for m in masks])
        obs, reward, terminated, truncated, info = envs.step(actions)
        assert reward.shape == (3,) and not terminated.any()
    again = gym.make_vec(R5_ID, num_envs=3, vectorization_mode="sync", backend="landscape", landscape=R5_CPU)
    np.testing.assert_array_equal(again.reset(seed=0)[0], envs.reset(seed=0)[0])
    envs.close()
    again.close()


def test_maskable_ppo_learns_on_a_landscape(land_path):
    from sb3_contrib import MaskablePPO

    env = tiny_env(land_path, max_steps=16)
    model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256
    env.close()


def test_layer_sampled_envs_seed_the_draws(land_path):
    def episode(seed):
        env = LayerSampledEnv([tiny_env(land_path, observation="common"), tiny_env(land_path, observation="common")])
        obs, info = env.reset(seed=seed)
        out = [obs.tolist()]
        for _ in range(10):
            obs, reward, *_ = env.step(int(np.flatnonzero(env.action_masks())[0]))
            out.append((obs.tolist(), reward))
        env.close()
        return out

    assert episode(5) == episode(5)


@needs_r5
def test_train_on_landscapes_and_evaluate_held_out(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORGYM_DB", str(tmp_path / "records.db"))
    out = tmp_path / "policy"
    report = train("maskable-ppo", [R5_ID, M3_ID], out=out, backend="landscape", landscape=R5_CPU, timesteps=256,
                   n_envs=2, eval_freq=128, eval_episodes=2, eval_envs=[C7_ID] if ("C7", "tiles") in SHIPPED else [],
                   eval_budget=8, progress=False, algo_options={"n_steps": 64})
    assert (out / "best.zip").exists() and report["info"]["backend"] == "landscape"
    for entry in report["evaluation"]:
        assert entry["backend"] == "landscape" and entry["trials"] == 8 and entry["measured"] == 8  # simulated
        assert entry["landscape"] == R5_CPU and entry["optimum_gflops"] > 0 and entry["fraction_of_optimum"] > 0
    again = evaluate_held_out(out / "best.zip", [all_suite_workloads()[R5_ID]], backend="landscape", budget=8,
                              landscape=R5_CPU)
    assert again[0]["trials"] == 8
    assert not (tmp_path / "records.db").exists()
    venv = make_training_env([R5_ID], backend="landscape", landscape=R5_CPU, n_envs=2, vec="dummy")
    assert venv.reset().shape[0] == 2
    venv.close()


@needs_r5
def test_the_train_command_takes_the_landscape_backend(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TENSORGYM_DB", str(tmp_path / "records.db"))
    out = tmp_path / "cli"
    code = main(["train", "--envs", f"{R5_ID},{M3_ID}", "--backend", "landscape", "--landscape", R5_CPU,
                 "--timesteps", "128", "--n-envs", "2", "--eval-freq", "0", "--eval-envs", R5_ID,
                 "--eval-budget", "4", "--out", str(out), "-q"])
    assert code == 0 and (out / "best.zip").exists()
    printed = capsys.readouterr()
    assert "database:" not in printed.err and "best known" in printed.out
    assert json.loads((out / "evaluation.json").read_text())[0]["optimum_gflops"] > 0
    assert not (tmp_path / "records.db").exists()


def test_the_train_command_refuses_a_missing_landscape_alone(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["train", "--envs", R5_ID, "--backend", "landscape", "--landscape", "nowhere-cpu", "--out", str(out),
                 "-q"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no landscapes are shipped for CPU 'nowhere-cpu'")
    assert not out.exists()
