"""Leave-one-layer-out on landscapes: the split, the one-shot predictor trained from landscapes, the greedy walk,
RL trained on some landscapes and evaluated on a held-out one.

Small synthetic landscapes (bounded tiles spaces of tiny layers on a constructed Zen 4, records made by hand:
:mod:`test_landscape_data`); nothing is compiled or timed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from fakes import SYMBOLIC_CPU
from test_landscape_data import synthetic_landscape
from tensorgym.agents.heldout import landscape_runs, leave_one_layer_out
from tensorgym.agents.oneshot import OneShotAgent, TargetMismatch, measurements_from_landscapes, train_predictor
from tensorgym.agents.rl import RLAgent, read_info
from tensorgym.agents.rl.greedy import GreedyLandscapeEnv, relative_observation
from tensorgym.agents.rl.train import evaluate_held_out, train
from tensorgym.envs import make_env
from tensorgym.errors import InvalidArgumentError
from tensorgym.spaces.tiles.benchmark import benchmark_space
from tensorgym.target import constructed_cpu
from tensorgym.workloads import conv2d, matmul

LAYERS = (matmul(8, 16, 8, name="lo-a"), matmul(16, 32, 16, name="lo-b"), conv2d(1, 4, 6, 6, 8, 3, 3, name="lo-c"))


def tiny_landscape(workload, target=SYMBOLIC_CPU):
    return synthetic_landscape(benchmark_space(workload, target, max_configs=150))


@pytest.fixture(scope="module")
def lands():
    return [tiny_landscape(wl) for wl in LAYERS]


# -- the split ----------------------------------------------------------------------------------------------------
def test_the_split_never_holds_the_held_out_layer(lands):
    again = tiny_landscape(LAYERS[0])  # a second copy of a layer is the same layer
    for held in lands:
        training = leave_one_layer_out([*lands, again], held)
        assert held.workload_key not in {land.workload_key for land in training}
        assert len(training) == (2 if held is lands[0] else 3)
    with pytest.raises(InvalidArgumentError, match="not among"):
        leave_one_layer_out(lands[:2], lands[2])
    with pytest.raises(InvalidArgumentError, match="leaves no landscape"):
        leave_one_layer_out(lands[:1], lands[0])


# -- one-shot -----------------------------------------------------------------------------------------------------
def test_the_predictor_trains_from_landscapes_and_tunes_a_held_out_one(lands, tmp_path):
    held, training = lands[2], leave_one_layer_out(lands, lands[2])
    data, target = measurements_from_landscapes(training)
    assert target.fingerprint == held.fingerprint and set(data) == {land.workload for land in training}
    assert sum(len(v) for v in data.values()) == sum(len(land) for land in training)
    predictor = train_predictor(data, target, epochs=2, batch_size=64, labels="relative", progress=False)
    assert predictor.info.target == held.fingerprint and predictor.info.labels == "relative"
    predictor.save(tmp_path / "model.pt")
    agent = OneShotAgent(tmp_path / "model.pt", k=8)
    assert agent.optimizer_for(held.space()) == "exhaustive"
    runs = landscape_runs(agent, held, budget=8, seeds=[0, 1], trial_points=(4,))
    assert [r["trials"] for r in runs] == [8, 8]
    assert all(0 < r["fraction_of_optimum"] <= 1.2 and r["clock_s"] > 0 for r in runs)
    assert runs[0]["best_at"]["4"][0] <= runs[0]["best_gflops"]
    generic = train_predictor(data, target, epochs=1, batch_size=64, labels="relative", feature_set="generic",
                              progress=False)
    assert "knob_unroll" in generic.info.ignored and "af_ilp" not in generic.info.ignored
    generic.save(tmp_path / "generic.pt")
    both = OneShotAgent([tmp_path / "model.pt", tmp_path / "generic.pt"], k=8)
    assert landscape_runs(both, held, budget=8, seeds=[0])[0]["trials"] == 8


def test_interleaved_top_lists_take_each_rank_in_turn():
    from tensorgym.agents.oneshot.agent import interleaved

    assert interleaved([["a", "b", "c"], ["x", "a", "y"]], 4) == ["a", "x", "b", "c"]
    assert interleaved([["a", "b"]], 5) == ["a", "b"]


def test_landscapes_of_two_cpus_do_not_train_one_predictor(lands):
    other = tiny_landscape(matmul(8, 8, 8, name="lo-other"), constructed_cpu("znver4", num_cores=4))
    assert other.fingerprint != lands[0].fingerprint
    with pytest.raises(TargetMismatch, match="one machine"):
        measurements_from_landscapes([lands[0], other])
    with pytest.raises(InvalidArgumentError, match="at least one"):
        measurements_from_landscapes([])


# -- the greedy walk ----------------------------------------------------------------------------------------------
def test_the_greedy_walk_climbs_and_rewards_the_best_so_far(lands):
    env = GreedyLandscapeEnv(make_env(LAYERS[0], backend="landscape", landscape=lands[0], observation="common"),
                             starts=3, max_steps=20)
    obs, info = env.reset(seed=3)
    start, total, visited, steps = info["best_gflops"], 0.0, 0, 0
    rng = np.random.default_rng(0)
    truncated = False
    while not truncated:
        mask = env.action_masks()
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert reward >= 0 and not terminated and obs.shape == env.observation_space.shape
        total += reward
        steps += 1
    assert info["steps"] >= steps and info["best_gflops"] >= info["gflops"]
    assert total == pytest.approx(math.log2(info["best_gflops"] / start))
    visited = int(env._visited.sum())
    assert visited == 3 + info["steps"]  # every step measured a config it had not measured
    check_env(GreedyLandscapeEnv(make_env(LAYERS[1], backend="landscape", landscape=lands[1],
                                          observation="common")), skip_render_check=True)


def test_relative_features_hide_the_layer_and_its_scale():
    observation = np.linspace(0.1, 0.9, 12).astype(np.float32)
    out = relative_observation(observation, 50.0, 100.0, n_shape=3)
    assert out[-3:].tolist() == [0, 0, 0] and out[7] == pytest.approx(0.75) and out[8] == 0
    assert np.array_equal(out[:7], observation[:7])
    same = relative_observation(observation * 0.5 + 0.1, 100.0, 200.0, n_shape=3)
    assert same[7] == out[7]  # the same share of the best, whatever the GFLOP/s


# -- RL on landscapes ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["maskable-ppo", "dqn"])
def test_a_policy_trains_on_some_landscapes_and_tunes_a_held_out_one(lands, tmp_path, algo):
    held, training = lands[1], leave_one_layer_out(lands, lands[1])
    options = {"n_steps": 64, "batch_size": 32} if algo != "dqn" else {"learning_starts": 32}
    report = train(algo, [land.workload for land in training], out=tmp_path, backend="landscape",
                   landscape={land.workload_key: land for land in training}, timesteps=256, n_envs=2,
                   max_steps=8, eval_freq=128, eval_episodes=2, checkpoint_freq=0, progress=False,
                   walk="greedy", features="relative", starts=4, algo_options=options)
    info = read_info(tmp_path / "best.zip")
    assert (info.walk, info.features, info.starts) == ("greedy", "relative", 4)
    assert held.workload_label not in info.train_envs and report["evaluation"] == []
    assert (tmp_path / "eval" / "evaluations.npz").is_file()  # the learning curve
    runs = landscape_runs(RLAgent(tmp_path / "best.zip", epsilon=0.0), held, budget=12, seeds=[0, 1])
    assert [r["trials"] for r in runs] == [12, 12] and all(r["best_gflops"] > 0 for r in runs)
    control = landscape_runs(RLAgent(tmp_path / "best.zip", epsilon=1.0), held, budget=12, seeds=[0])
    assert control[0]["trials"] == 12


def test_the_env_episodes_train_on_given_landscapes_and_evaluate_held_out(lands, tmp_path):
    held, training = lands[0], leave_one_layer_out(lands, lands[0])
    given = {land.workload_key: land for land in lands}
    report = train("ppo", [land.workload for land in training], out=tmp_path, backend="landscape", landscape=given,
                   timesteps=128, n_envs=2, max_steps=8, eval_freq=0, checkpoint_freq=0, progress=False,
                   eval_envs=[held.workload], eval_budget=6, algo_options={"n_steps": 64, "batch_size": 32})
    entry = report["evaluation"][0]
    assert entry["trials"] == 6 and entry["optimum_gflops"] == pytest.approx(float(held.scores.max()))
    assert read_info(tmp_path / "best.zip").walk == "episodes"
    with pytest.raises(InvalidArgumentError, match="no landscape is given"):
        evaluate_held_out(tmp_path / "best.zip", [held.workload], backend="landscape", budget=4,
                          landscape={training[0].workload_key: training[0]})
    with pytest.raises(InvalidArgumentError, match="relative"):
        train("ppo", [training[0].workload], out=tmp_path / "x", backend="landscape", landscape=given,
              features="relative", timesteps=8, progress=False)
