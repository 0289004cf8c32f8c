"""Task schedulers: gradients on hand-built histories, probability_sample, rounds on synthetic networks, resume."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import SyntheticMeasurer, synthetic_gflops

from tensorgym import catalog
from tensorgym.agents.schedulers import (
    DualTaskScheduler, GradientScheduler, MetaScheduleGradientScheduler, RoundRobinScheduler, ansor_gradient,
    metaschedule_gradient,
)
from tensorgym.candidate_sampling import kept_count, probability_sample, sampling_probabilities
from tensorgym.catalog import make_scheduler
from tensorgym.config import Config
from tensorgym.database import Database
from tensorgym.envs.network_env import NetworkEnv
from tensorgym.errors import InvalidArgumentError
from tensorgym.networks import Network, NetworkTask
from tensorgym.record import Record, Status
from tensorgym.tuner import CandidateState, TaskState, TuningCallback
from tensorgym.workloads import conv2d, matmul

GA_SMALL = {"population": 64, "generations": 2, "num_warmup_sample": 16}


# -- gradients on hand-built histories ---------------------------------------------------------------
def _state(index: int, workload, weight: float, history: list[float]) -> TaskState:
    best = Record(workload.key, "t", "tiles", Config({"x": index}), Status.OK, latency_s=history[-1])
    return TaskState(index, NetworkTask(workload, weight), space=None,
                     candidates=[CandidateState(0, "all", best=best)], rounds=len(history), history=list(history))


class _HandBuilt:
    """What schedulers read of a Tuner: its tasks and which are live."""

    def __init__(self, tasks: list[TaskState]):
        self.tasks = tasks

    @property
    def live_tasks(self) -> list[int]:
        return [t.index for t in self.tasks if t.live]


def _three_tasks(weight_c: float = 2.0) -> _HandBuilt:
    return _HandBuilt([
        _state(0, matmul(64, 64, 64), 1.0, [10.0, 8.0, 6.0, 5.0]),
        _state(1, matmul(128, 64, 64), 4.0, [3.0, 3.0]),
        _state(2, conv2d(1, 8, 16, 16, 16, 3, 3), weight_c, [20.0, 20.0, 19.0, 19.0, 19.0]),
        _state(3, matmul(16, 16, 16), 0.0, [1.0]),  # weight 0: never picked
    ])


def test_ansor_gradient_picks_the_largest_weighted_gradient():
    # By hand (alpha 0.2, theta 2, window 3; each task alone in its similarity group):
    #   A: backward (5 - 10) / 3, forward (5 - 5/4) - 5 = -1.25   -> 1 * (0.2 * -5/3 + 0.8 * -1.25) = -4/3
    #   B: backward 0 (2 rounds),  forward (3 - 3/2) - 3 = -1.5    -> 4 * (0.8 * -1.5)               = -4.8
    #   C: backward (m(5) - m(5 - 3)) / 3 = (19 - 20) / 3, forward (19 - 19/5) - 19 = -3.8
    #                                                             -> 2 * (0.2 * -1/3 + 0.8 * -3.8)  = -6.2133
    tuner = _three_tasks()
    scheduler = GradientScheduler()
    scheduler.start(tuner, np.random.default_rng(0))
    grads = scheduler.gradients(tuner)
    assert grads == pytest.approx({0: -4 / 3, 1: -4.8, 2: 2 * (0.2 * -1 / 3 + 0.8 * -3.8)})
    assert scheduler.next_task(tuner, np.random.default_rng(0)) == 2
    # The weights decide: with C counted half a time, B's gradient is the largest.
    tuner = _three_tasks(weight_c=0.5)
    scheduler.start(tuner, np.random.default_rng(0))
    assert scheduler.next_task(tuner, np.random.default_rng(0)) == 1


def test_ansor_gradient_expects_a_task_to_reach_half_its_similar_tasks_throughput():
    # X and Y: the same op and FLOPs (one similarity group). X (10 s, 2 rounds) expects to reach
    # 1/theta of Y's throughput: theta * C / (C / 1) = 2 s < X's 1/t forecast of 5 s.
    x, y = matmul(64, 64, 64), matmul(32, 128, 64)
    assert x.flops == y.flops
    tuner = _HandBuilt([_state(0, x, 1.0, [10.0, 10.0]), _state(1, y, 1.0, [1.0])])
    scheduler = GradientScheduler()
    scheduler.start(tuner, np.random.default_rng(0))
    assert scheduler.similar(0) == [0, 1]
    assert scheduler.gradients(tuner)[0] == pytest.approx(0.8 * (2.0 - 10.0))
    assert ansor_gradient(1.0, [10.0, 10.0], 10.0, x.flops, None, alpha=0.2, theta=2.0, window=3) == \
        pytest.approx(0.8 * (5.0 - 10.0))


def test_metaschedule_gradient_by_hand():
    #   A: 1 * (0.2 * (10 - 5) / 3 + 0.8 * 5 / 4) = 4/3;  B: 4 * 0.8 * 3 / 2 = 4.8
    #   C: 2 * (0.2 * (m[1] - m[4]) / 3 + 0.8 * 19 / 5) = 2 * (0.2 / 3 + 3.04) = 6.2133
    tuner = _three_tasks()
    scheduler = MetaScheduleGradientScheduler()
    assert scheduler.gradients(tuner) == pytest.approx({0: 4 / 3, 1: 4.8, 2: 2 * (0.2 / 3 + 0.8 * 3.8)})
    assert scheduler.next_task(tuner, np.random.default_rng(0)) == 2
    assert metaschedule_gradient(1.0, [4.0], alpha=0.2, window=3) == pytest.approx(0.8 * 4.0)


def test_equal_gradients_pick_a_random_live_task_and_never_a_dead_one():
    w = matmul(32, 32, 32)
    tasks = [_state(i, matmul(32, 32, 32 + i), 1.0, [1.0]) for i in range(3)] + [_state(3, w, 0.0, [1.0])]
    tasks[1].dead = True
    tuner = _HandBuilt(tasks)
    picks = {MetaScheduleGradientScheduler().next_task(tuner, np.random.default_rng(s)) for s in range(30)}
    assert picks == {0, 2}


# -- probability_sample --------------------------------------------------------------------------
@pytest.mark.parametrize("kappa, n, kept", [(0.2, 7, 2), (0.2, 5, 1), (0.6, 5, 3), (0.4, 5, 2), (1.0, 4, 4),
                                            (0.2, 1, 1), (0.2, 35, 7)])
def test_probability_sample_keeps_ceil_kappa_of_the_candidates(kappa, n, kept):
    latencies = {k: 1.0 + k for k in range(n)}
    chosen = probability_sample(latencies, set(), kappa=kappa)
    assert kept_count(kappa, n) == kept and len(chosen) == kept
    assert chosen == list(range(kept))  # the fastest ones


def test_probability_sample_boosts_candidates_dropped_last_round():
    latencies = {0: 1.0, 1: 1.1, 2: None}
    p = sampling_probabilities(latencies, set(), beta=0.2)
    assert p == pytest.approx({0: 1.1 / 2.1, 1: 1.0 / 2.1, 2: 0.0})  # P ~ 1 / latency; no kernel: 0
    boosted = sampling_probabilities(latencies, {1}, beta=0.2)
    assert boosted[1] / boosted[0] == pytest.approx(1.2 * p[1] / p[0]) and sum(boosted.values()) == pytest.approx(1)
    assert probability_sample(latencies, set(), kappa=0.3) == [0]
    assert probability_sample(latencies, {1}, kappa=0.3, beta=0.2) == [1]  # 1.2 / 1.1 > 1: it comes back
    assert probability_sample(latencies, {1}, kappa=0.3, beta=0.05) == [0]  # too small a boost
    assert probability_sample({0: None, 1: None}, set(), kappa=0.5) == [0]  # no kernel anywhere: uniform


def test_probability_sample_by_sampling_is_seeded_and_distinct():
    latencies = {k: 1.0 + k for k in range(6)}
    a = probability_sample(latencies, {5}, kappa=0.5, selection="sample", rng=np.random.default_rng(3))
    b = probability_sample(latencies, {5}, kappa=0.5, selection="sample", rng=np.random.default_rng(3))
    assert a == b and len(set(a)) == 3
    with pytest.raises(InvalidArgumentError):
        probability_sample(latencies, set(), selection="sample")
    with pytest.raises(InvalidArgumentError):
        probability_sample(latencies, set(), selection="best")


# -- schedulers on synthetic networks ------------------------------------------------------------------
def _net(*layers) -> Network:
    return Network.from_pairs("toy", layers)


TOY = [(matmul(64, 64, 64, name="a"), 2), (matmul(32, 64, 128, name="b"), 1), (matmul(16, 16, 16, name="z"), 0),
       (conv2d(1, 8, 16, 16, 16, 3, 3, name="c"), 3)]


def _env(net: Network, db=None, measurer=None, **kwargs) -> NetworkEnv:
    return NetworkEnv(net, db=db if db is not None else Database(":memory:"), measurer=measurer or SyntheticMeasurer(),
                      agent_options=kwargs.pop("agent_options", GA_SMALL), **kwargs)


@pytest.fixture()
def candidates_space(monkeypatch):
    """The ``tiles`` space with one candidate per unroll choice (4): multi-candidate tasks."""
    monkeypatch.setitem(catalog.SPACES, "tiles", "fakes:CandidateTilesSpace")


@pytest.mark.parametrize("name", ["round-robin", "gradient", "metaschedule-gradient", "dual-task"])
@pytest.mark.parametrize("budget", [1, 50, 200])
def test_every_scheduler_spends_the_budget_exactly_and_never_tunes_weight_zero(name, budget):
    env = _env(_net(*TOY))
    result = make_scheduler(name).tune(env, budget=budget, seed=0)
    assert len(result.trials) == budget == sum(t.trials for t in result.tasks)
    assert result.tasks[2].trials == 0 and "weight 0" in result.tasks[2].note
    assert result.measure_per_round == max(1, min(64, budget // 3))
    env.close()


@pytest.mark.parametrize("name", ["round-robin", "gradient", "metaschedule-gradient", "dual-task"])
def test_schedulers_are_deterministic_per_seed(name, candidates_space):
    runs = [make_scheduler(name).tune(_env(_net(*TOY)), budget=120, seed=s) for s in (1, 1, 2)]
    trace = [[(t.task, t.candidate, t.latency_s) for t in r.trials] for r in runs]
    assert trace[0] == trace[1] != trace[2]


def test_round_robin_cycles_through_the_live_tasks():
    result = RoundRobinScheduler().tune(_env(_net(*TOY)), budget=8 * 7, seed=0, measure_per_round=8)
    assert [r.task for r in result.rounds] == [0, 1, 3, 0, 1, 3, 0]
    assert [r.warmup for r in result.rounds] == [True] * 3 + [False] * 4


def test_a_task_whose_space_runs_dry_dies_and_the_others_go_on():
    net = _net((matmul(1, 1, 1, name="one"), 5), (matmul(32, 32, 32, name="big"), 1))
    result = RoundRobinScheduler().tune(_env(net, agent_options={"batch_size": 4}, agent="random"), budget=100,
                                        seed=0, measure_per_round=16)
    assert result.tasks[0].dead and result.tasks[0].trials == 8  # 4 unroll x 2 cache_write configs
    assert not result.tasks[1].dead and len(result.trials) == 100


def test_dual_task_warms_up_every_candidate_then_tunes_the_kept_ones(candidates_space, monkeypatch):
    asked: list[tuple[int, list[int]]] = []
    original = DualTaskScheduler.candidates

    def spy(self, tuner, task, rng):
        kept = original(self, tuner, task, rng)
        asked.append((task, kept))
        return kept

    monkeypatch.setattr(DualTaskScheduler, "candidates", spy)
    result = DualTaskScheduler(kappa=0.5).tune(_env(_net(*TOY)), budget=400, seed=0, measure_per_round=32)
    warmup = [r for r in result.rounds if r.warmup]
    assert [r.task for r in warmup] == [0, 1, 3] and all(r.candidates == (0, 1, 2, 3) for r in warmup)
    assert all(r.trials == 32 for r in warmup)  # 8 per candidate: every candidate measured in the warm-up
    later = [r for r in result.rounds if not r.warmup]
    assert later and [(r.task, list(r.candidates)) for r in later] == asked
    assert all(len(r.candidates) == kept_count(0.5, 4) for r in later)
    assert result.extra["kappa"] == 0.5 and result.extra["beta"] == 0.2


def test_dual_task_spends_its_rounds_on_the_fast_candidate(candidates_space):
    """With a candidate 4x faster than the others, dual-task (kappa 0.2: one of four kept) gives its later
    rounds to it; the gradient scheduler keeps splitting them four ways."""
    def perf(space, config):
        return synthetic_gflops(space, config) * (4.0 if config["unroll"] == 64 else 1.0)

    spent = {}
    for scheduler in (DualTaskScheduler(), GradientScheduler()):
        result = scheduler.tune(_env(_net(*TOY), measurer=SyntheticMeasurer(perf)), budget=600, seed=0,
                                measure_per_round=32)
        fast = [t.candidate_trials[2] / t.trials for t in result.tasks if t.trials]
        spent[scheduler.name] = min(fast)
        assert all(t.best_candidate_name == "unroll64" for t in result.tasks if t.trials)
    assert spent["dual-task"] > 0.5 > spent["gradient"]


def test_scheduler_options_are_checked():
    for bad in ({"kappa": 0}, {"kappa": 1.5}, {"beta": -1}, {"selection": "best"}, {"window": 0}, {"alpha": 2}):
        with pytest.raises(InvalidArgumentError):
            make_scheduler("dual-task", **bad)


def test_time_budget_ends_the_run():
    result = RoundRobinScheduler().tune(_env(_net(*TOY)), budget=None, time_budget=0.5, seed=0,
                                        measure_per_round=4)
    assert result.trials and result.trials[-1].elapsed_s < 5.0


# -- interrupted and resumed ---------------------------------------------------------------------------------
class _Interrupt(TuningCallback):
    def __init__(self, at: int):
        self.at = at

    def on_trial(self, trial) -> None:
        if trial.index == self.at:
            raise KeyboardInterrupt


def test_an_interrupted_run_resumes_loses_nothing_and_measures_nothing_twice(tmp_path, candidates_space):
    reference = DualTaskScheduler().tune(_env(_net(*TOY)), budget=300, seed=4, measure_per_round=24)

    measurer = SyntheticMeasurer()
    db = Database(tmp_path / "runs.db")
    env = _env(_net(*TOY), db=db, measurer=measurer)
    with pytest.raises(KeyboardInterrupt):
        DualTaskScheduler().tune(env, budget=300, seed=4, measure_per_round=24, callback=_Interrupt(at=130))
    kept = len(db)
    assert kept >= 130  # every trial seen before the interrupt is in the database
    resumed = DualTaskScheduler().tune(env, budget=300, seed=4, measure_per_round=24)
    assert resumed.reused == kept and resumed.measured == 300 - kept
    assert len(measurer.measured) == len(set(measurer.measured)) == 300  # nothing measured twice
    assert [(t.task, t.candidate, t.latency_s) for t in resumed.trials] == \
        [(t.task, t.candidate, t.latency_s) for t in reference.trials]
    assert resumed.best_latency_s == reference.best_latency_s
    env.close()
    db.close()
