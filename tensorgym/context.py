"""What a tuning run works with: one target, one database, one measurer (:class:`TuningContext`).

Envs, the tuning loop and the network schedulers receive a context instead of
each resolving a target, opening a database and starting a measurer (the
shape of MetaSchedule's ``TuneContext``): whoever builds the context decides
what is shared, and every consumer of one context measures with the same
measurer into the same database.

**Who closes what.** A context closes only what it opened: a database it
opened from a path, a measurer it started. A :class:`~tensorgym.database.Database`
or :class:`~tensorgym.measure.Measurer` handed to it stays open. Both are
opened lazily (the database on first use of :attr:`~TuningContext.database`,
the measurer on first use of :attr:`~TuningContext.measurer`), so a context
that only replays records starts no process. A context counts its uses:
:meth:`~TuningContext.close` gives one back, and the last one closes what the
context opened; closing a closed context does nothing.

**The process's measurer of a target.** :meth:`TuningContext.shared` gives a
context over a database of the caller's choice whose measurer is the one of
the process's *default context* of the target (:data:`DEFAULT_CONTEXTS`):
started when the first context sharing it measures, closed when the last of
them closes, or at exit. This is how the envs of ``gym.make_vec(id,
num_envs=4, vectorization_mode="sync")``, built with ``db=...`` and no
``measurer=``, time their kernels one at a time through one measurer (a
measurer per env would multiply the builder processes, and two measurers
would time kernels over each other).

**Fork safety.** A forked child inherits the contexts but not the worker
processes and pipes behind their measurers, nor their SQLite connections: in
the child the default contexts are forgotten (the child starts its own), an
inherited context opens its own database and measurer on first use, and
closing an inherited context closes nothing of the parent's.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable
from typing import Any

from .database import Database, database_path, default_path
from .errors import InvalidTypeError, TensorgymError
from .evaluator import Evaluator
from .measure.measurer import Measurer
from .spaces.base import Space
from .target import Target, resolve_target

MeasurerFactory = Callable[[Target], Measurer]
DatabaseArgument = Database | str | os.PathLike | None

# One lock for every context's use count and lazy starts: a measurer started twice, or closed while another
# thread takes it, would leak worker processes. Re-entrant: closing a context closes the one it shares with.
_LOCK = threading.RLock()


class ContextClosed(TensorgymError, RuntimeError):
    """A closed tuning context (or an env closed with it) was asked for its database or measurer."""


class TuningContext:
    """The target, database and measurer a tuning run works with (see the module docs).

    Build one with :meth:`local` (a context of its own) or :meth:`shared` (the process's measurer of a
    target); use it as a context manager, or :meth:`close` it.

    Args:
        target: where kernels run (a :class:`~tensorgym.target.Target`, a name, or None: this CPU).
        db: a :class:`~tensorgym.database.Database` (left open by :meth:`close`), a path to open on first
            use (closed by :meth:`close`), ``":memory:"``, or None: :func:`tensorgym.database.default_path`.
        measurer: a :class:`~tensorgym.measure.Measurer` to measure with (left open by :meth:`close`);
            None: one started on first use by ``measurer_factory`` (default
            :class:`~tensorgym.measure.Measurer`), or the one of the context ``lender`` gives.
        readonly: open the database (from a path) for reading only, as replaying envs do.
        lender: called on first use of :attr:`measurer` with the target, it returns a context (holding one
            use for this one, given back by :meth:`close`) whose measurer this one measures with.
    """

    def __init__(self, target: Target | str | None = None, db: DatabaseArgument = None, *,
                 measurer: Measurer | None = None, readonly: bool = False,
                 measurer_factory: MeasurerFactory | None = None,
                 lender: Callable[[Target], TuningContext] | None = None):
        if measurer is not None and not isinstance(measurer, Measurer):
            raise InvalidTypeError(f"measurer must be a tensorgym Measurer, got {type(measurer).__name__}")
        if db is not None and not isinstance(db, Database):
            db = database_path(db)  # a bad path is refused here, before anything is opened
        self.target: Target = resolve_target(target)
        self.readonly = bool(readonly)
        self._database: Database | None = db if isinstance(db, Database) else None
        self._db_path: str | None = None if isinstance(db, Database) else db
        self._owns_database = not isinstance(db, Database)
        self._measurer = measurer
        self._owns_measurer = measurer is None and lender is None
        self._measurer_factory = measurer_factory or Measurer
        self._lend = lender if measurer is None else None
        self._lender: TuningContext | None = None
        self._users = 1
        self._closed = False
        self._on_last_close: Callable[[TuningContext], None] | None = None
        # The processes that opened the database, started the measurer and took the lender's use: a forked
        # child opens, starts and takes its own.
        self._database_pid = self._measurer_pid = self._lender_pid = os.getpid()

    # -- constructors -----------------------------------------------------------------------------------
    @classmethod
    def local(cls, target: Target | str | None = None, db: DatabaseArgument = None, *,
              measurer: Measurer | None = None, readonly: bool = False) -> TuningContext:
        """A context of its own: ``target`` (default: this CPU), ``db`` (default: the default database),
        and ``measurer``, or one it starts on first use and closes with itself."""
        return cls(target, db, measurer=measurer, readonly=readonly)

    @classmethod
    def shared(cls, target: Target | str | None = None, db: DatabaseArgument = None, *,
               readonly: bool = False) -> TuningContext:
        """A context over ``db`` (default: the default database) that measures with the process's measurer
        of ``target``, the one every context made so shares: what envs built without ``context=`` or
        ``measurer=`` use. It takes a use of the target's default context when it first measures, and gives
        it back when closed."""
        return cls(target, db, readonly=readonly, lender=DEFAULT_CONTEXTS.acquire)

    # -- what it holds ------------------------------------------------------------------------------------
    @property
    def database(self) -> Database:
        """The database (a path is opened on first use)."""
        with _LOCK:
            self._check_open()
            if self._database is None or (self._owns_database and self._database_pid != os.getpid()):
                # In a forked child the parent's connection is dropped, not closed: SQLite's are per process.
                path = self._db_path if self._db_path is not None else default_path()
                self._database = Database(path, readonly=self.readonly)
                self._database_pid = os.getpid()
            return self._database

    @property
    def db_path(self) -> str:
        """The database's path, without opening it (``":memory:"`` for a temporary one)."""
        if self._database is not None:
            return self._database.path
        return self._db_path if self._db_path is not None else str(default_path())

    @property
    def measurer(self) -> Measurer:
        """The measurer: the given one, the lender's, or one started on first use."""
        with _LOCK:
            self._check_open()
            if self._lend is not None:
                if self._lender is None or self._lender_pid != os.getpid():
                    self._lender, self._lender_pid = self._lend(self.target), os.getpid()
                return self._lender.measurer
            if self._measurer is None or (self._owns_measurer and self._measurer_pid != os.getpid()):
                # In a forked child the parent's measurer is dropped, not closed: its processes are the parent's.
                self._measurer, self._measurer_pid = self._measurer_factory(self.target), os.getpid()
            return self._measurer

    @property
    def measurer_started(self) -> bool:
        """Whether :attr:`measurer` answers without starting a measurer."""
        if self._lend is not None:
            return self._lender is not None and self._lender.measurer_started
        return self._measurer is not None

    def evaluator(self, space: Space, *, replay: bool = False) -> Evaluator:
        """The evaluator of ``space`` over this context: its database first, then its measurer (``replay``:
        the database only; nothing is measured or started)."""
        return Evaluator(space, self.database, None if replay else self.measurer)

    @property
    def users(self) -> int:
        """How many uses are not given back yet (0: closed)."""
        return 0 if self._closed else self._users

    @property
    def closed(self) -> bool:
        return self._closed

    # -- lifecycle ----------------------------------------------------------------------------------------
    def share(self) -> TuningContext:
        """This context, with one more use (given back by one more :meth:`close`)."""
        with _LOCK:
            self._check_open()
            self._users += 1
        return self

    def close(self) -> None:
        """Give one use back; the last closes the database and measurer this context opened, and gives back
        its use of the lender's context. Closing a closed context does nothing."""
        with _LOCK:
            if self._closed:
                return
            self._users -= 1
            if self._users > 0:
                return
            self._closed = True
            # What this process opened: an inherited (forked) context closes nothing of the parent's.
            pid = os.getpid()
            measurer = self._measurer if self._owns_measurer and self._measurer_pid == pid else None
            database = self._database if self._owns_database and self._database_pid == pid else None
            lender = self._lender if self._lender_pid == pid else None
            on_last_close = self._on_last_close
            self._lender = self._on_last_close = None
        for resource in (measurer, database, lender):
            if resource is not None:
                resource.close()
        if on_last_close is not None:
            on_last_close(self)

    def __enter__(self) -> TuningContext:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        measurer = "shared" if self._lend is not None else ("started" if self._measurer else "not started")
        state = "closed" if self._closed else f"{self._users} use(s)"
        return f"TuningContext({self.target.label}, db={self.db_path}, measurer {measurer}, {state})"

    def _check_open(self) -> None:
        if self._closed:
            raise ContextClosed(f"this tuning context ({self.target.label}, db={self.db_path}) is closed; "
                                f"build a new one (or a new env)")


