"""The Tuner API: what search agents use instead of ``env.step()``.

A :class:`Tuner` gives an agent a space to draw from (``sample``,
``neighbours``), a way to measure batches (``measure``), and a budget counted
in measurements (``budget``) and in seconds (``time_budget``). Every
measurement goes through the environment's evaluator, so it lands in the
database, and every agent is charged the same way:

* **Trials.** Each distinct config an agent measures is one trial, whether it
  was compiled and timed now or answered from the database (by an earlier,
  interrupted run of the same search, say). Asking again for a config this
  run already measured costs nothing. ``measure`` never exceeds the budget:
  a batch that would is cut to what remains.
* **Clock.** The tuning clock is the agent's own computing time (wall time
  outside measurements) plus, for each trial, the wall seconds its
  measurement took when it was made (``Record.wall_s``). A resumed run and
  a fresh run of the same search therefore have the same clock, and agents
  sharing a database are timed as if each had measured alone.

**Callbacks** (:class:`TuningCallback`, the shape of stable-baselines3's
callbacks) see the run start, every trial, and the run end; a progress bar
is one (:class:`ProgressBarCallback`).

**The loop.** :meth:`Tuner.run` drives a :class:`~tensorgym.strategy.SearchStrategy`:
it asks for configs, measures them, and tells the strategy their records,
until the budget is spent or the strategy has nothing more to propose. It is
the one loop of every search agent; a user can drive a strategy by hand the
same way (``strategy.ask`` / ``tuner.measure`` / ``strategy.tell``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config
from .errors import InvalidArgumentError, InvalidTypeError
from .evaluator import Evaluator
from .network_result import last_within
from .record import Record
from .spaces.base import Space
from .strategy import SearchStrategy


@dataclass(frozen=True)
class Trial:
    """One measured config of a tuning run."""

    index: int  # 1-based trial number
    elapsed_s: float  # tuning clock when the trial's result was known
    config: Config | None  # None: a trial of a search tensorgym cannot express as a config (MetaSchedule's)
    status: str
    gflops: float | None
    best_gflops: float  # best correct GFLOP/s so far (0 if none)
    fresh: bool  # measured now (True) or answered from the database (False)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "elapsed_s": self.elapsed_s,
                "config": self.config.to_json() if self.config is not None else None,
                "status": self.status, "gflops": self.gflops, "best_gflops": self.best_gflops, "fresh": self.fresh}


@dataclass
class TuningResult:
    """What an agent's ``tune`` returns: the run's history and its best kernel."""

    agent: str
    workload: str  # label, e.g. ResNet-50/R5
    workload_key: str
    space: str
    target: str
    seed: int
    budget: int | None
    time_budget: float | None
    trials: list[Trial] = field(default_factory=list)
    best_config: Config | None = None
    best_gflops: float = 0.0
    best_latency_s: float | None = None
    best_latency_cv: float | None = None
    measured: int = 0  # trials compiled and timed in this run
    reused: int = 0  # trials answered from the database
    wall_s: float = 0.0  # real wall time of the run
    extra: dict[str, Any] = field(default_factory=dict)

    def best_at(self, trials: int | None = None, seconds: float | None = None) -> float:
        """Best GFLOP/s within the first ``trials`` trials and/or ``seconds`` of tuning clock."""
        trial = last_within(self.trials, trials, seconds)
        return 0.0 if trial is None else trial.best_gflops

    def trials_to_reach(self, fraction: float) -> int | None:
        """The first trial whose best-so-far reaches ``fraction`` of the final best."""
        for trial in self.trials:
            if trial.best_gflops >= fraction * self.best_gflops > 0:
                return trial.index
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent, "workload": self.workload, "workload_key": self.workload_key, "space": self.space,
            "target": self.target, "seed": self.seed, "budget": self.budget, "time_budget": self.time_budget,
            "best_config": self.best_config.to_json() if self.best_config else None, "best_gflops": self.best_gflops,
            "best_latency_s": self.best_latency_s, "best_latency_cv": self.best_latency_cv,
            "measured": self.measured, "reused": self.reused,
            "wall_s": self.wall_s, "extra": self.extra, "trials": [t.to_json() for t in self.trials],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> "TuningResult":
        data = dict(data)
        trials = [Trial(**{**t, "config": Config.from_json(t["config"]) if t["config"] is not None else None})
                  for t in data.pop("trials")]
        best = data.pop("best_config")
        return TuningResult(**data, trials=trials, best_config=Config.from_json(best) if best else None)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1))


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


class TuningCallback:
    """Hooks a tuning run calls as it goes (the shape of stable-baselines3's callbacks).

    One base for every run: a :class:`Tuner` calls them with a :class:`Trial` per trial; a network run
    (:class:`~tensorgym.network_tuning.NetworkTuner`, whose callbacks are
    :class:`~tensorgym.network_tuning.NetworkCallback`) with a
    :class:`~tensorgym.network_result.NetworkTrial`, and calls ``on_round`` after each round (a layer run
    has no rounds). Agents that run their own search elsewhere (the MetaSchedule peer) call them from its
    progress. Subclasses override what they need.
    """

    def on_start(self, label: str, budget: int | None) -> None:
        """The run starts: ``label`` names it (agent and workload), ``budget`` is its trial budget."""

    def on_trial(self, trial: Any) -> None:
        """A trial's result is known (a :class:`Trial`; a ``NetworkTrial`` in a network run)."""

    def on_round(self, log_entry: Any) -> None:
        """A round of a network run has ended (a ``RoundLog``); never called in a layer run."""

    def on_end(self) -> None:
        """The run has ended (its result was taken)."""


class CallbackList(TuningCallback):
    """Several callbacks, called in order (of layer runs or of network runs alike)."""

    def __init__(self, callbacks: Sequence[TuningCallback]):
        self.callbacks = list(callbacks)

    def _each(self, hook: str, *args: Any) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(*args)

    def on_start(self, label: str, budget: int | None) -> None:
        self._each("on_start", label, budget)

    def on_trial(self, trial: Any) -> None:
        self._each("on_trial", trial)

    def on_round(self, log_entry: Any) -> None:
        self._each("on_round", log_entry)

    def on_end(self) -> None:
        self._each("on_end")


def _best_gflops(trial: Trial) -> str:
    """What a layer run's progress bar shows after its count: the best GFLOP/s so far."""
    return f"best {trial.best_gflops:.1f} GFLOP/s"


class ProgressBarCallback(TuningCallback):
    """A tqdm progress bar over the trial budget, showing ``postfix(trial)`` after the count
    (default: the best GFLOP/s so far; a network run's bar shows its estimated latency)."""

    def __init__(self, postfix: Callable[[Any], str] = _best_gflops) -> None:
        self.postfix = postfix
        self._bar = None

    def on_start(self, label: str, budget: int | None) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=budget, desc=label, unit="trial", dynamic_ncols=True, leave=True)

    def on_trial(self, trial: Any) -> None:
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix_str(self.postfix(trial), refresh=False)

    def on_end(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def as_callback(callback: "TuningCallback | Sequence[TuningCallback] | None",
                kind: type[TuningCallback] = TuningCallback) -> TuningCallback:
    """One callback from None, a callback, or a list of them; each must be a ``kind`` (a network run asks for
    :class:`~tensorgym.network_tuning.NetworkCallback`: a layer run's callback reads fields its trials lack)."""
    if callback is None:
        return kind()
    if isinstance(callback, kind):
        return callback
    if isinstance(callback, Sequence) and all(isinstance(c, kind) for c in callback):
        return CallbackList(callback)
    raise InvalidTypeError(f"callback must be a {kind.__name__}, a list of them, or None; "
                           f"got {type(callback).__name__}")


class Tuner:
    """Budgeted, recorded access to one space's measurements (see the module docs).

    Args:
        evaluator: where records come from (an env's ``evaluator``).
        budget: the most trials this run may make (None: unlimited).
        time_budget: the most seconds of tuning clock (None: unlimited).
        callback: a :class:`TuningCallback` (or a list of them), e.g. a :class:`ProgressBarCallback`.
        label: what the callbacks call the run (default: the workload's label).
    """

    def __init__(self, evaluator: Evaluator, *, budget: int | None = 64, time_budget: float | None = None,
                 callback: TuningCallback | Sequence[TuningCallback] | None = None, label: str = ""):
        check_budget(budget, time_budget)
        if not isinstance(evaluator, Evaluator):
            raise InvalidTypeError(f"a Tuner measures through an Evaluator (an env's ``evaluator``), got "
                                   f"{type(evaluator).__name__}")
        self.evaluator = evaluator
        self.budget = None if budget is None else int(budget)
        self.time_budget = None if time_budget is None else float(time_budget)
        self.trials: list[Trial] = []
        self._seen: dict[Config, Record] = {}
        self._best: Record | None = None
        self._start = time.monotonic()
        self._measure_wall = 0.0  # real seconds spent inside measure()
        self._charged = 0.0  # seconds charged for trials
        self.measured = 0
        self.reused = 0
        self.busy_trials = 0  # trials whose timing saw other processes take the cores (Record.busy)
        self.callback = as_callback(callback)
        self._ended = False
        self.callback.on_start(label or evaluator.space.workload.label, self.budget)

    # -- the space -------------------------------------------------------------
    @property
    def space(self) -> Space:
        return self.evaluator.space

    def sample(self, rng: np.random.Generator, n: int = 1) -> list[Config]:
        """Up to ``n`` distinct random configs this run has not measured (``rng``: a NumPy Generator)."""
        return self.space.sample_many(rng, n, exclude=set(self._seen))

    def neighbours(self, config: "Config | Mapping[str, Any] | str", hops: int = 1) -> list[Config]:
        """The space's ``hops``-move neighbours of ``config`` (a Config, dict or JSON text of the space)."""
        return self.space.neighbours(self.space.parse(config), hops)

    def seen(self, config: "Config | Mapping[str, Any] | str") -> Record | None:
        """The record of ``config`` if this run measured it (free: no trial is charged)."""
        return self._seen.get(self.space.parse(config))

    # -- budget ------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        """The tuning clock (see the module docs)."""
        own = time.monotonic() - self._start - self._measure_wall
        return own + self._charged

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - len(self.trials)

    @property
    def exhausted(self) -> bool:
        if self.budget is not None and len(self.trials) >= self.budget:
            return True
        return self.time_budget is not None and self.elapsed >= self.time_budget

    # -- measuring -----------------------------------------------------------------
    def measure(self, configs: Sequence[Config]) -> list[Record]:
        """Records for ``configs``, in the order given (repeats of a config appear once).

        Configs already measured in this run are free. New configs beyond the
        remaining budget are dropped, so the result may be shorter than
        ``configs`` (it is then the given order with the dropped configs left
        out); nothing is measured once the budget is spent. With a time
        budget, batches are measured in chunks of 8 so the clock is checked often.
        """
        order = list(dict.fromkeys(self._parse_all(configs)))
        fresh: list[Config] = []
        for config in order:
            if config not in self._seen and (self.remaining is None or len(fresh) < self.remaining):
                fresh.append(config)
        chunk = 8 if self.time_budget is not None else max(1, len(fresh))
        for i in range(0, len(fresh), chunk):
            if self.exhausted:
                break
            self._measure_new(fresh[i:i + chunk])
        return [self._seen[c] for c in order if c in self._seen]

    def _parse_all(self, configs: Any) -> list[Config]:
        if isinstance(configs, (str, bytes, Mapping)) or not isinstance(configs, Iterable):
            raise InvalidTypeError(f"measure takes a list of configs (Configs, dicts or JSON texts of the space), got "
                                   f"{type(configs).__name__}" + ("; for one config, pass [config]"
                                                                  if isinstance(configs, (str, Mapping)) else ""))
        return [self.space.parse(config) for config in configs]

    def _measure_new(self, configs: list[Config]) -> list[Record]:
        t0 = time.monotonic()
        fresh = {c for c in configs if self.evaluator.lookup(c) is None}
        records = self._full_where_best(self.evaluator.evaluate(configs))
        wall = time.monotonic() - t0
        self._measure_wall += wall
        for record in records:
            is_fresh = record.config in fresh
            # Fresh trials share the batch's real wall time; replayed ones are charged what they cost then.
            self._charged += wall / len(fresh) if is_fresh else record.wall_s
            self._record_trial(record, is_fresh)
        return records

    def _full_where_best(self, records: list[Record]) -> list[Record]:
        """A record timed short (far slower than the database's best) that would still be this run's best
        is timed again in full, so no run's best rests on a short timing."""
        best = self._best.gflops if self._best else 0.0
        out = []
        for record in records:
            if record.ok and record.short and record.gflops > best:
                record = self.evaluator.time_in_full(record)
            if record.ok:
                best = max(best, record.gflops)
            out.append(record)
        return out

    def _record_trial(self, record: Record, fresh: bool) -> None:
        self._seen[record.config] = record
        if record.ok and (self._best is None or record.gflops > self._best.gflops):
            self._best = record
        self.measured += fresh
        self.reused += not fresh
        self.busy_trials += record.busy
        self.trials.append(Trial(len(self.trials) + 1, self.elapsed, record.config, record.status.value,
                                 record.gflops, self._best.gflops if self._best else 0.0, fresh))
        self.callback.on_trial(self.trials[-1])

    # -- the loop ------------------------------------------------------------------
    def run(self, strategy: SearchStrategy, seed: int = 0) -> dict[str, Any]:
        """Drive ``strategy`` (started here, on this Tuner's space, seeded by ``seed``) until the budget is spent
        or it proposes nothing more; returns its summary. Every measurement goes through :meth:`measure`."""
        strategy.start(self.space, np.random.default_rng(seed), seed, self.evaluator.database)
        try:
            while not self.exhausted:
                batch = strategy.ask(self.remaining)
                if not batch:
                    break
                records = self.measure(batch)
                strategy.history.add(records)
                strategy.tell(records)
                if not records:
                    break
        finally:
            strategy.close()
        return strategy.summary()

    # -- results -----------------------------------------------------------------
    @property
    def best(self) -> Record | None:
        return self._best

    def result(self, agent: str, seed: int, **extra: Any) -> TuningResult:
        """The run so far as a :class:`TuningResult` (ends the callbacks' run on the first call)."""
        if not self._ended:
            self._ended = True
            self.callback.on_end()
        space = self.space
        return TuningResult(
            agent=agent, workload=space.workload.label, workload_key=space.workload.key, space=space.name,
            target=space.target.fingerprint, seed=seed, budget=self.budget, time_budget=self.time_budget,
            trials=list(self.trials), best_config=self._best.config if self._best else None,
            best_gflops=self._best.gflops if self._best else 0.0,
            best_latency_s=self._best.latency_s if self._best else None,
            best_latency_cv=self._best.latency_cv if self._best else None, measured=self.measured,
            reused=self.reused, wall_s=time.monotonic() - self._start,
            extra={"busy_trials": self.busy_trials, "best_busy": bool(self._best and self._best.busy), **extra},
        )
