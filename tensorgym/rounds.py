"""Search in rounds: a search strategy that goes on where it stopped each time it is given more trials.

A task scheduler tunes many (task, candidate) pairs under one budget and
gives them measurements a *round* at a time (Ansor: 64 trials). The search
inside each pair must continue across rounds without restarting: its
population, cost model and history persist. A :class:`SearchSession` holds
one :class:`~tensorgym.strategy.SearchStrategy` between rounds and drives it
with the same ask / measure / tell loop as :meth:`tensorgym.tuner.Tuner.run`:

* :meth:`SearchSession.run_round` measures, through the evaluator, the
  configs the strategy asked for, up to the round's allowance, and tells the
  strategy each batch's records once the whole batch is measured;
* a batch may span rounds: what the allowance left unmeasured is measured
  first in the next round, and the strategy is told then, so that a search
  in rounds makes exactly the trials of one uninterrupted run of its seed;
* nothing runs between rounds (a strategy computes only inside ``ask`` and
  ``tell``), so no search computes while a kernel is timed, and every
  measurement, database write and callback happens in the caller's thread;
* :meth:`~SearchSession.close` ends the run (``strategy.close()``).

The strategy is never told of a budget (``ask`` gets no limit), so it keeps
proposing until the scheduler stops granting rounds. A strategy that
proposes nothing more has *finished*; a scheduler treats the pair as dead.

The session's tuning clock (``tuner.elapsed``) counts only the time of its
own rounds: the strategy's computing and its measurements, as in a Tuner.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import numpy as np

from .config import Config
from .errors import InvalidArgumentError
from .evaluator import Evaluator
from .strategy import SearchStrategy
from .tuner import Tuner, TuningCallback

log = logging.getLogger(__name__)

# A strategy that keeps asking for configs its run measured already (answered free) without ever
# proposing a new one would spin a round forever; after this many such batches in a row it is finished.
MAX_STALE_BATCHES = 100


class RoundTuner(Tuner):
    """The Tuner of a :class:`SearchSession`: no budget of its own (the session grants trials round by round),
    and a clock that runs only during the session's rounds."""

    def __init__(self, evaluator: Evaluator, session: "SearchSession",
                 callback: TuningCallback | Sequence[TuningCallback] | None = None, label: str = ""):
        super().__init__(evaluator, budget=1, callback=callback, label=label)
        self.budget = None  # the session's rounds are the budget
        self._session = session

    @property
    def exhausted(self) -> bool:
        return self._session.closed

    @property
    def elapsed(self) -> float:
        """The session's clock: its rounds' wall time minus real measurement time, plus charged measurement time."""
        return self._session.active_s - self._measure_wall + self._charged

    @property
    def measure_wall_s(self) -> float:
        """Real seconds spent measuring for this session."""
        return self._measure_wall

    @property
    def charged_s(self) -> float:
        """Seconds charged for this session's trials (replayed ones at what they cost when measured)."""
        return self._charged


class SearchSession:
    """One search strategy, run round by round (see the module docs).

    Args:
        strategy: the strategy (a fresh one: the session starts it; e.g. ``make_agent("ga")``).
        evaluator: where its records come from.
        seed: the seed of the strategy's ``rng``.
        callback: sees every trial of the session.
        label: names the session in logs and callbacks.
    """

    def __init__(self, strategy: SearchStrategy, evaluator: Evaluator, *, seed: int = 0,
                 callback: TuningCallback | Sequence[TuningCallback] | None = None, label: str = ""):
        if not isinstance(strategy, SearchStrategy):
            raise InvalidArgumentError(f"a search session drives a SearchStrategy, got {type(strategy).__name__}")
        self.strategy = strategy
        self.seed = int(seed)
        self.label = label
        self.closed = False
        self.finished = False  # the strategy proposes nothing more
        self.active_s = 0.0  # wall seconds of this session's rounds
        self.rounds = 0
        self.tuner = RoundTuner(evaluator, self, callback=callback, label=label)
        self._started = False
        self._batch: list[Config] = []  # the batch asked for last
        self._pending: list[Config] = []  # the part of it not measured yet
        self._stale = 0

    @property
    def extra(self) -> dict:
        """The strategy's summary of its run so far."""
        return self.strategy.summary() if self._started else {}

    def run_round(self, trials: int, *, stop: Callable[[], bool] | None = None, chunk: int | None = None) -> int:
        """Let the strategy make up to ``trials`` more trials; returns how many it made.

        Fewer than ``trials`` when the strategy finished (see :attr:`finished`) or
        ``stop()`` turned true (checked between evaluator calls of at most
        ``chunk`` configs: pass a chunk to stop promptly on a clock).
        """
        if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
            raise InvalidArgumentError(f"a round has at least one trial, got {trials!r}")
        if chunk is not None and chunk < 1:
            raise InvalidArgumentError(f"chunk must be >= 1, got {chunk!r}")
        if self.closed:
            raise InvalidArgumentError(f"session {self.label!r} is closed")
        started = time.monotonic()
        used = 0
        try:
            if not self._started:
                self._started = True
                self.strategy.start(self.tuner.space, np.random.default_rng(self.seed), self.seed,
                                    self.tuner.evaluator.database)
            while not self.finished and used < trials and not (stop is not None and stop()):
                if not self._pending and not self._next_batch():
                    break
                room = trials - used
                part = self._pending[:room if chunk is None else min(room, chunk)]
                self.tuner._measure_new(part)  # noqa: SLF001 - the Tuner's own bookkeeping
                used += len(part)
                self._pending = self._pending[len(part):]
                if not self._pending:
                    self._tell()
            return used
        finally:
            self.active_s += time.monotonic() - started
            self.rounds += 1

    def _next_batch(self) -> bool:
        """Ask the strategy for its next batch (its new configs become pending); False when it is finished."""
        while True:
            batch = self.strategy.ask(None)
            if not batch:
                self.finished = True
                return False
            self._batch = list(dict.fromkeys(self.tuner.space.parse(c) for c in batch))
            self._pending = [c for c in self._batch if self.tuner.seen(c) is None]
            if self._pending:
                self._stale = 0
                return True
            self._tell()  # every config was measured before in this run: answered free
            self._stale += 1
            if self._stale >= MAX_STALE_BATCHES:
                log.info("search session %s: the strategy proposes only configs it measured; finished", self.label)
                self.finished = True
                return False

    def _tell(self) -> None:
        records = [self.tuner.seen(c) for c in self._batch]
        records = [r for r in records if r is not None]
        self.strategy.history.add(records)
        self.strategy.tell(records)

    def close(self) -> None:
        """End the run: the strategy is closed (it books what it was told and proposes nothing more)."""
        if self.closed:
            return
        self.closed = True
        if self._started:
            if self._pending:  # a batch cut by the last round: the strategy books the part measured
                self._tell()
            self.strategy.close()
