"""The rl agent as a search strategy: it proposes through the Tuner's loop, in one run or in rounds."""

from __future__ import annotations

import hashlib
import importlib
import inspect

import numpy as np
import pytest
from fakes import SyntheticEvaluator, run_search, small_matmul_space, smooth_perf, synthetic_tuner

import tensorgym.agents.rl as rl
from tensorgym.agents.rl import PolicyInfo, PolicyMismatch, RLAgent
from tensorgym.agents.rl.train import make_model
from tensorgym.envs import TileHopEnv
from tensorgym.spaces import TilesSpace
from tensorgym.tuner import Tuner, TuningCallback
from tensorgym.workloads import conv2d

SPACE = small_matmul_space()
SMOOTH = smooth_perf(SPACE, seed=3)


def perf(config):
    """A smooth landscape where one config in five fails to build (failed kernels leave the state in place)."""
    if int(hashlib.sha256(config.key.encode()).hexdigest(), 16) % 5 == 0:
        return None
    return SMOOTH(config)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    """An untrained PPO policy for the per-layer tile-hop env of SPACE (what it prefers does not matter here)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = TileHopEnv(SPACE.workload, evaluator=SyntheticEvaluator(SPACE, perf), db=":memory:")
    model = make_model("ppo", DummyVecEnv([lambda: env]), n_steps=16, batch_size=16)
    model.tensorgym_policy = PolicyInfo("ppo", "tiles", "layer", env.observation_space.shape[0],
                                        int(env.action_space.n), 8).to_json()
    path = tmp_path_factory.mktemp("policy") / "hop.zip"
    model.save(path)
    env.close()
    return path


def configs(trials):
    return [t.config for t in trials]


def test_the_agent_proposes_through_the_tuner_loop(policy):
    agent = RLAgent(policy, epsilon=0.3, episode_steps=4)
    result = run_search(agent.spawn(), synthetic_tuner(SPACE, perf, budget=30), seed=5)
    assert len(result.trials) == 30 and all(SPACE.is_valid(c) for c in configs(result.trials))
    assert any(t.status != "ok" for t in result.trials) and result.best_gflops > 0
    extra = result.extra
    assert extra["policy"] == str(policy) and extra["algo"] == "ppo" and extra["epsilon"] == 0.3
    assert extra["episodes"] >= 2  # 4-step episodes: restarts happened
    again = run_search(agent.spawn(), synthetic_tuner(SPACE, perf, budget=30), seed=5)
    assert configs(again.trials) == configs(result.trials)  # the same seed makes the same trials
    other = run_search(agent.spawn(), synthetic_tuner(SPACE, perf, budget=30), seed=6)
    assert configs(other.trials) != configs(result.trials)


def test_every_ask_is_one_new_config_and_a_move_of_the_walk(policy):
    """Driven by hand: the strategy asks for one config at a time, never for one the run has measured (it
    answers those itself), and each asked config is a random start or a hop from a config the run measured."""
    strategy = RLAgent(policy, epsilon=0.3, episode_steps=4).spawn()
    tuner = synthetic_tuner(SPACE, perf, budget=25)
    strategy.start(SPACE, np.random.default_rng(0), 0)
    hops = 0
    while not tuner.exhausted:
        batch = strategy.ask(tuner.remaining)
        assert len(batch) == 1 and strategy.history.seen(batch[0]) is None
        measured = [r.config for r in strategy.history.records]
        hops += any(batch[0] in SPACE.neighbours(c) for c in measured)
        records = tuner.measure(batch)
        strategy.history.add(records)
        strategy.tell(records)
    strategy.close()
    assert len(strategy.history) == 25 and hops >= 12  # mostly hops; random (re)starts for the rest
    assert strategy.summary()["episodes"] >= 1


def test_rounds_make_the_trials_of_one_run(policy):
    agent = RLAgent(policy, epsilon=0.2, episode_steps=5)
    one_run = run_search(agent.spawn(), synthetic_tuner(SPACE, perf, budget=31), seed=7)
    tuner = Tuner(SyntheticEvaluator(SPACE, perf), budget=31, label="rl")
    search = tuner.start(agent.spawn(), seed=7)
    made = 0
    while made < 31:
        made += tuner.run_round(0, trials=min(7, 31 - made)).trials
    assert not search.finished
    tuner.close()
    assert configs(tuner.trials) == configs(one_run.trials)
    assert search.strategy.summary() == {k: one_run.extra[k] for k in ("policy", "algo", "episodes", "epsilon")}


def test_a_policy_that_does_not_fit_is_refused_before_anything_is_measured(policy):
    class Events(TuningCallback):
        def __init__(self):
            self.events = []

        def on_start(self, label, budget):
            self.events.append("start")

        def on_trial(self, trial):
            self.events.append("trial")

        def on_end(self):
            self.events.append("end")

    other = TilesSpace(conv2d(1, 16, 8, 8, 32, 3, 3, name="conv"), SPACE.target)  # a conv has more loops
    evaluator = SyntheticEvaluator(other, lambda config: 10.0)
    env = TileHopEnv(other.workload, evaluator=evaluator, db=":memory:")
    events = Events()
    with pytest.raises(PolicyMismatch, match="trained on observations"):
        RLAgent(policy).tune(env, budget=3, callback=events)
    assert events.events == ["start", "end"] and evaluator.requests == []  # the progress bar ended, nothing ran
    with pytest.raises(PolicyMismatch):  # the same refusal when a loop drives it directly
        Tuner(evaluator, budget=3).run(RLAgent(policy).spawn(), 0)
    assert evaluator.requests == []
    env.close()


def test_spawned_runs_share_the_policy_and_nothing_else(policy):
    agent = RLAgent(policy)
    first, second = agent.spawn(), agent.spawn()
    assert first.model is agent.model and second.model is agent.model
    run_search(first, synthetic_tuner(SPACE, perf, budget=3))
    assert not hasattr(second, "rules") and not hasattr(agent, "history")


def test_no_evaluator_stands_in_for_the_tuner():
    """The agent proposes through the loop: no class of agents.rl answers configs like an evaluator."""
    assert not hasattr(rl, "TunerRecords") and "TunerRecords" not in rl.__all__
    for name in ("agent", "policy", "layers", "train"):
        module = importlib.import_module(f"tensorgym.agents.rl.{name}")
        assert not hasattr(module, "TunerRecords") and not hasattr(module, "BudgetSpent")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                assert not (hasattr(cls, "evaluate") and hasattr(cls, "lookup")), cls
