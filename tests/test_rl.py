"""RL with stable-baselines3: training on replay, policy files, the rl agent, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes import SyntheticMeasurer, smooth_gflops

import tensorgym  # noqa: F401  (registers the ids)
from tensorgym.agents.rl import LayerSampledEnv, PolicyMismatch, RLAgent, read_info
from tensorgym.agents.rl.train import make_training_env, train
from tensorgym.catalog import make_agent
from tensorgym.cli import main
from tensorgym.database import Database
from tensorgym.dataset.build import build_dataset
from tensorgym.envs import TileHopEnv, make_env
from tensorgym.errors import InvalidArgumentError
from tensorgym.workloads import conv2d, matmul

MM = matmul(32, 48, 64, name="mm")
CONV_1X1 = conv2d(1, 16, 8, 8, 32, 1, 1, name="1x1")


@pytest.fixture(scope="module")
def replay_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("rl") / "data.db"
    with Database(path) as db:
        build_dataset([MM, CONV_1X1], db, per_task=40, hop_share=0.75, measurer=SyntheticMeasurer(smooth_gflops),
                      progress=False)
    return path


@pytest.mark.parametrize("algo", ["maskable-ppo", "ppo", "dqn"])
def test_train_saves_a_policy_that_tunes_as_an_agent(replay_db, tmp_path, algo):
    out = tmp_path / algo
    report = train(algo, [MM, CONV_1X1], db=replay_db, out=out, timesteps=256, n_envs=2, eval_freq=128,
                   eval_episodes=2, checkpoint_freq=128, eval_envs=[CONV_1X1], eval_budget=4, progress=False,
                   algo_options={"n_steps": 64} if "ppo" in algo else None)
    for name in ("best.zip", "final.zip", "progress.csv", "evaluation.json", "training.json"):
        assert (out / name).exists(), name
    assert list((out / "checkpoints").glob("*.zip"))
    info = read_info(out / "best.zip")
    assert info.algo == algo and info.observation == "common" and info.train_envs == ["custom/mm", "custom/1x1"]
    evaluation = json.loads((out / "evaluation.json").read_text())
    assert evaluation[0]["layer"] == "custom/1x1" and evaluation[0]["trials"] == 4
    assert 0 < evaluation[0]["best_gflops"] <= evaluation[0]["dataset_best_gflops"]
    assert report["evaluation"] == evaluation

    agent = make_agent("rl", policy=str(out / "best.zip"))
    env = make_env(MM, db=str(replay_db), backend="replay")
    result = agent.tune(env, budget=6, seed=1)
    env.close()
    assert len(result.trials) == 6 and result.measured == 0 and result.best_gflops > 0
    assert result.agent == "rl" and result.extra["algo"] == algo


def test_subprocess_envs_train_on_replay(replay_db, tmp_path):
    train("maskable-ppo", [MM, CONV_1X1], db=replay_db, out=tmp_path / "sub", timesteps=128, n_envs=2,
          vec="subproc", eval_freq=0, checkpoint_freq=0, progress=False, algo_options={"n_steps": 64})
    assert read_info(tmp_path / "sub" / "best.zip").timesteps == 128


def test_train_and_tune_from_the_command_line(replay_db, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["train", "--algo", "dqn", "--envs", "dataset", "--db", str(replay_db), "--timesteps", "256",
                 "--n-envs", "2", "--out", str(out), "-q"]) == 0
    assert "use it: tensorgym tune" in capsys.readouterr().out
    db = tmp_path / "real.db"
    assert main(["tune", "tensorgym/Matmul-v0", "--shape", "M=16,N=32,K=64", "--agent", "rl", "--policy",
                 str(out / "best.zip"), "--budget", "2", "--db", str(db), "--no-vendor", "-q"]) == 0
    assert "agent rl (seed 0) in the tiles space: 2 trials (2 measured now" in capsys.readouterr().out
    assert main(["compare", "tensorgym/Matmul-v0", "--shape", "M=16,N=32,K=64", "--agents", "random,rl", "--policy",
                 str(out / "best.zip"), "--budget", "2", "--seeds", "1", "--db", str(db), "--out",
                 str(tmp_path / "board"), "--no-vendor", "--no-plot", "--remeasure", "0", "-q"]) == 0
    assert "rl" in capsys.readouterr().out and list((tmp_path / "board" / "results").rglob("rl-*-seed0.json"))


def test_a_policy_for_other_observations_is_refused(replay_db, tmp_path):
    from stable_baselines3 import DQN

    from tensorgym.agents.rl.policy import PolicyInfo

    env = TileHopEnv(MM, db=str(replay_db), backend="replay")  # the per-layer layout
    model = DQN("MlpPolicy", env, learning_starts=10, buffer_size=1000, device="cpu")
    model.tensorgym_policy = PolicyInfo("dqn", "tiles", "layer", env.observation_space.shape[0],
                                        int(env.action_space.n), 16).to_json()
    model.save(tmp_path / "layer.zip")
    env.close()
    agent = RLAgent(tmp_path / "layer.zip")
    other = make_env(CONV_1X1, db=str(replay_db), backend="replay")
    with pytest.raises(PolicyMismatch, match=r"trained on observations of size \d+"):
        agent.tune(other, budget=2)
    with pytest.raises(PolicyMismatch, match="space='tiles'"):
        agent.check_space("microkernel")
    other.close()


def test_bad_policy_files_and_settings_get_clear_errors(replay_db, tmp_path):
    with pytest.raises(InvalidArgumentError, match="needs a trained policy"):
        make_agent("rl")
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        RLAgent(tmp_path / "missing.zip")
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    with pytest.raises(InvalidArgumentError, match="not a stable-baselines3 policy"):
        RLAgent(tmp_path / "junk.zip")
    with pytest.raises(InvalidArgumentError, match="tvm backend"):
        make_training_env([MM], db=replay_db, backend="tvm", vec="subproc")
    with pytest.raises(InvalidArgumentError, match="unknown algorithm"):
        train("a2c", [MM], db=replay_db, out=tmp_path / "x", timesteps=8)
    layer_envs = [TileHopEnv(wl, db=str(replay_db), backend="replay") for wl in (MM, CONV_1X1)]
    with pytest.raises(InvalidArgumentError, match="observation='common'"):
        LayerSampledEnv(layer_envs)
    for env in layer_envs:
        env.close()


def test_layer_sampled_env_draws_layers_per_episode(replay_db):
    envs = [TileHopEnv(wl, db=str(replay_db), backend="replay", observation="common") for wl in (MM, CONV_1X1)]
    env = LayerSampledEnv(envs)
    layers = set()
    _, info = env.reset(seed=0)
    for _ in range(12):
        layers.add(info["layer"])
        assert env.action_masks().any()
        env.step(int(np.flatnonzero(env.action_masks())[0]))
        _, info = env.reset()
    assert layers == {"custom/mm", "custom/1x1"}
    env.close()


def test_a_policy_for_the_microkernel_env_trains_and_tunes(tmp_path):
    from stable_baselines3.common.vec_env import DummyVecEnv

    from fakes import SyntheticEvaluator
    from tensorgym.agents.rl.policy import PolicyInfo
    from tensorgym.agents.rl.train import make_model
    from tensorgym.envs.microkernel_env import MicrokernelEnv
    from tensorgym.spaces.microkernel import Catalogue, EnumerationRules, MicrokernelSpace, enumerate_microkernels
    from tensorgym.target import local_cpu

    target = local_cpu()
    catalogue = Catalogue.unmeasured(target, enumerate_microkernels(EnumerationRules.for_target(target, quick=True)))
    workload = matmul(32, 48, 64, name="mm")
    space = MicrokernelSpace(workload, target, catalogue=catalogue)
    evaluator = SyntheticEvaluator(space, lambda config: 10.0 + 5.0 * (config.key.count("1") % 7))
    with Database(tmp_path / "mk.db") as db:
        env = MicrokernelEnv(workload, evaluator=evaluator, db=db)
        model = make_model("maskable-ppo", DummyVecEnv([lambda: env]), n_steps=32, batch_size=32)
        model.learn(total_timesteps=64)
        model.tensorgym_policy = PolicyInfo("maskable-ppo", "microkernel", None, env.observation_space.shape[0],
                                            int(env.action_space.n), env.max_steps).to_json()
        model.save(tmp_path / "mk.zip")
        agent = RLAgent(tmp_path / "mk.zip")
        assert agent.env_space == "microkernel"
        result = agent.tune(env, budget=4, seed=0)
        assert 1 <= len(result.trials) <= 4 and result.best_gflops > 0
        assert all(space.is_valid(t.config) for t in result.trials)
        env.close()


def test_the_tvm_backend_measures_through_one_context(replay_db, tmp_path):
    """Training envs and the held-out evaluation measure through the context they are given, and leave it open."""
    from tensorgym.agents.rl.train import evaluate_held_out
    from tensorgym.context import TuningContext

    out = tmp_path / "policy"
    train("maskable-ppo", [MM, CONV_1X1], db=replay_db, out=out, timesteps=64, n_envs=1, eval_freq=0,
          checkpoint_freq=0, progress=False, algo_options={"n_steps": 32, "batch_size": 16})
    measurer = SyntheticMeasurer(smooth_gflops)
    with TuningContext.local(None, tmp_path / "measured.db", measurer=measurer) as context:
        venv = make_training_env([MM], backend="tvm", context=context, n_envs=2, seed=0)
        venv.reset()
        for _ in range(4):
            masks = venv.env_method("action_masks")
            venv.step(np.array([int(np.flatnonzero(m)[0]) for m in masks]))
        venv.close()
        assert not context.closed and context.measurer is measurer
        stored = context.database.records(MM.key, context.target.fingerprint, "tiles")
        assert len(stored) >= 2
        evaluation = evaluate_held_out(out / "best.zip", [CONV_1X1], backend="tvm", budget=3, context=context)
        assert evaluation[0]["trials"] == 3 and evaluation[0]["backend"] == "tvm" and not context.closed
    with pytest.raises(InvalidArgumentError, match="give db= or context="):
        make_training_env([MM], backend="tvm")
    with pytest.raises(InvalidArgumentError, match="give db="):
        make_training_env([MM], backend="replay")
