"""Search in rounds: an agent's search that goes on where it stopped each time it is given more trials.

A task scheduler tunes many (task, candidate) pairs under one budget and
gives them measurements a *round* at a time (Ansor: 64 trials). The search
inside each pair must continue across rounds without restarting: its
population, cost model and history persist. A :class:`SearchSession` does
this for any search written against the :class:`~tensorgym.tuner.Tuner`
API, unchanged (``search(tuner, rng, seed)`` of every
:class:`~tensorgym.agents.SearchAgent`):

* the search runs in a background thread over a :class:`RoundTuner`, a Tuner
  without a budget of its own;
* when the search calls :meth:`RoundTuner.measure`, it hands the configs to
  the thread that owns the session and waits; that thread (the scheduler's,
  in :meth:`SearchSession.run_round`) measures them through the evaluator,
  up to the round's allowance, and hands control back;
* once the allowance is used up, :meth:`~SearchSession.run_round` returns and
  the search stays blocked inside ``measure`` until the next round is granted
  (a batch may span rounds: the rest of it is measured first next time);
* exactly one thread runs at any moment (the search computes only while the
  caller waits), so a session is as deterministic as the search itself, no
  search computes while a kernel is timed, and every measurement, database
  write and callback happens in the caller's thread;
* :meth:`~SearchSession.close` ends the search: the blocked ``measure`` raises
  :class:`SessionClosed`, which unwinds the search in its thread.

The search sees an unlimited budget (``tuner.exhausted`` turns true only when
the session is closed), so it keeps proposing until the scheduler stops
granting rounds. A search that returns on its own (its space ran dry) has
*finished*; a scheduler treats the pair as dead.

The session's tuning clock (``tuner.elapsed``) counts only the time of its
own rounds: the search's computing and its measurements, as in a Tuner.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .config import Config
from .errors import InvalidArgumentError
from .evaluator import Evaluator
from .record import Record
from .tuner import Tuner, TuningCallback

log = logging.getLogger(__name__)

SearchFunction = Callable[[Tuner, np.random.Generator, int], "dict[str, Any] | None"]


class SessionClosed(BaseException):
    """Raised inside a search's thread when its session is closed, to unwind the search.

    A ``BaseException`` (like ``GeneratorExit``), so that a search's ``except Exception`` does not catch it.
    """


class RoundTuner(Tuner):
    """The Tuner a search sees inside a :class:`SearchSession` (see the module docs).

    It has no budget of its own: the session grants trials round by round, and
    :meth:`measure` blocks while no round is running. ``exhausted`` is true once
    the session is closed.
    """

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

    def measure(self, configs: Sequence[Config]) -> list[Record]:
        """Records for ``configs``, in order (repeats once); blocks until the rounds granted have measured them all.

        Raises :class:`SessionClosed` if the session is closed meanwhile.
        """
        order = list(dict.fromkeys(configs))
        fresh = [c for c in order if c not in self._seen]
        if fresh:
            self._session.submit(fresh)
        return [self._seen[c] for c in order if c in self._seen]


class SearchSession:
    """One search, run round by round (see the module docs).

    Args:
        search: the search, e.g. an agent's bound ``search`` method (``search(tuner, rng, seed)``).
        evaluator: where its records come from.
        seed: the seed of the search's ``rng``.
        callback: sees every trial of the session (called in the caller's thread).
        label: names the session in logs and callbacks.
    """

    def __init__(self, search: SearchFunction, evaluator: Evaluator, *, seed: int = 0,
                 callback: TuningCallback | Sequence[TuningCallback] | None = None, label: str = ""):
        self._search = search
        self.seed = int(seed)
        self.label = label
        self._cond = threading.Condition()
        self._turn = "caller"  # who runs: "caller" (run_round's thread) or "search"
        self._pending: list[Config] | None = None  # what the search asked for and is not measured yet
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.closed = False
        self.finished = False  # the search returned (or failed): it will ask for nothing more
        self.extra: dict[str, Any] | None = None  # what the search returned
        self.active_s = 0.0  # wall seconds of this session's rounds
        self.rounds = 0
        self.tuner = RoundTuner(evaluator, self, callback=callback, label=label)

    # -- the caller's side ---------------------------------------------------------------------
    def run_round(self, trials: int, *, stop: Callable[[], bool] | None = None, chunk: int | None = None) -> int:
        """Let the search make up to ``trials`` more trials; returns how many it made.

        Fewer than ``trials`` when the search finished (see :attr:`finished`) or
        ``stop()`` turned true (checked between evaluator calls of at most
        ``chunk`` configs: pass a chunk to stop promptly on a clock). Errors of
        the search are raised here.
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
            if self.finished:
                return 0
            if self._thread is None:
                self._start()
            elif self._pending is None:
                self._hand_over()  # the last round completed the search's request: let it go on
            while self._pending and not (stop is not None and stop()):
                room = trials - used
                if room <= 0:
                    break
                batch = self._pending[:room if chunk is None else min(room, chunk)]
                self.tuner._measure_new(batch)  # noqa: SLF001 - the Tuner's own bookkeeping, in this thread
                used += len(batch)
                self._pending = self._pending[len(batch):] or None
                if self._pending is None:
                    if used >= trials or (stop is not None and stop()):
                        break  # hold the search until the next round
                    self._hand_over()
            return used
        finally:
            self.active_s += time.monotonic() - started
            self.rounds += 1

    def close(self, timeout: float = 60.0) -> None:
        """End the search (its blocked ``measure`` raises :class:`SessionClosed`) and wait for its thread."""
        with self._cond:
            if self.closed:
                return
            self.closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("search session %s did not stop within %.0f s; leaving its thread behind",
                            self.label, timeout)

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=f"search {self.label}", daemon=True)
        with self._cond:
            self._turn = "search"
            self._thread.start()
            self._wait_for("caller")
        self._raise_error()

    def _hand_over(self) -> None:
        with self._cond:
            self._turn = "search"
            self._cond.notify_all()
            self._wait_for("caller")
        self._raise_error()

    def _wait_for(self, turn: str) -> None:
        while self._turn != turn:
            self._cond.wait()

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    # -- the search's side (its thread) ------------------------------------------------------------
    def submit(self, configs: list[Config]) -> None:
        """Called by the search's :class:`RoundTuner`: ask for ``configs`` and wait until they are measured."""
        with self._cond:
            if self.closed:
                raise SessionClosed
            self._pending = list(configs)
            self._turn = "caller"
            self._cond.notify_all()
            while self._turn != "search" and not self.closed:
                self._cond.wait()
            if self.closed:
                raise SessionClosed

    def _main(self) -> None:
        with self._cond:
            self._wait_for("search")
        try:
            self.extra = self._search(self.tuner, np.random.default_rng(self.seed), self.seed) or {}
        except SessionClosed:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
            self._error = exc
        finally:
            with self._cond:
                self.finished = True
                self._pending = None
                self._turn = "caller"
                self._cond.notify_all()
