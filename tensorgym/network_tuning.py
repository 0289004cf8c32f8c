"""Tuning a network under one budget: the rounds a task scheduler gives to (task, candidate) pairs.

A :class:`NetworkTuner` is to a network what the :class:`~tensorgym.tuner.Tuner`
is to one workload: the API task schedulers (and the network env) use. It
holds, per task of the :class:`~tensorgym.networks.Network`, its space and
the state of every mapping candidate of that space (``Space.candidates``;
one, ``"all"``, in the spaces without candidates), and it runs *rounds*:

* :meth:`NetworkTuner.run_round` gives task ``i`` one round of
  ``measure_per_round`` trials, split evenly over the candidates the caller
  names (default: all the task's live candidates); each candidate's share
  goes to its own :class:`~tensorgym.rounds.SearchSession`, so the search
  inside each (task, candidate) continues across rounds without restarting
  (population, cost model and history persist);
* the search of a (task, candidate) is built once, by ``search_for`` (a
  :class:`~tensorgym.strategy.SearchStrategy`: the GA by default), over the candidate's restricted
  space (``Space.restricted``), with a seed derived from the run's seed, the
  workload and the candidate: the same pair searches the same way under
  every scheduler, so schedulers sharing a database share its measurements;
* every trial goes through an evaluator: answered from the database when it
  holds the config (a resumed run replays its trials for free), measured
  and committed otherwise.

**Budget.** ``budget`` counts trials over the whole network (a config
answered from the database is a trial too, as in the Tuner); a round is cut
to what remains. ``time_budget`` is seconds of the network's tuning clock:
the schedulers' own computing, the searches' computing and, per trial, the
wall seconds its measurement took when it was made (checked every 8 trials).
``measure_per_round`` defaults to Ansor's ``min(64, budget // live tasks)``.

**Objective.** ``estimate()`` is ``f = sum_i weight_i * m_i`` over the live
tasks, ``m_i`` the best latency over the task's candidates (None until every
live task has a correct kernel). Schedulers read :meth:`latencies`, where a
task without a correct kernel has :data:`FAILED_LATENCY_S` (Ansor's 1e10, a
number so that gradients stay finite).

**Dead.** Tasks of weight 0 are never tuned. A candidate is dead when a
round gave it no trial (its search proposed nothing new) or its search
finished (its space ran dry), and when its restricted space cannot be built
(the reason is kept); a task is dead when all its candidates are.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .config import Config
from .errors import InvalidArgumentError
from .evaluator import Evaluator
from .network_result import NetworkResult, NetworkTrial, RoundLog, TaskResult
from .networks import Network, NetworkTask
from .record import Record
from .rounds import SearchSession
from .strategy import GeneratorStrategy, Search, SearchHistory, SearchStrategy
from .spaces.base import Space, SpaceError
from .tuner import ProgressBarCallback, Trial, TuningCallback, as_callback, check_budget

log = logging.getLogger(__name__)

FAILED_LATENCY_S = 1e10  # Ansor's best cost of a task without a correct kernel
ANSOR_MEASURES_PER_ROUND = 64  # Ansor's and MetaSchedule's default round
TIME_CHECK_CHUNK = 8  # with a time budget, trials measured between looks at the clock (the Tuner's)


# -- callbacks -------------------------------------------------------------------------------------
class NetworkCallback(TuningCallback):
    """Hooks a network run calls as it goes: the :class:`~tensorgym.tuner.TuningCallback` hooks, whose
    ``on_trial`` gets a :class:`NetworkTrial` (``trial.estimate_s``: the estimate after it), and
    ``on_round``, called with a :class:`RoundLog` after each round. A list of them is a
    :class:`~tensorgym.tuner.CallbackList`."""


def _network_estimate(trial: NetworkTrial) -> str:
    return "network " + ("-" if trial.estimate_s is None else f"{trial.estimate_s * 1e3:.3f} ms")


class NetworkProgressBar(ProgressBarCallback, NetworkCallback):
    """A tqdm bar over the trial budget, with the estimated network latency."""

    def __init__(self) -> None:
        super().__init__(_network_estimate)


def as_network_callback(callback: "NetworkCallback | Sequence[NetworkCallback] | None") -> TuningCallback:
    """One callback from None, a :class:`NetworkCallback`, or a list of them."""
    return as_callback(callback, NetworkCallback)


# -- state -----------------------------------------------------------------------------------------
@dataclass
class CandidateState:
    """One mapping candidate of one task: its search session and what it has found."""

    index: int
    name: str
    session: SearchSession | None = None
    trials: int = 0
    best: Record | None = None
    dead: bool = False
    reason: str = ""  # why it is dead

    @property
    def latency_s(self) -> float | None:
        return None if self.best is None else self.best.latency_s


@dataclass
class TaskState:
    """One task of the network during a run."""

    index: int
    task: NetworkTask
    space: Space
    candidates: list[CandidateState]
    rounds: int = 0  # Ansor's t_i
    trials: int = 0
    history: list[float] = field(default_factory=list)  # best latency after each round (FAILED_LATENCY_S: none)
    dead: bool = False

    @property
    def weight(self) -> float:
        return self.task.weight

    @property
    def flops(self) -> int:
        return self.task.workload.flops

    @property
    def live(self) -> bool:
        """Tuned by schedulers: positive weight, not dead."""
        return self.task.live and not self.dead

    @property
    def live_candidates(self) -> list[int]:
        return [c.index for c in self.candidates if not c.dead]

    @property
    def best(self) -> Record | None:
        records = [c.best for c in self.candidates if c.best is not None]
        return min(records, key=lambda r: r.latency_s) if records else None

    @property
    def best_candidate(self) -> int | None:
        found = [c for c in self.candidates if c.best is not None]
        return min(found, key=lambda c: c.best.latency_s).index if found else None

    @property
    def latency_s(self) -> float | None:
        best = self.best
        return None if best is None else best.latency_s

    @property
    def cost_s(self) -> float:
        """The best latency, or :data:`FAILED_LATENCY_S` without a correct kernel (what schedulers compute with)."""
        latency = self.latency_s
        return FAILED_LATENCY_S if latency is None else latency


def default_measure_per_round(budget: int | None, live_tasks: int) -> int:
    """Ansor's round size: ``min(64, budget // live tasks)`` (at least 1; 64 without a trial budget)."""
    if budget is None:
        return ANSOR_MEASURES_PER_ROUND
    return max(1, min(ANSOR_MEASURES_PER_ROUND, budget // max(1, live_tasks)))


def session_seed(seed: int, workload_key: str, candidate: int) -> int:
    """The seed of one (task, candidate) search: the same under every scheduler for the same run seed."""
    digest = hashlib.sha256(f"{seed}|{workload_key}|{candidate}".encode()).hexdigest()
    return int(digest[:8], 16) % (2**31)


class _TrialBridge(TuningCallback):
    """Passes a session's trials to its network tuner."""

    def __init__(self, owner: "NetworkTuner", task: int, candidate: int):
        self.owner, self.task, self.candidate = owner, task, candidate
        self.session: SearchSession | None = None

    def on_trial(self, trial: Trial) -> None:
        assert self.session is not None
        self.owner._on_trial(self.task, self.candidate, self.session.tuner.seen(trial.config), trial.fresh)


# -- the tuner ---------------------------------------------------------------------------------------
class NetworkTuner:
    """Rounds of measurements for the tasks of a network, under one budget (see the module docs).

    Args:
        network: the tasks and their weights.
        spaces: the search space of each task, in the network's order.
        evaluator_for: the evaluator of a space (a candidate's restricted space).
        search_for: ``(task, candidate) -> SearchStrategy``, a fresh strategy for the search inside a pair.
        budget: trials over the whole network (None: only ``time_budget`` ends the run).
        time_budget: seconds of the network's tuning clock (None: only ``budget``).
        measure_per_round: trials per round (default: Ansor's ``min(64, budget // live tasks)``).
        seed: the run's seed (each pair's search seed derives from it).
        callback: a :class:`NetworkCallback` (or a list), e.g. a :class:`NetworkProgressBar`.
        label: names the run in callbacks.
        agent: the name of the search inside the tasks (for the result).
    """

    def __init__(self, network: Network, spaces: Sequence[Space], evaluator_for: Callable[[Space], Evaluator],
                 search_for: Callable[[int, int], SearchStrategy], *, budget: int | None = None,
                 time_budget: float | None = None, measure_per_round: int | None = None, seed: int = 0,
                 callback: NetworkCallback | Sequence[NetworkCallback] | None = None, label: str = "",
                 agent: str = ""):
        check_budget(budget, time_budget)
        if len(spaces) != len(network.tasks):
            raise InvalidArgumentError(f"{len(spaces)} spaces for the {len(network.tasks)} tasks of {network.name}")
        if measure_per_round is None:
            measure_per_round = default_measure_per_round(budget, len(network.live_tasks))
        if isinstance(measure_per_round, bool) or not isinstance(measure_per_round, int) or measure_per_round < 1:
            raise InvalidArgumentError(f"measure_per_round must be a positive integer, got {measure_per_round!r}")
        self.network = network
        self.budget = budget
        self.time_budget = time_budget
        self.measure_per_round = measure_per_round
        self.seed = int(seed)
        self.agent = agent
        self._evaluator_for = evaluator_for
        self._search_for = search_for
        self.tasks = [TaskState(i, task, space, [CandidateState(k, name) for k, name in enumerate(space.candidates)])
                      for i, (task, space) in enumerate(zip(network.tasks, spaces))]
        self.timeline: list[NetworkTrial] = []
        self.rounds: list[RoundLog] = []
        self.measured = 0
        self.reused = 0
        self._start = time.monotonic()
        self._closed = False
        self._ended = False
        self.callback = as_network_callback(callback)
        self.callback.on_start(label or network.name, budget)

    # -- reading the state ----------------------------------------------------------------------
    @property
    def space_name(self) -> str:
        return self.tasks[0].space.name

    @property
    def trials(self) -> int:
        return len(self.timeline)

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - self.trials

    @property
    def elapsed(self) -> float:
        """The network's tuning clock (see the module docs)."""
        wall = time.monotonic() - self._start
        for task in self.tasks:
            for candidate in task.candidates:
                if candidate.session is not None:
                    wall += candidate.session.tuner.charged_s - candidate.session.tuner.measure_wall_s
        return wall

    def out_of_time(self) -> bool:
        return self.time_budget is not None and self.elapsed >= self.time_budget

    @property
    def live_tasks(self) -> list[int]:
        return [t.index for t in self.tasks if t.live]

    @property
    def exhausted(self) -> bool:
        """True once the budget or the time is spent, or no live task is left."""
        if self.remaining is not None and self.remaining <= 0:
            return True
        return self.out_of_time() or not self.live_tasks

    def latencies(self) -> list[float]:
        """Each task's best latency (:data:`FAILED_LATENCY_S` without a correct kernel)."""
        return [t.cost_s for t in self.tasks]

    def estimate(self) -> float | None:
        """The estimated network latency ``sum_i weight_i * m_i`` (None until every live task has a kernel)."""
        return self.network.estimate([t.latency_s for t in self.tasks])

    # -- rounds ------------------------------------------------------------------------------
    def run_round(self, task: int, candidates: Sequence[int] | None = None, *, warmup: bool = False) -> RoundLog:
        """Give ``task`` one round: ``measure_per_round`` trials split evenly over ``candidates``
        (default: its live candidates), each share continuing that candidate's search."""
        if self._closed:
            raise InvalidArgumentError("this network run is closed")
        if not isinstance(task, int) or not 0 <= task < len(self.tasks):
            raise InvalidArgumentError(f"task must be an index in [0, {len(self.tasks)}), got {task!r}")
        state = self.tasks[task]
        if not state.live:
            why = "has weight 0" if not state.task.live else "is dead (its searches have nothing left to try)"
            raise InvalidArgumentError(f"task {task} ({state.task.label}) {why}")
        chosen = state.live_candidates if candidates is None else list(dict.fromkeys(candidates))
        for k in chosen:
            if not isinstance(k, int) or not 0 <= k < len(state.candidates) or state.candidates[k].dead:
                raise InvalidArgumentError(f"candidate {k!r} of task {task} is not a live candidate; live: "
                                           f"{state.live_candidates}")
        if not chosen:
            raise InvalidArgumentError(f"give task {task} at least one candidate")
        if self.exhausted:
            raise InvalidArgumentError("the run's budget is spent")
        per = max(1, self.measure_per_round // len(chosen))
        before = self.trials
        timed = self.time_budget is not None
        for k in chosen:
            allowance = per if self.remaining is None else min(per, self.remaining)
            if allowance <= 0 or self.out_of_time():
                break
            session = self._session(task, k)
            if session is None:
                continue
            used = session.run_round(allowance, stop=self.out_of_time if timed else None,
                                     chunk=TIME_CHECK_CHUNK if timed else None)
            candidate = state.candidates[k]
            if session.finished:
                candidate.dead, candidate.reason = True, "its search finished (nothing left to try)"
            elif used == 0 and not self.out_of_time():
                candidate.dead, candidate.reason = True, "a round gave it no new trial"
        state.rounds += 1
        state.history.append(state.cost_s)
        if not state.live_candidates:
            state.dead = True
            log.info("task %s is dead: %s", state.task.label, "; ".join(c.reason for c in state.candidates))
        entry = RoundLog(len(self.rounds) + 1, task, tuple(chosen), self.trials - before, self.elapsed,
                         self.estimate(), warmup)
        self.rounds.append(entry)
        self.callback.on_round(entry)
        return entry

    def _session(self, task: int, k: int) -> SearchSession | None:
        state = self.tasks[task]
        candidate = state.candidates[k]
        if candidate.session is None:
            try:
                space = state.space.restricted(k)
            except SpaceError as exc:
                candidate.dead, candidate.reason = True, f"unavailable: {exc}"
                return None
            bridge = _TrialBridge(self, task, k)
            candidate.session = SearchSession(
                self._search_for(task, k), self._evaluator_for(space),
                seed=session_seed(self.seed, state.task.workload.key, k), callback=bridge,
                label=f"{state.task.label}/{candidate.name}")
            bridge.session = candidate.session
        return candidate.session

    def _on_trial(self, task: int, k: int, record: Record | None, fresh: bool) -> None:
        state = self.tasks[task]
        candidate = state.candidates[k]
        candidate.trials += 1
        state.trials += 1
        self.measured += fresh
        self.reused += not fresh
        if record is not None and record.ok and record.latency_s and (
                candidate.best is None or record.latency_s < candidate.best.latency_s):
            candidate.best = record
        latency = record.latency_s if record is not None and record.ok else None
        trial = NetworkTrial(len(self.timeline) + 1, self.elapsed, task, k,
                             record.status.value if record is not None else "unknown", latency, self.estimate(),
                             fresh)
        self.timeline.append(trial)
        self.callback.on_trial(trial)

    # -- the end -------------------------------------------------------------------------------
    def close(self) -> None:
        """End every search session; the state stays readable."""
        if self._closed:
            return
        self._closed = True
        for state in self.tasks:
            for candidate in state.candidates:
                if candidate.session is not None:
                    candidate.session.close()

    def __enter__(self) -> "NetworkTuner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def result(self, scheduler: str, **extra: Any) -> NetworkResult:
        """The run so far as a :class:`NetworkResult` (ends the callbacks' run on the first call)."""
        if not self._ended:
            self._ended = True
            self.callback.on_end()
        tasks = []
        for state in self.tasks:
            best = state.best
            tasks.append(TaskResult(
                label=state.task.label, workload_key=state.task.workload.key, weight=state.weight,
                gflop=state.task.workload.gflop, candidates=[c.name for c in state.candidates],
                best_latency_s=best.latency_s if best else None, best_latency_cv=best.latency_cv if best else None,
                best_config=best.config.to_json() if best else None, best_candidate=state.best_candidate,
                trials=state.trials, rounds=state.rounds, candidate_trials=[c.trials for c in state.candidates],
                candidate_best_s=[c.latency_s for c in state.candidates], dead=state.dead,
                note=state.task.note if state.task.live else f"not tuned (weight 0): {state.task.note}"))
        return NetworkResult(
            scheduler=scheduler, network=self.network.name, space=self.space_name,
            target=self.tasks[0].space.target.fingerprint, seed=self.seed, budget=self.budget,
            time_budget=self.time_budget, measure_per_round=self.measure_per_round, agent=self.agent, tasks=tasks,
            trials=list(self.timeline), rounds=list(self.rounds), measured=self.measured, reused=self.reused,
            wall_s=time.monotonic() - self._start, extra=dict(extra))


class ReplaySearch(GeneratorStrategy):
    """A strategy that replays recorded configs, in the order they were first measured (the replay backend's):
    batches of ``batch_size`` (answered from the database) until they are used up."""

    name = "replay"

    def __init__(self, configs: Sequence[Config], batch_size: int):
        self.configs = list(configs)
        self.batch_size = max(1, int(batch_size))

    def search(self, history: SearchHistory, rng) -> Search:
        for i in range(0, len(self.configs), self.batch_size):
            yield self.configs[i:i + self.batch_size]
        return {"replayed": len(self.configs)}
