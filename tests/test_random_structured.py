"""The random-structured agent (seed 003's sampler on the Tuner API)."""

from __future__ import annotations

import pytest
from fakes import SyntheticEvaluator

from tensorgym.agents.random_structured import RandomStructuredAgent
from tensorgym.envs.microkernel_env import MicrokernelEnv
from tensorgym.spaces.microkernel import Catalogue, EnumerationRules, enumerate_microkernels
from tensorgym.suites import SUITES
from tensorgym.target import local_cpu
from tensorgym.tuner import Tuner
from tensorgym.workloads import conv2d

TARGET = local_cpu()


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.unmeasured(TARGET, enumerate_microkernels(EnumerationRules.for_target(TARGET, quick=True)))


def synthetic_tuner(space, budget):
    perf = lambda config: 10.0 + (hash(config.key) % 1000) / 10  # noqa: E731 - any deterministic landscape
    return Tuner(SyntheticEvaluator(space, perf), budget=budget)


def test_deterministic_per_seed_and_within_budget(catalogue, db):
    env = MicrokernelEnv(SUITES["ResNet-50"]["R5"], catalogue=catalogue, db=db)
    runs = []
    for seed in (0, 0, 1):
        tuner = synthetic_tuner(env.search_space, budget=40)
        extra = tuner.run(RandomStructuredAgent(batch_size=16), seed)
        assert len(tuner.trials) == 40 and extra["combination_draws"] >= 0
        runs.append([t.config for t in tuner.trials])
        assert len(set(runs[-1])) == 40  # distinct draws
        for config in runs[-1]:
            env.search_space.check(config)
    assert runs[0] == runs[1] and runs[0] != runs[2]
    env.close()


def test_stops_when_the_space_runs_dry(catalogue, db):
    tiny = MicrokernelEnv(conv2d(1, 1, 17, 17, 16, 1, 1, 1, 0), catalogue=catalogue, db=db)
    tuner = synthetic_tuner(tiny.search_space, budget=10_000)
    tuner.run(RandomStructuredAgent(), 0)
    assert 0 < len(tuner.trials) < 10_000
    tiny.close()


def test_refuses_other_spaces(db):
    from tensorgym.envs.tile_hop import TileHopEnv

    env = TileHopEnv(conv2d(1, 4, 14, 14, 16, 3, 3, 1, "same"), db=db)
    with pytest.raises(ValueError, match="microkernel"):
        RandomStructuredAgent().tune(env, budget=2)
    with pytest.raises(ValueError):
        RandomStructuredAgent(batch_size=0)
    env.close()


def test_tunes_a_real_kernel(catalogue, db, measurer):
    env = MicrokernelEnv(conv2d(1, 8, 14, 14, 32, 3, 3, 1, "same"), catalogue=catalogue, db=db, measurer=measurer)
    result = RandomStructuredAgent(batch_size=3).tune(env, budget=3, seed=0)
    assert result.agent == "random-structured" and result.space == "microkernel"
    assert len(result.trials) == 3 and result.measured == 3
    assert result.best_gflops > 0 and result.best_config is not None
    env.search_space.check(result.best_config)
    # a second run with the same seed is answered from the database
    again = RandomStructuredAgent(batch_size=3).tune(env, budget=3, seed=0)
    assert again.reused == 3 and again.best_config == result.best_config
    env.close()


def test_the_random_agent_tunes_any_space(catalogue, db):
    """``random`` draws from whatever space the env has: in the microkernel space its draws are seed 003's."""
    from tensorgym.agents import RandomAgent

    env = MicrokernelEnv(SUITES["ResNet-50"]["R5"], catalogue=catalogue, db=db)
    agent = RandomAgent(batch_size=8)
    agent.check_space("microkernel")  # no error
    for seed in (0,):
        plain, structured = synthetic_tuner(env.search_space, 16), synthetic_tuner(env.search_space, 16)
        plain.run(agent, seed)
        structured.run(RandomStructuredAgent(batch_size=8), seed)
        assert [t.config for t in plain.trials] == [t.config for t in structured.trials]
    env.close()
