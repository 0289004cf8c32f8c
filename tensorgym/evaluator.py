"""Answer configs with records: from the database if measured before, else by measuring.

:class:`Evaluator` is the interface of the one path from "I want to know how
fast this config is" to a :class:`Record`, shared by environments, the Tuner
and network rounds. Behind it:

* :class:`LiveEvaluator`: the database first, then the measurer (below);
* :class:`ReplayEvaluator`: recorded configs only; a config the database does
  not hold raises :class:`NotMeasured`.

``Evaluator(space, database, measurer)`` builds the live one, or the replay one
when ``measurer`` is None (as ``pathlib.Path`` builds the path class of its
system). The live evaluator:

* a config already in the database (this run, an earlier run, or another
  process) is answered from it and never measured again;
* the others are measured as one batch (built in parallel, timed one by one,
  checked against NumPy since they are new), and each record is committed to
  the database the moment it exists, before the next kernel is timed: a run
  killed mid-batch keeps every measurement it finished;
* the fastest latency the database holds for the workload (same target and
  space) goes to the measurer as the *incumbent*: a kernel several times slower
  is timed short (``Record.timing == "short"``: one confirming sample, or none
  after a checked call ten times slower, see :mod:`tensorgym.measure.protocol`).
  :meth:`Evaluator.time_in_full`
  times such a kernel again in full when it turns out to matter (the
  :class:`~tensorgym.tuner.Tuner` asks when one would become a run's best).

**Who failed.** A stored record is final whatever its status (``ok``,
``build_error``, ``runtime_error``, ``timeout``, ``wrong_result``: faults of
the kernel), except ``infra_error``: the measurer stores it when the machine
failed and not the kernel (the runner was killed from outside or by the OOM
killer, a disk was full or failing, the runner kept dying before it reached
a kernel) and retrying within the batch did not help. Such a config counts as
not measured: it is measured again the next time it is asked for, and the
new record replaces the old one.

**A full disk** makes :meth:`Database.commit` raise a
:class:`~tensorgym.database.DatabaseWriteError` (naming the file and the
free space); the batch stops there, every record committed before stays
committed, and running the same search again resumes from them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from .database import Database
from .errors import TensorgymError
from .measure.measurer import Measurer
from .record import Record
from .config import Config
from .spaces.base import Space


class NotMeasured(TensorgymError, LookupError):
    """A replaying evaluator was asked for a config its database does not hold."""


class Evaluator(ABC):
    """Records for the configs of one space (see the module docs).

    Attributes:
        space: the space whose configs it answers.
        database: where its records are stored (None: kept elsewhere, e.g. in memory).
        measured, reused: configs measured by it, and answered from what was stored.
        simulated: whether it answers from measurements made before instead of measuring (a landscape): its
            first answer for a config in a run then stands for a measurement, and the machine's state
            while it answers says nothing about the answers.
    """

    space: Space
    database: Database | None
    measured: int = 0
    reused: int = 0
    simulated: bool = False

    def __new__(cls, *args: Any, **kwargs: Any):
        if cls is Evaluator:  # the constructor of the interface picks the implementation
            measurer = kwargs.get("measurer", args[2] if len(args) > 2 else None)
            cls = LiveEvaluator if measurer is not None else ReplayEvaluator
        return super().__new__(cls)

    @abstractmethod
    def lookup(self, config: Config) -> Record | None:
        """The stored final record of ``config``, or None."""

    @abstractmethod
    def evaluate(self, configs: Sequence[Config]) -> list[Record]:
        """One record per config, in order."""

    def incumbent_s(self) -> float | None:
        """The fastest latency known for the workload (None: none, or not known)."""
        return None

    def seed(self, seed: int | None = None) -> None:
        """Make the evaluator's own randomness follow a run's seed (a simulated one's noise); measuring and
        replaying evaluators have none."""
        return None

    def time_in_full(self, record: Record) -> Record:
        """``record`` timed again by the full protocol where this evaluator can time (else unchanged)."""
        return record


class LiveEvaluator(Evaluator):
    """Records for the configs of one space, backed by a database and a measurer (``None``: replay)."""

    def __init__(self, space: Space, database: Database, measurer: Measurer | None):
        self.space = space
        self.database = database
        self.measurer = measurer
        self._cache: dict[Config, Record] = {}
        self.measured = 0  # configs measured by this evaluator
        self.reused = 0  # configs answered from the database
        database.register(space.workload, space.target)

    def lookup(self, config: Config) -> Record | None:
        """The stored final record of ``config``; None if it was never measured, or only an
        ``infra_error`` is stored (the machine failed: it is measured again)."""
        record = self._cache.get(config)
        if record is None:
            record = self.database.get(self.space.workload.key, self.space.target.fingerprint, self.space.name, config)
            if record is None or not record.final:
                return None
            self._cache[config] = record
        return record

    def evaluate(self, configs: Sequence[Config]) -> list[Record]:
        """One record per config, in order; unknown configs are measured and committed first."""
        known: dict[Config, Record] = {}
        missing: dict[Config, None] = {}  # ordered set
        for config in configs:
            if config in known or config in missing:
                continue
            record = self.lookup(config)
            if record is None:
                missing[config] = None
            else:
                known[config] = record
                self.reused += 1

        def commit(record: Record) -> None:
            stored = self.database.commit(record)
            known[stored.config] = stored
            if stored.final:
                self._cache[stored.config] = stored
            self.measured += 1

        if missing and self.measurer is None:
            raise NotMeasured(f"{len(missing)} config(s) of {self.space.workload.label} are not in "
                              f"{self.database.path} (replay answers only measured configs), e.g. "
                              f"{next(iter(missing)).key}")
        if missing:
            self.measurer.measure(self.space, list(missing), on_record=commit, adaptive=True,
                                  incumbent_s=self.incumbent_s())
        return [known[c] for c in configs]

    def incumbent_s(self) -> float | None:
        """The fastest latency the database holds for this workload, target and space (None: none yet)."""
        best = self.database.best(self.space.workload.key, self.space.target.fingerprint, self.space.name)
        return best[0].latency_s if best else None

    def time_in_full(self, record: Record) -> Record:
        """``record`` with its kernel timed again by the full protocol (for a short-timed one that matters).

        The database row is updated (:meth:`Database.retimed`); a replaying
        evaluator, which cannot time, returns the record unchanged.
        """
        if self.measurer is None or not record.ok or record.id is None:
            return record
        timed = self.measurer.measure(self.space, [record.config], check=False)[0]
        if not timed.ok:
            return record
        stored = self.database.retimed(record, timed)
        self._cache[stored.config] = stored
        return stored


class ReplayEvaluator(LiveEvaluator):
    """Records of the configs a database holds; any other config raises :class:`NotMeasured`. It compiles and
    times nothing (no measurer), and a short-timed record stays as it is."""

    def __init__(self, space: Space, database: Database, measurer: None = None):
        if measurer is not None:
            raise TypeError("a replay evaluator measures nothing: build a LiveEvaluator to measure")
        super().__init__(space, database, None)