class DefaultContexts:
    """The process's default context per target, whose measurer the contexts of :meth:`TuningContext.shared`
    measure with: started by the first of them that measures, closed when the last gives it back, or at exit
    (uses never given back are not waited for).

    Attributes:
        measurer_factory: starts the measurer of a default context (default
            :class:`~tensorgym.measure.Measurer`; tests put a synthetic one here). Read when a measurer
            starts, so that it can be changed while contexts exist.
    """

    def __init__(self, measurer_factory: MeasurerFactory = Measurer):
        self.measurer_factory = measurer_factory
        self._contexts: dict[Any, TuningContext] = {}

    @staticmethod
    def _key(target: Target) -> Any:
        try:
            hash(target)
            return target
        except TypeError:  # a target with an unhashable field: its description names it as well
            return repr(target)

    def acquire(self, target: Target) -> TuningContext:
        """The default context of ``target`` (started if none is open), with one more use."""
        with _LOCK:
            key = self._key(target)
            context = self._contexts.get(key)
            if context is not None and not context.closed:
                return context.share()
            context = TuningContext(target, measurer_factory=lambda t: self.measurer_factory(t))
            context._on_last_close = lambda closed: self._forget(key, closed)
            self._contexts[key] = context
            return context

    def get(self, target: Target | str | None = None) -> TuningContext | None:
        """The open default context of ``target`` (no use taken), or None."""
        with _LOCK:
            return self._contexts.get(self._key(resolve_target(target)))

    def _forget(self, key: Any, context: TuningContext) -> None:
        with _LOCK:
            if self._contexts.get(key) is context:
                del self._contexts[key]

    def after_fork(self) -> None:
        """In a forked child: forget the parent's contexts (their processes are the parent's), and take a new
        lock (another thread of the parent may have held it at the fork)."""
        global _LOCK
        _LOCK = threading.RLock()
        self._contexts = {}

    def close_all(self) -> None:
        """Close every default context, whatever its uses (at exit)."""
        with _LOCK:
            contexts, self._contexts = list(self._contexts.values()), {}
            for context in contexts:
                context._users = 1  # the uses never given back: the next close is the last
        for context in contexts:
            try:
                context.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown: nothing is left to report to
                pass


DEFAULT_CONTEXTS = DefaultContexts()
atexit.register(DEFAULT_CONTEXTS.close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=DEFAULT_CONTEXTS.after_fork)
