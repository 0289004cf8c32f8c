"""Searches in rounds (tensorgym.rounds): agents continue across rounds exactly as in one run."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fakes import SyntheticEvaluator, peak_at, run_search, small_matmul_space, synthetic_tuner

from tensorgym.agents.dgd import DGDAgent
from tensorgym.agents.ga import GAAgent
from tensorgym.agents.random_search import RandomAgent
from tensorgym.errors import InvalidArgumentError
from tensorgym.rounds import SearchSession
from tensorgym.spaces import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.workloads import matmul

AGENTS = {
    "ga": lambda: GAAgent(population=64, generations=2, batch_size=8, num_warmup_sample=16),
    "dgd": lambda: DGDAgent(initial_samples=16),
    "random": lambda: RandomAgent(batch_size=8),
}


def _evaluator() -> SyntheticEvaluator:
    space = small_matmul_space()
    return SyntheticEvaluator(space, peak_at(space, space.sample(np.random.default_rng(1234))))


@pytest.mark.parametrize("name", sorted(AGENTS))
@pytest.mark.parametrize("round_size", [5, 8, 13])
def test_a_search_in_rounds_makes_the_trials_of_one_uninterrupted_run(name, round_size):
    """Rounds of any size (batches spanning rounds included) continue the search: the same configs, in the
    same order, as one run of the same seed, none repeated, so its population and model persisted."""
    total = 48
    reference = run_search(AGENTS[name](), synthetic_tuner(budget=total), seed=7)
    evaluator = _evaluator()
    session = SearchSession(AGENTS[name]().search, evaluator, seed=7, label=name)
    try:
        used = [session.run_round(min(round_size, total - done)) for done in range(0, total, round_size)]
        assert not session.finished  # it waits for more
    finally:
        session.close()
    configs = [t.config for t in session.tuner.trials]
    assert sum(used) == total == len(configs) == len(set(configs))
    assert configs == [t.config for t in reference.trials]
    assert evaluator.measured == total  # nothing measured twice, nothing beyond the rounds granted


def test_the_ga_model_guides_later_rounds():
    """The GA's cost model, trained on earlier rounds, is still there in later ones: its later rounds find
    better configs on a smooth landscape than random search with the same rounds."""
    space = small_matmul_space()
    best = {}
    for name, agent in (("ga", GAAgent(population=256, batch_size=16, num_warmup_sample=32)),
                        ("random", RandomAgent(batch_size=16))):
        scores = []
        for seed in range(3):
            evaluator = SyntheticEvaluator(space, peak_at(space, space.sample(np.random.default_rng(99))))
            session = SearchSession(agent.search, evaluator, seed=seed)
            for _ in range(8):
                session.run_round(16)
            session.close()
            scores.append(session.tuner.best.gflops)
        best[name] = np.mean(scores)
    assert best["ga"] > best["random"]


def test_a_search_that_runs_dry_finishes_and_gives_back_fewer_trials():
    space = TilesSpace(matmul(2, 2, 1, name="tiny"), local_cpu())
    session = SearchSession(RandomAgent(batch_size=4).search, SyntheticEvaluator(space, lambda c: 1.0))
    used = session.run_round(1000)
    assert 0 < used < 1000 and session.finished
    assert session.run_round(10) == 0  # a finished search asks for nothing
    session.close()


def test_errors_of_the_search_are_raised_in_the_caller_and_close_stops_the_thread():
    def broken(tuner, rng, seed):
        tuner.measure(tuner.sample(rng, 2))
        raise ValueError("bug in the search")

    session = SearchSession(broken, _evaluator())
    with pytest.raises(ValueError, match="bug in the search"):
        session.run_round(10)
    assert session.finished

    blocked = SearchSession(RandomAgent(batch_size=8).search, _evaluator())
    blocked.run_round(3)  # the search now waits inside measure() with 5 configs pending
    thread = blocked._thread
    blocked.close()
    assert not thread.is_alive()
    with pytest.raises(InvalidArgumentError, match="closed"):
        blocked.run_round(1)


def test_closing_unwinds_a_search_that_catches_exceptions():
    def stubborn(tuner, rng, seed):
        while True:
            try:
                tuner.measure(tuner.sample(rng, 4))
            except Exception:  # noqa: BLE001 - what the test checks: SessionClosed is not an Exception
                pass

    session = SearchSession(stubborn, _evaluator())
    session.run_round(6)
    thread = session._thread
    session.close()
    assert not thread.is_alive()


def test_only_one_thread_runs_at_a_time_and_measurements_stay_in_the_caller():
    caller = threading.get_ident()
    evaluator = _evaluator()
    measuring_threads = set()
    original = evaluator.evaluate

    def evaluate(configs):
        measuring_threads.add(threading.get_ident())
        return original(configs)

    evaluator.evaluate = evaluate
    session = SearchSession(RandomAgent(batch_size=4).search, evaluator)
    for _ in range(5):
        session.run_round(3)
    session.close()
    assert measuring_threads == {caller}


def test_round_sizes_are_checked():
    session = SearchSession(RandomAgent().search, _evaluator())
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidArgumentError):
            session.run_round(bad)
    session.close()
