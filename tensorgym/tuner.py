"""The tuning loop: one run of search strategies over the tasks of a network, under one budget.

A layer is a network of one task. A :class:`Tuner` holds, per task, its space
and the state of every mapping candidate of that space
(``Space.candidates``; one, ``"all"``, in spaces without candidates and in a
layer run, which searches the whole space), and per candidate the
:class:`~tensorgym.strategy.SearchStrategy` searching it. It is the one loop
every search runs in (MetaSchedule's task scheduler over its tuning contexts;
stable-baselines3's one loop owner with callbacks):

* it **asks** a candidate's strategy for configs (``ask(n)``, ``n`` what the
  run's trial budget leaves), **measures** them through the evaluator, and
  **tells** the strategy their records once the whole batch is measured;
* it runs **rounds**: :meth:`Tuner.run_round` gives task ``i`` one round of
  ``measure_per_round`` trials, split evenly over the candidates the caller
  names (default: the task's live ones). A batch may span rounds: what a round
  left unmeasured is measured first in the next, and the strategy is told
  then, so a search in rounds makes exactly the trials of one uninterrupted
  run of its seed. A task scheduler decides which task gets each round; a
  layer run (:meth:`Tuner.run`) is one round of its one task that takes the
  whole budget;
* it owns the **budget**, the **clock** and the **callbacks**.

Everything happens in the caller's thread, and nothing runs between rounds (a
strategy computes only inside ``ask`` and ``tell``), so no search computes
while a kernel is timed.

**Trials.** Each distinct config a search measures is one trial, whether it
was compiled and timed now or answered from the database (by an earlier,
interrupted run of the same search, say). Asking again for a config the
search already measured costs nothing; a strategy that proposes only such
configs, :data:`MAX_STALE_BATCHES` batches in a row, has finished. The trial
budget (``budget``) is never exceeded: a batch that would is cut.

**Clock.** The tuning clock is the run's own computing time (wall time
outside measurements: the scheduler's and the strategies') plus, for each
trial, the wall seconds its measurement took when it was made
(``Record.wall_s``). A resumed run and a fresh run therefore have the same
clock, and runs sharing a database are timed as if each had measured alone.
``time_budget`` is seconds of this clock, checked every 8 trials.

**Objective.** :meth:`estimate` is ``f = sum_i weight_i * m_i`` over the live
tasks, ``m_i`` the best latency over the task's candidates (None until every
live task has a correct kernel; a layer: its best latency). Schedulers read
:meth:`latencies`, where a task without a correct kernel has
:data:`FAILED_LATENCY_S` (Ansor's 1e10, so that gradients stay finite).

**Dead.** Tasks of weight 0 are never tuned. A candidate is dead when a round
gave it no trial (its search proposed nothing new), when its search finished
(its space ran dry) or when its restricted space cannot be built (the reason
is kept); a task is dead when all its candidates are.

**Callbacks** (:class:`TuningCallback`, the shape of stable-baselines3's) see
the run start, every trial, every round and the run end; a progress bar is
one (:class:`ProgressBarCallback`).

**By hand.** A layer's Tuner also lends its one search's space to a user who
drives a strategy himself (``sample``, ``neighbours``, ``seen``, then
``strategy.ask`` / ``tuner.measure`` / ``strategy.tell``), and runs a strategy
in rounds of his own (:meth:`Tuner.start`, then ``run_round(0, trials=n)``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .config import Config
from .errors import InvalidArgumentError, InvalidTypeError
from .evaluator import Evaluator
from .networks import Network, NetworkTask
from .record import Record
from .result import RoundLog, TaskResult, Trial, TuningResult
from .spaces.base import Space, SpaceError
from .strategy import SearchStrategy

log = logging.getLogger(__name__)

FAILED_LATENCY_S = 1e10  # Ansor's best cost of a task without a correct kernel
ANSOR_MEASURES_PER_ROUND = 64  # Ansor's and MetaSchedule's default round
TIME_CHECK_CHUNK = 8  # with a time budget, trials measured between looks at the clock
# A strategy that keeps asking for configs its search measured already (answered free) without ever proposing a
# new one would spin a round forever; after this many such batches in a row it is finished.
MAX_STALE_BATCHES = 100

__all__ = ["CallbackList", "CandidateState", "ProgressBarCallback", "RoundLog", "TaskResult", "TaskState", "Trial",
           "Tuner", "TuningCallback", "TuningResult", "as_callback", "check_budget", "default_measure_per_round"]


def check_budget(budget: int | None, time_budget: float | None) -> None:
    """Raise ValueError unless (budget, time_budget) describe a run that ends."""
    if budget is not None and (isinstance(budget, (bool, np.bool_)) or not isinstance(budget, (int, np.integer))
                               or budget < 1):
        raise InvalidArgumentError(f"budget must be a positive number of measurements or None, got {budget!r}")
    if time_budget is not None and (isinstance(time_budget, (bool, np.bool_))
                                    or not isinstance(time_budget, (int, float, np.integer, np.floating))
                                    or not math.isfinite(time_budget) or time_budget <= 0):
        raise InvalidArgumentError(f"time_budget must be a positive, finite number of seconds or None, "
                                   f"got {time_budget!r}")
    if budget is None and time_budget is None:
        raise InvalidArgumentError("give a budget, a time_budget, or both: a tuning run must end")


def default_measure_per_round(budget: int | None, live_tasks: int) -> int:
    """Ansor's round size: ``min(64, budget // live tasks)`` (at least 1; 64 without a trial budget)."""
    if budget is None:
        return ANSOR_MEASURES_PER_ROUND
    return max(1, min(ANSOR_MEASURES_PER_ROUND, budget // max(1, live_tasks)))


def candidate_seed(seed: int, workload_key: str, candidate: int) -> int:
    """The seed of one (task, candidate) search of a network run: the same under every scheduler for the same run
    seed, so that schedulers sharing a database share its measurements."""
    digest = hashlib.sha256(f"{seed}|{workload_key}|{candidate}".encode()).hexdigest()
    return int(digest[:8], 16) % (2**31)


# -- callbacks -------------------------------------------------------------------------------------------------
class TuningCallback:
    """Hooks a tuning run calls as it goes (the shape of stable-baselines3's callbacks).

    The :class:`Tuner` calls them; agents that run their own search elsewhere (the MetaSchedule peer) call them
    from its progress. Subclasses override what they need.
    """

    def on_start(self, label: str, budget: int | None) -> None:
        """The run starts: ``label`` names it (agent and workload or network), ``budget`` is its trial budget."""

    def on_trial(self, trial: Trial) -> None:
        """A trial's result is known."""

    def on_round(self, log_entry: RoundLog) -> None:
        """A round has ended."""

    def on_end(self) -> None:
        """The run has ended (its result was taken)."""


class CallbackList(TuningCallback):
    """Several callbacks, called in order."""

    def __init__(self, callbacks: Sequence[TuningCallback]):
        self.callbacks = list(callbacks)

    def _each(self, hook: str, *args: Any) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(*args)

    def on_start(self, label: str, budget: int | None) -> None:
        self._each("on_start", label, budget)

    def on_trial(self, trial: Trial) -> None:
        self._each("on_trial", trial)

    def on_round(self, log_entry: RoundLog) -> None:
        self._each("on_round", log_entry)

    def on_end(self) -> None:
        self._each("on_end")


def best_so_far(trial: Trial) -> str:
    """The run's best after ``trial``, short: ``best 12.3 GFLOP/s (0.456 ms)``; ``best -`` before it has one."""
    if trial.best_latency_s is None and not trial.best_gflops:
        return "best -"
    text = f"best {trial.best_gflops:.1f} GFLOP/s"
    return text if trial.best_latency_s is None else f"{text} ({trial.best_latency_s * 1e3:.3f} ms)"


class ProgressBarCallback(TuningCallback):
    """A tqdm progress bar over the trial budget, showing the run's best so far after the count."""

    def __init__(self) -> None:
        self._bar = None

    def on_start(self, label: str, budget: int | None) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=budget, desc=label, unit="trial", dynamic_ncols=True, leave=True)

    def on_trial(self, trial: Trial) -> None:
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix_str(best_so_far(trial), refresh=False)

    def on_end(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def as_callback(callback: "TuningCallback | Sequence[TuningCallback] | None") -> TuningCallback:
    """One callback from None, a callback, or a list of them."""
    if callback is None:
        return TuningCallback()
    if isinstance(callback, TuningCallback):
        return callback
    if isinstance(callback, Sequence) and all(isinstance(c, TuningCallback) for c in callback):
        return CallbackList(callback)
    raise InvalidTypeError(f"callback must be a TuningCallback, a list of them, or None; "
                           f"got {type(callback).__name__}")


# -- state -------------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class CandidateState:
    """One mapping candidate of one task: the search over its space, and what it has found."""

    index: int
    name: str
    best: Record | None = None  # the fastest correct kernel
    trials: int = 0
    dead: bool = False
    reason: str = ""  # why it is dead
    space: Space | None = None  # the task's space restricted to the candidate (built for its first round)
    evaluator: Evaluator | None = None
    strategy: SearchStrategy | None = None
    seed: int = 0
    seen: dict[Config, Record] = field(default_factory=dict)  # every record of this search, by config
    started: bool = False
    finished: bool = False  # the strategy proposes nothing more
    closed: bool = False
    batch: list[Config] = field(default_factory=list)  # the batch asked for last
    pending: list[Config] = field(default_factory=list)  # the part of it not measured yet
    stale: int = 0  # batches in a row with nothing new

    @property
    def latency_s(self) -> float | None:
        return None if self.best is None else self.best.latency_s


@dataclass
class TaskState:
    """One task of the run."""

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

    def to_result(self) -> TaskResult:
        best = self.best
        return TaskResult(
            label=self.task.label, workload_key=self.task.workload.key, weight=self.weight,
            gflop=self.task.workload.gflop, candidates=[c.name for c in self.candidates],
            best_latency_s=best.latency_s if best else None, best_latency_cv=best.latency_cv if best else None,
            best_config=best.config.to_json() if best else None, best_candidate=self.best_candidate,
            trials=self.trials, rounds=self.rounds, candidate_trials=[c.trials for c in self.candidates],
            candidate_best_s=[c.latency_s for c in self.candidates], dead=self.dead,
            note=self.task.note if self.task.live else f"not tuned (weight 0): {self.task.note}")


def network_key(network: Network) -> str:
    """A network's identity in results: its tasks and weights, hashed."""
    return "network-" + hashlib.sha256(json.dumps(network.to_json(), sort_keys=True).encode()).hexdigest()[:16]


# -- the tuner -----------------------------------------------------------------------------------------------------
class Tuner:
    """One tuning run over the tasks of a network under one budget (see the module docs).

    ``Tuner(evaluator, ...)`` is a layer run: a network of the evaluator's workload (weight 1) whose one
    candidate is the evaluator's whole space, searched by the strategy :meth:`run` (or :meth:`start`) is given.
    :meth:`for_network` opens a network run.

    Args:
        evaluator: where the layer's records come from (an env's ``evaluator``).
        budget: the most trials this run may make (None: unlimited).
        time_budget: the most seconds of tuning clock (None: unlimited).
        callback: a :class:`TuningCallback` (or a list of them), e.g. a :class:`ProgressBarCallback`.
        label: what the callbacks call the run (default: the workload's label, or the network's name).
    """

    def __init__(self, evaluator: Evaluator, *, budget: int | None = 64, time_budget: float | None = None,
                 callback: TuningCallback | Sequence[TuningCallback] | None = None, label: str = ""):
        if not isinstance(evaluator, Evaluator):
            raise InvalidTypeError(f"a Tuner measures through an Evaluator (an env's ``evaluator``), got "
                                   f"{type(evaluator).__name__}")
        workload = evaluator.space.workload
        self._open(Network(workload.label or workload.key, (NetworkTask(workload, 1.0),)), [evaluator.space],
                   lambda space: evaluator, None, budget=budget, time_budget=time_budget, measure_per_round=None,
                   seed=0, callback=callback, label=label, search="", whole_space=True)

    @classmethod
    def for_network(cls, network: Network, spaces: Sequence[Space], evaluator_for: Callable[[Space], Evaluator],
                    search_for: Callable[[int, int], SearchStrategy], *, budget: int | None = None,
                    time_budget: float | None = None, measure_per_round: int | None = None, seed: int = 0,
                    callback: TuningCallback | Sequence[TuningCallback] | None = None, label: str = "",
                    search: str = "") -> "Tuner":
        """A network run.

        Args:
            network: the tasks and their weights.
            spaces: the search space of each task, in the network's order.
            evaluator_for: the evaluator of a space (a candidate's restricted space).
            search_for: ``(task, candidate) -> SearchStrategy``, a fresh strategy for the search inside a pair,
                seeded from the run's ``seed``, the workload and the candidate (:func:`candidate_seed`).
            budget, time_budget: trials over the whole network, seconds of its tuning clock (at least one).
            measure_per_round: trials per round (default: Ansor's ``min(64, budget // live tasks)``).
            search: the name of the search inside the tasks (for the result).
        """
        if len(spaces) != len(network.tasks):
            raise InvalidArgumentError(f"{len(spaces)} spaces for the {len(network.tasks)} tasks of {network.name}")
        if measure_per_round is None:
            measure_per_round = default_measure_per_round(budget, len(network.live_tasks))
        if isinstance(measure_per_round, bool) or not isinstance(measure_per_round, int) or measure_per_round < 1:
            raise InvalidArgumentError(f"measure_per_round must be a positive integer, got {measure_per_round!r}")
        tuner = cls.__new__(cls)
        tuner._open(network, spaces, evaluator_for, search_for, budget=budget, time_budget=time_budget,
                    measure_per_round=measure_per_round, seed=seed, callback=callback, label=label, search=search,
                    whole_space=False)
        return tuner

    def _open(self, network: Network, spaces: Sequence[Space], evaluator_for: Callable[[Space], Evaluator],
              search_for: Callable[[int, int], SearchStrategy] | None, *, budget: int | None,
              time_budget: float | None, measure_per_round: int | None, seed: int,
              callback: TuningCallback | Sequence[TuningCallback] | None, label: str, search: str,
              whole_space: bool) -> None:
        check_budget(budget, time_budget)
        self.network = network
        self.budget = None if budget is None else int(budget)
        self.time_budget = None if time_budget is None else float(time_budget)
        self.measure_per_round = measure_per_round  # None: a layer run's one round takes what the budget leaves
        self.seed = int(seed)
        self.search = search
        self._evaluator_for = evaluator_for
        self._search_for = search_for
        self.tasks = [TaskState(i, task, space, [CandidateState(k, name) for k, name in
                                                 enumerate(["all"] if whole_space else space.candidates)])
                      for i, (task, space) in enumerate(zip(network.tasks, spaces))]
        if whole_space:
            for state in self.tasks:
                state.candidates[0].space = state.space
                state.candidates[0].evaluator = evaluator_for(state.space)
        self.trials: list[Trial] = []
        self.rounds: list[RoundLog] = []
        self.measured = 0
        self.reused = 0
        self.busy_trials = 0  # trials whose timing saw other processes take the cores (Record.busy)
        self.simulated = False  # whether any trial was answered by a simulated evaluator (a landscape)
        self._start = time.monotonic()
        self._measure_wall = 0.0  # real seconds spent measuring
        self._charged = 0.0  # seconds charged for trials
        self._closed = False
        self._ended = False
        self.callback = as_callback(callback)
        self.callback.on_start(label or network.name, self.budget)

    # -- the budget and the clock ------------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        """The tuning clock (see the module docs)."""
        return time.monotonic() - self._start - self._measure_wall + self._charged

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - len(self.trials)

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
        """The estimated latency ``sum_i weight_i * m_i`` (None until every live task has a kernel)."""
        return self.network.estimate([t.latency_s for t in self.tasks])

    def _best_so_far(self) -> tuple[float, float | None]:
        """The run's throughput and estimated latency: one live task's best kernel's, or the network's."""
        estimate = self.estimate()
        live = self.network.live_tasks
        if len(live) == 1:
            best = self.tasks[live[0]].best
            return (best.gflops if best is not None else 0.0), estimate
        return (self.network.gflop / estimate if estimate else 0.0), estimate

    # -- a layer's one search, by hand ------------------------------------------------------------------------------
    def _one(self) -> CandidateState:
        if len(self.tasks) != 1 or len(self.tasks[0].candidates) != 1:
            raise InvalidArgumentError("this run searches several tasks or candidates: it measures through "
                                       "run_round (a layer's Tuner offers measure, sample, neighbours and seen)")
        return self.tasks[0].candidates[0]

    @property
    def evaluator(self) -> Evaluator:
        return self._one().evaluator

    @property
    def space(self) -> Space:
        return self._one().space

    @property
    def best(self) -> Record | None:
        """The layer's best record so far."""
        return self._one().best

    def sample(self, rng: np.random.Generator, n: int = 1) -> list[Config]:
        """Up to ``n`` distinct random configs this run has not measured (``rng``: a NumPy Generator)."""
        return self.space.sample_many(rng, n, exclude=set(self._one().seen))

    def neighbours(self, config: "Config | Mapping[str, Any] | str", hops: int = 1) -> list[Config]:
        """The space's ``hops``-move neighbours of ``config`` (a Config, dict or JSON text of the space)."""
        return self.space.neighbours(self.space.parse(config), hops)

    def seen(self, config: "Config | Mapping[str, Any] | str") -> Record | None:
        """The record of ``config`` if this run measured it (free: no trial is charged)."""
        return self._one().seen.get(self.space.parse(config))

    def measure(self, configs: Sequence[Config]) -> list[Record]:
        """Records for ``configs``, in the order given (repeats of a config appear once).

        Configs already measured in this run are free. New configs beyond the
        remaining budget are dropped, so the result may be shorter than
        ``configs`` (it is then the given order with the dropped configs left
        out); nothing is measured once the budget is spent. With a time
        budget, batches are measured in chunks of 8 so the clock is checked often.
        """
        candidate = self._one()
        if isinstance(configs, (str, bytes, Mapping)) or not isinstance(configs, Iterable):
            raise InvalidTypeError(f"measure takes a list of configs (Configs, dicts or JSON texts of the space), got "
                                   f"{type(configs).__name__}" + ("; for one config, pass [config]"
                                                                  if isinstance(configs, (str, Mapping)) else ""))
        order = list(dict.fromkeys(self.space.parse(config) for config in configs))
        fresh = [c for c in order if c not in candidate.seen][:self.remaining]
        chunk = TIME_CHECK_CHUNK if self.time_budget is not None else max(1, len(fresh))
        for i in range(0, len(fresh), chunk):
            if self.exhausted:
                break
            self._measure(self.tasks[0], candidate, fresh[i:i + chunk])
        return [candidate.seen[c] for c in order if c in candidate.seen]

    # -- the loop -------------------------------------------------------------------------------------------------
    def start(self, strategy: SearchStrategy, seed: int = 0) -> CandidateState:
        """Give the layer's one search ``strategy`` (started here on its space, seeded by ``seed``); rounds of
        :meth:`run_round` then drive it."""
        if not isinstance(strategy, SearchStrategy):
            raise InvalidArgumentError(f"a Tuner drives a SearchStrategy, got {type(strategy).__name__}")
        candidate = self._one()
        candidate.strategy, candidate.seed, self.seed = strategy, int(seed), int(seed)
        candidate.started = candidate.finished = candidate.closed = candidate.dead = self.tasks[0].dead = False
        candidate.batch, candidate.pending, candidate.stale = [], [], 0
        self._start_search(candidate)
        return candidate

    def run(self, strategy: SearchStrategy, seed: int = 0) -> dict[str, Any]:
        """Drive ``strategy`` over the layer (:meth:`start`) in one round until the budget is spent or it proposes
        nothing more; returns its summary (``TuningResult.extra``)."""
        candidate = self.start(strategy, seed)
        try:
            if not self.exhausted:
                self.run_round(0, trials=self.remaining)
        except BaseException:
            candidate.closed = True
            strategy.close()
            raise
        self._close_search(candidate)
        return strategy.summary()

    def run_round(self, task: int, candidates: Sequence[int] | None = None, *, warmup: bool = False,
                  trials: int | None = None) -> RoundLog:
        """Give ``task`` one round: ``trials`` (default ``measure_per_round``; None: until the budget is spent)
        split evenly over ``candidates`` (default: its live candidates), each share continuing that candidate's
        search."""
        if self._closed:
            raise InvalidArgumentError("this tuning run is closed")
        if isinstance(task, bool) or not isinstance(task, int) or not 0 <= task < len(self.tasks):
            raise InvalidArgumentError(f"task must be an index in [0, {len(self.tasks)}), got {task!r}")
        if trials is not None and (isinstance(trials, bool) or not isinstance(trials, (int, np.integer))
                                   or trials < 1):
            raise InvalidArgumentError(f"a round has at least one trial, got {trials!r}")
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
        size = self.measure_per_round if trials is None else int(trials)
        per = None if size is None else max(1, size // len(chosen))
        before = len(self.trials)
        for k in chosen:
            allowance = per if self.remaining is None else self.remaining if per is None else min(per, self.remaining)
            if (allowance is not None and allowance <= 0) or self.out_of_time():
                break
            candidate = self._candidate(state, k)
            if candidate is None:
                continue
            used = self._search_round(state, candidate, allowance)
            if candidate.finished:
                candidate.dead, candidate.reason = True, "its search finished (nothing left to try)"
            elif used == 0 and not self.out_of_time():
                candidate.dead, candidate.reason = True, "a round gave it no new trial"
        state.rounds += 1
        state.history.append(state.cost_s)
        if not state.live_candidates:
            state.dead = True
            log.info("task %s is dead: %s", state.task.label, "; ".join(c.reason for c in state.candidates))
        entry = RoundLog(len(self.rounds) + 1, task, tuple(chosen), len(self.trials) - before, self.elapsed,
                         self.estimate(), warmup)
        self.rounds.append(entry)
        self.callback.on_round(entry)
        return entry

    def _candidate(self, state: TaskState, k: int) -> CandidateState | None:
        """Candidate ``k`` of ``state`` with its search (built on first use); None when its space cannot be."""
        candidate = state.candidates[k]
        if candidate.evaluator is None:
            try:
                candidate.space = state.space.restricted(k)
            except SpaceError as exc:
                candidate.dead, candidate.reason = True, f"unavailable: {exc}"
                return None
            candidate.evaluator = self._evaluator_for(candidate.space)
        if candidate.strategy is None:
            if self._search_for is None:
                raise InvalidArgumentError("no strategy searches this layer yet: give one with Tuner.start")
            candidate.strategy = self._search_for(state.index, k)
            candidate.seed = candidate_seed(self.seed, state.task.workload.key, k)
        self._start_search(candidate)
        return candidate

    def _start_search(self, candidate: CandidateState) -> None:
        if not candidate.started:
            candidate.started = True
            candidate.strategy.start(candidate.space, np.random.default_rng(candidate.seed), candidate.seed,
                                     candidate.evaluator.database)

    def _search_round(self, state: TaskState, candidate: CandidateState, allowance: int | None) -> int:
        """Let the candidate's strategy make up to ``allowance`` more trials (None: no limit); returns how many it
        made: fewer when it finished or the clock ran out (checked between evaluator calls)."""
        timed = self.time_budget is not None
        used = 0
        while not candidate.finished and (allowance is None or used < allowance) and not (timed and
                                                                                           self.out_of_time()):
            if not candidate.pending and not self._next_batch(candidate):
                break
            room = len(candidate.pending) if allowance is None else allowance - used
            part = candidate.pending[:min(room, TIME_CHECK_CHUNK) if timed else room]
            self._measure(state, candidate, part)
            used += len(part)
            candidate.pending = candidate.pending[len(part):]
            if not candidate.pending:
                self._tell(candidate)
        return used

    def _next_batch(self, candidate: CandidateState) -> bool:
        """Ask the strategy for its next batch (its new configs become pending); False when it is finished."""
        while True:
            batch = candidate.strategy.ask(self.remaining)
            if not batch:
                candidate.finished = True
                return False
            candidate.batch = list(dict.fromkeys(candidate.space.parse(c) for c in batch))
            candidate.pending = [c for c in candidate.batch if c not in candidate.seen]
            if candidate.pending:
                candidate.stale = 0
                return True
            self._tell(candidate)  # every config was measured before in this run: answered free
            candidate.stale += 1
            if candidate.stale >= MAX_STALE_BATCHES:
                log.info("search of %s: the strategy proposes only configs it measured; finished", candidate.name)
                candidate.finished = True
                return False

    @staticmethod
    def _tell(candidate: CandidateState) -> None:
        records = [candidate.seen[c] for c in candidate.batch if c in candidate.seen]
        candidate.strategy.history.add(records)
        candidate.strategy.tell(records)

    def _close_search(self, candidate: CandidateState) -> None:
        """End a candidate's search: the part of a batch the last round measured is told, the strategy closed."""
        if candidate.started and not candidate.closed:
            candidate.closed = True
            if candidate.pending:
                self._tell(candidate)
            candidate.strategy.close()

    # -- measuring ---------------------------------------------------------------------------------------------------
    def _measure(self, state: TaskState, candidate: CandidateState, configs: list[Config]) -> None:
        t0 = time.monotonic()
        simulated = candidate.evaluator.simulated
        # A simulated evaluator knows every config: its first answer in this run is the run's simulated measurement.
        fresh = {c for c in configs
                 if (c not in candidate.seen if simulated else candidate.evaluator.lookup(c) is None)}
        records = self._full_where_best(candidate, candidate.evaluator.evaluate(configs))
        wall = time.monotonic() - t0
        self._measure_wall += wall
        for record in records:
            is_fresh = record.config in fresh
            # Fresh trials share the batch's real wall time; replayed and simulated ones are charged what they cost
            # when they were measured.
            self._charged += wall / len(fresh) if is_fresh and not simulated else record.wall_s
            self._record_trial(state, candidate, record, is_fresh, simulated)

    @staticmethod
    def _full_where_best(candidate: CandidateState, records: list[Record]) -> list[Record]:
        """A record timed short (far slower than the database's best) that would still be its search's best
        is timed again in full, so no run's best rests on a short timing."""
        best = candidate.best.gflops if candidate.best else 0.0
        out = []
        for record in records:
            if record.ok and record.short and record.gflops > best:
                record = candidate.evaluator.time_in_full(record)
            if record.ok:
                best = max(best, record.gflops)
            out.append(record)
        return out

    def _record_trial(self, state: TaskState, candidate: CandidateState, record: Record, fresh: bool,
                      simulated: bool = False) -> None:
        candidate.seen[record.config] = record
        if record.ok and (candidate.best is None or record.gflops > candidate.best.gflops):
            candidate.best = record
        candidate.trials += 1
        state.trials += 1
        self.measured += fresh
        self.reused += not fresh
        self.busy_trials += record.busy and not simulated  # a landscape's contention was its measuring machine's
        self.simulated |= simulated
        best_gflops, best_latency = self._best_so_far()
        self.trials.append(Trial(len(self.trials) + 1, self.elapsed, record.config, record.status.value,
                                 record.gflops, best_gflops, fresh, state.index, candidate.index,
                                 record.latency_s if record.ok else None, best_latency))
        self.callback.on_trial(self.trials[-1])

    # -- the end -------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """End every search (see :meth:`_close_search`); the state stays readable."""
        if self._closed:
            return
        self._closed = True
        for state in self.tasks:
            for candidate in state.candidates:
                self._close_search(candidate)

    def __enter__(self) -> "Tuner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def result(self, agent: str, seed: int | None = None, **extra: Any) -> TuningResult:
        """The run so far as a :class:`TuningResult` (ends the callbacks' run on the first call); ``agent`` names
        what tuned it (the agent, or a network's scheduler), ``extra`` goes to its ``extra``."""
        if not self._ended:
            self._ended = True
            self.callback.on_end()
        best_gflops, best_latency = self._best_so_far()
        layer = self.tasks[0] if len(self.tasks) == 1 else None
        best = layer.best if layer is not None else None
        space = self.tasks[0].space
        return TuningResult(
            agent=agent, workload=layer.task.label if layer else self.network.name,
            workload_key=layer.task.workload.key if layer else network_key(self.network), space=space.name,
            target=space.target.fingerprint, seed=self.seed if seed is None else seed, budget=self.budget,
            time_budget=self.time_budget, trials=list(self.trials), best_config=best.config if best else None,
            best_gflops=best_gflops, best_latency_s=best_latency, best_latency_cv=best.latency_cv if best else None,
            measured=self.measured, reused=self.reused, simulated=self.simulated, wall_s=time.monotonic() - self._start,
            extra={"busy_trials": self.busy_trials,
                   "best_busy": any(t.best is not None and t.best.busy for t in self.tasks), **extra},
            tasks=[state.to_result() for state in self.tasks], rounds=list(self.rounds), search=self.search or agent,
            measure_per_round=self.measure_per_round)
