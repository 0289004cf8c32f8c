"""The Tuner API and the random agent: budgets, determinism, resume after a kill."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from fakes import SyntheticEvaluator, peak_at, small_matmul_space, synthetic_tuner
from tensorgym.agents import RandomAgent, make_agent
from tensorgym.database import Database
from tensorgym.tuner import Tuner, TuningResult


@pytest.mark.parametrize("budget", [1, 5, 16, 33])
def test_random_agent_spends_the_budget_exactly(budget):
    tuner = synthetic_tuner(budget=budget)
    tuner.run(RandomAgent(batch_size=8), 0)
    assert len(tuner.trials) == budget == tuner.evaluator.measured
    assert len({t.config for t in tuner.trials}) == budget


def test_measure_cuts_a_batch_to_the_remaining_budget():
    tuner = synthetic_tuner(budget=5)
    configs = tuner.sample(np.random.default_rng(0), 8)
    assert len(tuner.measure(configs)) == 5 and tuner.exhausted and tuner.remaining == 0
    assert tuner.measure(tuner.sample(np.random.default_rng(1), 2)) == []


def test_configs_measured_in_this_run_are_free():
    tuner = synthetic_tuner(budget=4)
    configs = tuner.sample(np.random.default_rng(0), 2)
    tuner.measure(configs)
    tuner.measure(configs + configs)
    assert len(tuner.trials) == 2 and tuner.seen(configs[0]) is not None


def test_random_agent_is_deterministic_per_seed():
    def run(seed):
        tuner = synthetic_tuner(budget=20)
        tuner.run(RandomAgent(), seed)
        return [t.config for t in tuner.trials]

    assert run(3) == run(3) and run(3) != run(4)


def test_best_so_far_and_result_queries():
    space = small_matmul_space()
    optimum = space.sample(np.random.default_rng(9))
    tuner = Tuner(SyntheticEvaluator(space, peak_at(space, optimum)), budget=10)
    tuner.measure([optimum] + tuner.sample(np.random.default_rng(0), 9))
    result = tuner.result("test", seed=0)
    assert result.best_config == optimum and result.best_gflops == pytest.approx(100.0)
    assert result.best_at(trials=1) == pytest.approx(100.0) and result.trials_to_reach(0.95) == 1
    assert [t.index for t in result.trials] == list(range(1, 11))
    assert all(a.elapsed_s <= b.elapsed_s for a, b in zip(result.trials, result.trials[1:]))
    again = TuningResult.from_json(result.to_json())
    assert again.best_config == optimum and again.trials == result.trials


def test_time_budget_stops_the_run():
    space = small_matmul_space()

    def slow(config):
        time.sleep(0.02)
        return 1.0

    tuner = Tuner(SyntheticEvaluator(space, slow), budget=None, time_budget=0.3)
    tuner.run(RandomAgent(batch_size=4), 0)
    assert 5 <= len(tuner.trials) < 100 and tuner.exhausted


def test_bad_budgets_and_agents_are_clear_errors():
    evaluator = SyntheticEvaluator(small_matmul_space(), lambda c: 1.0)
    with pytest.raises(ValueError, match="budget"):
        Tuner(evaluator, budget=0)
    with pytest.raises(ValueError, match="must end"):
        Tuner(evaluator, budget=None, time_budget=None)
    with pytest.raises(ValueError, match="unknown agent 'nope'"):
        make_agent("nope")


_RUN = textwrap.dedent("""
    import sys
    import tensorgym
    from tensorgym.agents import RandomAgent
    env = tensorgym.make_env(tensorgym.matmul(32, 48, 64), db=sys.argv[1])
    result = RandomAgent(batch_size=2).tune(env, budget=int(sys.argv[2]), seed=11)
    print("MEASURED", result.measured, "REUSED", result.reused, flush=True)
    env.close()
""")


@pytest.mark.slow
def test_a_killed_run_resumes_without_losing_or_remeasuring(tmp_path):
    db_path, budget = str(tmp_path / "resume.db"), 16
    proc = subprocess.Popen([sys.executable, "-c", _RUN, db_path, str(budget)], start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # kill it once some, but not all, records are in
        time.sleep(0.2)
        if os.path.exists(db_path):
            with Database(db_path) as db:
                if len(db) >= 5:
                    break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with Database(db_path) as db:
        before = {r.config: r for r in db.records()}
    assert 5 <= len(before) < budget

    out = subprocess.run([sys.executable, "-c", _RUN, db_path, str(budget)], capture_output=True, text=True,
                         timeout=600, check=True).stdout
    measured, reused = int(out.split()[1]), int(out.split()[3])
    with Database(db_path) as db:
        after = {r.config: r for r in db.records()}
    assert len(after) == budget
    assert all(after[c] == r for c, r in before.items())  # nothing lost, nothing overwritten
    assert reused == len(before) and measured == budget - len(before)  # nothing measured twice


def test_measure_returns_records_in_the_order_asked():
    tuner = synthetic_tuner(budget=10)
    rng = np.random.default_rng(3)
    first = tuner.sample(rng, 4)
    tuner.measure(first[:2])  # measured before: answered from the run
    asked = [first[3], first[0], first[2], first[3], first[1]]
    records = tuner.measure(asked)
    assert [r.config for r in records] == [first[3], first[0], first[2], first[1]]  # repeats appear once
    tight = synthetic_tuner(budget=2)
    configs = tight.sample(rng, 4)
    tight.measure(configs[2:3])
    assert [r.config for r in tight.measure(configs)] == [configs[0], configs[2]]  # budget cut, order kept


def test_callbacks_see_the_run(tmp_path):
    from tensorgym.tuner import TuningCallback

    class Recorder(TuningCallback):
        def __init__(self):
            self.events = []

        def on_start(self, label, budget):
            self.events.append(("start", label, budget))

        def on_trial(self, trial):
            self.events.append(("trial", trial.index))

        def on_end(self):
            self.events.append(("end",))

    recorder = Recorder()
    space = small_matmul_space()
    tuner = Tuner(SyntheticEvaluator(space, peak_at(space, space.sample(np.random.default_rng(0)))), budget=3,
                  callback=[recorder], label="run")
    tuner.run(RandomAgent(batch_size=2), 0)
    tuner.result("random", 0)
    tuner.result("random", 0)  # a second result does not end the run twice
    assert recorder.events == [("start", "run", 3), ("trial", 1), ("trial", 2), ("trial", 3), ("end",)]
