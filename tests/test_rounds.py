"""Searches in rounds (the Tuner's run_round): agents continue across rounds exactly as in one run."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fakes import SyntheticEvaluator, peak_at, run_search, small_matmul_space, synthetic_tuner

from tensorgym.agents.dgd import DGDAgent
from tensorgym.agents.ga import GAAgent
from tensorgym.agents.random_search import RandomAgent
from tensorgym.errors import InvalidArgumentError
from tensorgym.spaces import TilesSpace
from tensorgym.target import constructed_cpu
from tensorgym.tuner import Tuner
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
    tuner = Tuner(evaluator, budget=total, label=name)
    search = tuner.start(AGENTS[name](), seed=7)
    try:
        used = [tuner.run_round(0, trials=min(round_size, total - done)).trials
                for done in range(0, total, round_size)]
        assert not search.finished  # it waits for more
    finally:
        tuner.close()
    configs = [t.config for t in tuner.trials]
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
            tuner = Tuner(evaluator, budget=128)
            tuner.start(agent.spawn(), seed=seed)
            for _ in range(8):
                tuner.run_round(0, trials=16)
            tuner.close()
            scores.append(tuner.best.gflops)
        best[name] = np.mean(scores)
    assert best["ga"] > best["random"]


def test_a_search_that_runs_dry_finishes_and_gives_back_fewer_trials():
    space = TilesSpace(matmul(2, 2, 1, name="tiny"), constructed_cpu("haswell"))
    tuner = Tuner(SyntheticEvaluator(space, lambda c: 1.0), budget=2000)
    search = tuner.start(RandomAgent(batch_size=4))
    used = tuner.run_round(0, trials=1000).trials
    assert 0 < used < 1000 and search.finished
    with pytest.raises(InvalidArgumentError, match="dead"):  # a finished search gets no more rounds
        tuner.run_round(0, trials=10)
    tuner.close()


class _Broken(RandomAgent):
    def tell(self, records):
        raise ValueError("bug in the search")


def test_errors_of_the_search_are_raised_in_the_caller_and_a_closed_session_refuses_rounds():
    broken = Tuner(_evaluator(), budget=100)
    broken.start(_Broken(batch_size=2))
    with pytest.raises(ValueError, match="bug in the search"):
        broken.run_round(0, trials=10)

    partial = Tuner(_evaluator(), budget=100)
    search = partial.start(DGDAgent(initial_samples=8))
    partial.run_round(0, trials=3)  # the DGD's initial batch waits with 5 configs unmeasured
    partial.close()
    assert search.strategy.summary()["initial_samples"] == 3  # closing booked what was measured
    with pytest.raises(InvalidArgumentError, match="closed"):
        partial.run_round(0, trials=1)


class _Repeating(RandomAgent):
    """Proposes its first batch again and again: nothing new once it is measured."""

    def ask(self, n=None):
        self.first = getattr(self, "first", None) or super().ask(n)
        return self.first


def test_a_strategy_proposing_only_what_it_measured_finishes():
    tuner = Tuner(_evaluator(), budget=100)
    search = tuner.start(_Repeating(batch_size=4))
    assert tuner.run_round(0, trials=10).trials == 4 and search.finished
    tuner.close()


def test_measurements_and_the_search_stay_in_the_callers_thread():
    caller = threading.get_ident()
    evaluator = _evaluator()
    measuring_threads = set()
    original = evaluator.evaluate

    def evaluate(configs):
        measuring_threads.add(threading.get_ident())
        return original(configs)

    evaluator.evaluate = evaluate
    threads_before = set(threading.enumerate())
    tuner = Tuner(evaluator, budget=100)
    tuner.start(RandomAgent(batch_size=4))
    for _ in range(5):
        tuner.run_round(0, trials=3)
        assert set(threading.enumerate()) <= threads_before  # the tuner starts no thread
    tuner.close()
    assert measuring_threads == {caller}


def test_round_sizes_are_checked():
    tuner = Tuner(_evaluator(), budget=100)
    tuner.start(RandomAgent())
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidArgumentError):
            tuner.run_round(0, trials=bad)
    tuner.close()
    with pytest.raises(InvalidArgumentError, match="SearchStrategy"):
        Tuner(_evaluator(), budget=100).start(RandomAgent().ask)
