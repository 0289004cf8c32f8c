"""The Optuna agent: parametrisation, budget, determinism, duplicates, failures, resume from storage."""

import numpy as np
import optuna
import pytest

from fakes import SyntheticEvaluator, peak_at, small_matmul_space, synthetic_tuner
from tensorgym.agents.optuna_agent import OptunaAgent, TilesParametrisation
from tensorgym.envs import make_env
from tensorgym.spaces import Config, TilesSpace
from tensorgym.target import local_cpu
from tensorgym.tuner import Tuner
from tensorgym.workloads import conv2d, matmul


def _run(agent, tuner, seed=0):
    extra = tuner.run(agent, seed)
    return tuner.result(agent.name, seed, **extra)


@pytest.mark.parametrize("space", [small_matmul_space(), TilesSpace(conv2d(1, 24, 14, 14, 36, 3, 3), local_cpu())],
                         ids=["matmul", "conv"])
def test_every_parameter_vector_is_a_valid_config_and_every_config_is_reachable(space):
    params = TilesParametrisation(space)
    rng = np.random.default_rng(0)
    for _ in range(300):
        vector = {name: int(rng.integers(n)) for name, n in params.signature.items()}
        space.check(params.config(vector))
        config = space.sample(rng)
        assert params.config(params.params(config)) == config


def test_repair_keeps_the_innermost_level_and_fixes_the_outer_ones():
    space = small_matmul_space()  # 64 x 64 x 64
    params = TilesParametrisation(space)
    vector = params.params(space.sample(np.random.default_rng(1)))
    # Ask i = [?, 32, 8, 4]: 32 * 8 * 4 does not divide 64; the innermost 4 stays, 8 fits, 32 becomes 2.
    i_choices = next(c.choices for c in space.coordinates if c.label == "i.1")
    vector.update({"i.1": i_choices.index(32), "i.2": i_choices.index(8), "i.3": i_choices.index(4)})
    assert params.config(vector)["i"] == (1, 2, 8, 4)


@pytest.mark.parametrize("budget,batch_size", [(1, 1), (7, 2), (25, 4)])
def test_budget_is_spent_exactly_and_nothing_is_measured_twice(budget, batch_size):
    tuner = synthetic_tuner(budget=budget)
    result = _run(OptunaAgent(storage=None, batch_size=batch_size), tuner)
    evaluator = tuner.evaluator
    assert len(result.trials) == budget == evaluator.measured
    assert len(set(evaluator.requests)) == len(evaluator.requests)


def test_deterministic_per_seed():
    def configs(seed):
        return [t.config for t in _run(OptunaAgent(storage=None), synthetic_tuner(budget=24), seed).trials]

    assert configs(5) == configs(5) and configs(5) != configs(6)


def test_tpe_beats_its_random_start_on_a_smooth_landscape():
    space = small_matmul_space()
    optimum = space.sample(np.random.default_rng(7))
    result = _run(OptunaAgent(storage=None), synthetic_tuner(space, peak_at(space, optimum), budget=96), seed=1)
    assert result.best_gflops > result.best_at(trials=10)


def test_a_space_smaller_than_the_budget_ends_the_search():
    tiny = TilesSpace(matmul(2, 1, 1), local_cpu(), unroll_choices=(0,))  # 4 tilings x 2 cache_write = 8 configs
    tuner = Tuner(SyntheticEvaluator(tiny, lambda c: 1.0 + sum(c["i"])), budget=20)
    result = _run(OptunaAgent(storage=None, max_duplicates=4), tuner)
    assert len(result.trials) == 8 and len({t.config for t in result.trials}) == 8
    assert result.extra["fallbacks"] >= 1


def test_failed_kernels_are_told_zero(tmp_path):
    space = small_matmul_space()
    perf = peak_at(space, space.sample(np.random.default_rng(2)))
    tuner = Tuner(SyntheticEvaluator(space, lambda c: None if c["cache_write"] else perf(c)), budget=30)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    result = _run(OptunaAgent(storage=url), tuner)
    study = optuna.load_study(study_name=result.extra["study"], storage=url)
    told = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(told) >= 30
    for trial in told:
        assert (trial.value == 0.0) == bool(trial.params["cache_write"])
        if "status" in trial.user_attrs:
            assert trial.user_attrs["status"] == ("build_error" if trial.params["cache_write"] else "ok")


def test_resume_replays_the_study_and_measures_only_what_is_new(tmp_path):
    space = small_matmul_space()
    evaluator = SyntheticEvaluator(space, peak_at(space, space.sample(np.random.default_rng(3))))
    url = f"sqlite:///{tmp_path / 'study.db'}"
    first = _run(OptunaAgent(storage=url), Tuner(evaluator, budget=10), seed=4)
    second = _run(OptunaAgent(storage=url), Tuner(evaluator, budget=16), seed=4)
    assert [t.config for t in second.trials[:10]] == [t.config for t in first.trials]
    assert second.extra["replayed"] >= 10 and second.reused == 10 and second.measured == 6
    assert evaluator.measured == 16 and len(second.trials) == 16


def test_resume_after_an_interrupted_run(tmp_path):
    space = small_matmul_space()
    perf = peak_at(space, space.sample(np.random.default_rng(5)))
    calls = {"n": 0, "fail_at": 7}

    def flaky(config):
        calls["n"] += 1
        if calls["n"] == calls["fail_at"]:
            raise KeyboardInterrupt  # the run is killed in the middle of a batch
        return perf(config)

    evaluator = SyntheticEvaluator(space, flaky)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    with pytest.raises(KeyboardInterrupt):
        _run(OptunaAgent(storage=url, batch_size=4), Tuner(evaluator, budget=12), seed=8)
    assert evaluator.measured == 6
    calls["fail_at"] = -1
    result = _run(OptunaAgent(storage=url, batch_size=4), Tuner(evaluator, budget=12), seed=8)
    assert len(result.trials) == 12 and len({t.config for t in result.trials}) == 12
    assert result.reused == 6 and evaluator.measured == 12
    study = optuna.load_study(study_name=result.extra["study"], storage=url)
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]


def test_a_study_made_with_other_parameters_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    tuner = synthetic_tuner(budget=3)
    result = _run(OptunaAgent(storage=url), tuner, seed=0)
    optuna.load_study(study_name=result.extra["study"], storage=url).set_user_attr("parameters", {"x": 2})
    with pytest.raises(ValueError, match="other parameters"):
        _run(OptunaAgent(storage=url), synthetic_tuner(budget=3), seed=0)


def test_bad_options_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown Optuna sampler"):
        OptunaAgent(sampler="anneal")
    with pytest.raises(ValueError, match="batch_size"):
        OptunaAgent(batch_size=0)


def test_random_gp_and_cmaes_samplers_run():
    for sampler in ("random", "gp", "cmaes"):
        result = _run(OptunaAgent(sampler=sampler, storage=None, n_startup_trials=4), synthetic_tuner(budget=8))
        assert len(result.trials) == 8


@pytest.mark.slow
def test_optuna_on_real_kernels_stores_everything_and_resumes(tmp_path, measurer):
    db = tmp_path / "records.db"
    env = make_env(matmul(64, 64, 64), db=db, measurer=measurer)
    try:
        first = OptunaAgent().tune(env, budget=6, seed=0)
        assert len(first.trials) == 6 and first.measured == 6 and first.best_gflops > 0
        assert env.unwrapped.database.count() >= 6
        assert (tmp_path / "records.db.optuna.db").exists()
        again = OptunaAgent().tune(env, budget=6, seed=0)
        assert again.measured == 0 and again.reused == 6
        assert [t.config for t in again.trials] == [t.config for t in first.trials]
        assert isinstance(again.best_config, Config)
    finally:
        env.close()


_CONCURRENT = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import gymnasium as gym
import tensorgym
from fakes import SyntheticMeasurer
from tensorgym.agents.optuna_agent import OptunaAgent
db, seed, barrier, n = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
env = gym.make("tensorgym/Matmul-v0", M=48, N=64, K=32, db=db, measurer=SyntheticMeasurer())
agent = OptunaAgent()
(barrier / f"ready{{seed}}").touch()
while len(list(barrier.glob("ready*"))) < n:  # start the searches at one instant
    time.sleep(0.001)
result = agent.tune(env, budget=6, seed=seed)
env.close()
print(result.measured + result.reused)
"""


@pytest.mark.parametrize("processes", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_processes_starting_the_optuna_agent_together_share_its_storage(tmp_path, processes):
    """Each process creates the side storage ``<db>.optuna.db`` at the same moment (it used to fail
    with 'table studies already exists' about one time in three); every one of them must finish."""
    import subprocess
    import sys
    from pathlib import Path

    script = _CONCURRENT.format(tests=str(Path(__file__).parent))
    for attempt in range(2):
        barrier = tmp_path / f"barrier{attempt}"
        barrier.mkdir()
        db = tmp_path / f"shared{attempt}.db"
        procs = [subprocess.Popen([sys.executable, "-c", script, str(db), str(seed), str(barrier), str(processes)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for seed in range(processes)]
        outputs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0] * processes, [err[-2000:] for _, err in outputs]
        assert [out.split()[-1] for out, _ in outputs] == ["6"] * processes
        storage = optuna.storages.RDBStorage(f"sqlite:///{db}.optuna.db")
        assert len(storage.get_all_studies()) == processes  # one study per seed
        storage.engine.dispose()
