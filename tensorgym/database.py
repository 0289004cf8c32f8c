"""Measurement records in one SQLite file.

One row per measured (workload, target fingerprint, space, config). The file
is opened in WAL mode with a busy timeout, so several processes can read and
write it at once; every record is committed (``synchronous=FULL``) before
:meth:`Database.commit` returns it, so an interrupted run loses nothing and a
re-run finds everything it measured. If two processes measure the same config
at the same time, the first committed row wins and both get it back.

The database is also a dataset: :meth:`Database.records` returns every record
of a (workload, target, space), which cost models and replay backends use.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .record import Record, Status
from .config import Config
from .errors import InvalidArgumentError, InvalidTypeError, TensorgymError
from .target import Target
from .workloads import Workload

SCHEMA_VERSION = 3
DEFAULT_DB_ENV = "TENSORGYM_DB"


def default_path() -> Path:
    """Where measurements go when no database is named: ``$TENSORGYM_DB`` if set, else
    ``~/.cache/tensorgym/records.db`` (one per user, shared by the command line and Python)."""
    env = os.environ.get(DEFAULT_DB_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tensorgym" / "records.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workloads (key TEXT PRIMARY KEY, label TEXT NOT NULL, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS targets (fingerprint TEXT PRIMARY KEY, label TEXT NOT NULL, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workload TEXT NOT NULL,
    target TEXT NOT NULL,
    space TEXT NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    latency_s REAL,
    latency_cv REAL,
    samples TEXT NOT NULL DEFAULT '[]',
    number INTEGER NOT NULL DEFAULT 0,
    gflops REAL,
    build_s REAL NOT NULL DEFAULT 0,
    run_s REAL NOT NULL DEFAULT 0,
    wall_s REAL NOT NULL DEFAULT 0,
    error TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    timing TEXT NOT NULL DEFAULT 'full',
    contention REAL,
    dropped INTEGER NOT NULL DEFAULT 0,
    device_state TEXT NOT NULL DEFAULT '{}',
    UNIQUE (workload, target, space, config)
);
CREATE INDEX IF NOT EXISTS records_by_speed ON records (workload, target, space, gflops);
"""

_COLUMNS_WRITTEN = ("workload, target, space, config, status, latency_s, latency_cv, samples, number, gflops, "
                    "build_s, run_s, wall_s, error, created, timing, contention, dropped, device_state")
_COLUMNS = "id, " + _COLUMNS_WRITTEN

# Schema migrations: version -> statements that bring a file of that version to the next one.
# Version 2 records how each latency was measured (timing: full or short) and the CPU contention
# seen while it was (NULL for records made before: not known). Version 3 records what the runner
# read from the device while timing (a GPU's clocks; '{}' for records made before and on CPUs).
_MIGRATIONS = {
    1: ("ALTER TABLE records ADD COLUMN timing TEXT NOT NULL DEFAULT 'full'",
        "ALTER TABLE records ADD COLUMN contention REAL",
        "ALTER TABLE records ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0"),
    2: ("ALTER TABLE records ADD COLUMN device_state TEXT NOT NULL DEFAULT '{}'",),
}


class DatabaseError(TensorgymError, RuntimeError):
    """The database file cannot be used (corrupt, another application's, written by an incompatible
    version, or in a place tensorgym cannot open it as asked); the message names the cause."""


class DatabaseWriteError(DatabaseError):
    """A record could not be stored (disk full, I/O error): nothing committed before it is lost."""


@dataclass(frozen=True)
class Summary:
    """Best record of one (workload, target, space), for ``tensorgym show``."""

    workload: str
    label: str
    target: str
    space: str
    records: int
    ok: int
    best: Record | None


MEMORY = ":memory:"
_TABLES = {"meta", "workloads", "targets", "records"}
# SQLite's primary result codes for a full disk and an I/O error.
_SQLITE_FULL, _SQLITE_IOERR = 13, 10


def database_path(path: Any) -> str:
    """Check a ``db`` argument: a non-empty ``str`` or ``os.PathLike`` path, or ``":memory:"``."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise InvalidTypeError(f"db must be a file path (str or pathlib.Path), a Database, or ':memory:' for a "
                               f"temporary database; got {type(path).__name__} {path!r:.60}")
    if not path.strip():
        raise InvalidArgumentError("db is an empty path: name a database file (e.g. records.db), or pass "
                                   "':memory:' for a temporary database that is gone when it is closed")
    return path if path == MEMORY else str(Path(path).expanduser())


class Database(ABC):
    """Where measurement records live: the interface every store implements.

    ``Database(path)`` opens the SQLite store (:class:`SQLiteDatabase`), the embedded default, as
    ``pathlib.Path`` builds the path class of its system; a Ray node's store
    (:class:`tensorgym.cluster.records.NodeDatabase`) implements the same interface. Every record is
    stored before :meth:`commit` returns it.
    """

    path: str
    readonly: bool = False

    def __new__(cls, *args: Any, **kwargs: Any):
        return super().__new__(SQLiteDatabase if cls is Database else cls)

    @abstractmethod
    def close(self) -> None:
        """Release the store (a closed store answers nothing)."""

    @abstractmethod
    def register(self, workload: Workload, target: Target) -> None:
        """Remember a workload's and a target's descriptions."""

    @abstractmethod
    def commit(self, record: Record) -> Record:
        """Store ``record`` (it replaces a non-final one of the same config) and return it as stored."""

    @abstractmethod
    def retimed(self, stored: Record, timed: Record) -> Record:
        """``stored`` with the timing of ``timed`` (a full re-timing of a short-timed kernel), stored."""

    @abstractmethod
    def get(self, workload: str, target: str, space: str, config: Config) -> Record | None:
        """The record of one config, or None."""

    @abstractmethod
    def records(self, workload: str | None = None, target: str | None = None, space: str | None = None,
                status: Status | None = None) -> list[Record]:
        """Every record matching the filters, oldest first."""

    @abstractmethod
    def best(self, workload: str, target: str | None = None, space: str | None = None, k: int = 1) -> list[Record]:
        """The ``k`` fastest correct records."""

    @abstractmethod
    def count(self, workload: str | None = None, target: str | None = None, space: str | None = None) -> int:
        """How many records match the filters."""

    @abstractmethod
    def workloads(self) -> dict[str, Workload]:
        """Registered workloads by key."""

    @abstractmethod
    def targets(self) -> dict[str, Target]:
        """Registered targets by fingerprint."""

    @abstractmethod
    def summaries(self) -> Iterator[Summary]:
        """One summary per (workload, target, space) group."""

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        return self.count()


class SQLiteDatabase(Database):
    """A SQLite file of measurement records.

    Args:
        path: the file (created with its missing parent directories if need be), or ``":memory:"``
            for a temporary database that is gone on :meth:`close` (only when asked for: an empty
            path is an error, never a temporary database).
        readonly: open an existing database for reading only, without taking any lock or writing
            anything: what ``tensorgym show`` and replaying environments do, so that a database on
            read-only media (a read-only mount, directory or file) can be read. A database no
            other process has open is read as a snapshot (SQLite's ``immutable``: no ``-wal`` or
            ``-shm`` file is made beside it); one being written is read as it is written.

    Opening refuses, without changing the file, what is not a tensorgym database: another
    application's SQLite file, a file that is not SQLite, a future or malformed schema version.
    When a file cannot be opened for writing, the error names why (a directory, a read-only file,
    directory or file system, no permission).
    """

    def __init__(self, path: str | os.PathLike, *, readonly: bool = False, durable: bool = True):
        self.path = database_path(path)
        self.readonly = bool(readonly)
        self.durable = bool(durable)  # False: a scratch copy (no fsync per commit) in front of a durable store
        self._conn: sqlite3.Connection | None = None
        if self.path == MEMORY:
            self._conn = sqlite3.connect(MEMORY, isolation_level=None)
            self._create_schema()
        elif self.readonly:
            self._open_readonly(Path(self.path))
        else:
            self._open_writable(Path(self.path))

    # -- opening -----------------------------------------------------------------
    def _open_writable(self, path: Path) -> None:
        if path.is_dir():
            raise DatabaseError(f"{path} is a directory; name a database file, e.g. {path / 'records.db'}")
        made = _make_parents(path.parent)
        existed = path.exists()
        try:
            problem = _why_not_writable(path)
            if problem:
                raise DatabaseError(f"cannot write the database {path}: {problem}"
                                    + (" (`tensorgym show` and backend='replay' open it read-only)" if existed
                                       else ""))
            try:
                self._conn = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
                self._conn.execute("PRAGMA busy_timeout = 60000")
                if self._kind() == "tensorgym":
                    self._check_version()  # before anything is written: a future version is left as it was
                self._enable_wal()
                self._conn.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'OFF'}")
                self._create_schema()
            except sqlite3.DatabaseError as exc:
                raise DatabaseError(f"cannot use {path} as a tensorgym database: {exc}"
                                    + _cause_suffix(path)) from None
        except BaseException:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if not existed:
                _remove_if_empty(path)
            for directory in reversed(made):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise

    def _open_readonly(self, path: Path) -> None:
        if path.is_dir():
            raise DatabaseError(f"{path} is a directory; name a database file, e.g. {path / 'records.db'}")
        if not path.exists():
            raise DatabaseError(f"{path} does not exist")
        if not _can_open(path, os.O_RDONLY):
            raise DatabaseError(f"cannot read {path}: no permission (mode {_mode(path)}, owner uid "
                                f"{path.stat().st_uid})")
        # A database no process has open (no -wal file: the last one to close it checkpointed
        # everything into the file) is read as an immutable snapshot: SQLite then creates no -wal
        # and -shm files, so read-only media work and a refused file is left exactly as it was.
        # One being written is read like any WAL reader (mode=ro), or, where its -shm cannot be
        # made (read-only media with a leftover -wal), as immutable too.
        live = Path(f"{path}-wal").exists()
        last: Exception | None = None
        for query in (("mode=ro", "mode=ro&immutable=1") if live else ("mode=ro&immutable=1",)):
            try:
                self._conn = sqlite3.connect(f"{path.absolute().as_uri()}?{query}", uri=True, timeout=60.0,
                                             isolation_level=None)
                self._conn.execute("PRAGMA busy_timeout = 60000")
                kind = self._kind()
                break
            except sqlite3.DatabaseError as exc:
                last = exc
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
        else:
            raise DatabaseError(f"cannot read {path} as a tensorgym database: {last}")
        if kind != "tensorgym":
            self._conn.close()
            raise DatabaseError(f"{path} holds no tensorgym database (an empty SQLite file)")
        self._check_version()

    def _kind(self) -> str:
        """``"empty"``, ``"tensorgym"``, or raises for another application's database (nothing is written)."""
        tables = {name for (name,) in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        tables.discard("sqlite_sequence")
        if not tables:
            return "empty"
        if _TABLES <= tables:
            return "tensorgym"
        raise DatabaseError(f"{self.path} is an SQLite database of another application (tables: "
                            f"{', '.join(sorted(tables)[:8])}); tensorgym does not write to it: name another file")

    def _enable_wal(self) -> None:
        # Switching a new file to WAL needs an exclusive lock, and SQLite does not wait for it
        # (no busy handler there): when another process holds the file, try again shortly.
        deadline = time.monotonic() + 60.0
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _create_schema(self) -> None:
        # In one write transaction, taken up front: processes opening a new file at the same
        # moment then wait for each other (busy timeout) instead of failing to upgrade a read
        # to a write, which SQLite answers with an immediate "database is locked".
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._kind()  # another process may have written the file since it was inspected
            for statement in filter(str.strip, _SCHEMA.split(";")):
                self._conn.execute(statement)
            self._check_version()
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _check_version(self) -> None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            if self.readonly:
                raise DatabaseError(f"{self.path} has no schema version: it was not written by tensorgym")
            self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            return
        value = row[0]
        if not (isinstance(value, str) and value.isascii() and value.isdigit()):
            raise DatabaseError(f"{self.path} has a malformed schema version {value!r} (a whole number is "
                                f"expected; this tensorgym reads version {SCHEMA_VERSION}): it was not written by "
                                f"tensorgym, or it is damaged")
        if int(value) != SCHEMA_VERSION:
            self._migrate(int(value))

    def _migrate(self, version: int) -> None:
        """Bring a file of an older schema version up to :data:`SCHEMA_VERSION` (inside the open transaction)."""
        if version > SCHEMA_VERSION or any(v not in _MIGRATIONS for v in range(version, SCHEMA_VERSION)):
            raise DatabaseError(f"{self.path} has schema version {version}; this tensorgym reads {SCHEMA_VERSION}")
        if self.readonly:
            raise DatabaseError(f"{self.path} has schema version {version}, which this tensorgym upgrades to "
                                f"{SCHEMA_VERSION} when it opens the file for writing; it was opened read-only")
        for step in range(version, SCHEMA_VERSION):
            for statement in _MIGRATIONS[step]:
                self._conn.execute(statement)
        self._conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        self._conn.close()

    # -- writing -------------------------------------------------------------
    def register(self, workload: Workload, target: Target) -> None:
        """Remember a workload's and target's descriptions (for ``show`` and datasets); a read-only
        database is left as it is."""
        if self.readonly:
            return
        with self._writing("the description of " + workload.label):
            self._conn.execute("INSERT OR IGNORE INTO workloads VALUES (?, ?, ?)",
                               (workload.key, workload.label, json.dumps(workload.to_json())))
            self._conn.execute("INSERT OR IGNORE INTO targets VALUES (?, ?, ?)",
                               (target.fingerprint, target.label, json.dumps(target.to_json())))

    def commit(self, record: Record) -> Record:
        """Store ``record`` durably and return the stored row.

        The first committed record of a (workload, target, space, config) wins, except that an
        ``infra_error`` record (the machine failed, not the kernel) is replaced by the next
        measurement of its config. Raises :class:`DatabaseWriteError` when the record cannot be
        written (disk full, I/O error): the message names the file and the free space.
        """
        if self.readonly:
            raise DatabaseError(f"{self.path} was opened read-only; open it with readonly=False to store records")
        with self._writing(f"the measurement of {record.config.key}"):
            self._conn.execute(
                f"INSERT INTO records ({_COLUMNS_WRITTEN}) VALUES ({', '.join('?' * 19)}) "
                f"ON CONFLICT (workload, target, space, config) DO UPDATE SET "
                f"{', '.join(f'{c} = excluded.{c}' for c in _COLUMNS_WRITTEN.split(', ')[4:])} "
                f"WHERE records.status = '{Status.INFRA_ERROR.value}'",
                (record.workload, record.target, record.space, record.config.key, record.status.value,
                 record.latency_s, record.latency_cv, json.dumps(list(record.samples)), record.number, record.gflops,
                 record.build_s, record.run_s, record.wall_s, record.error, record.created or time.time(),
                 record.timing, record.contention, record.dropped,
                 json.dumps(dict(record.device_state), sort_keys=True)),
            )
        stored = self.get(record.workload, record.target, record.space, record.config)
        assert stored is not None
        return stored

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """Turn SQLite's write failures into a :class:`DatabaseWriteError` that says what was lost and why."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            text = str(exc)
            if code == _SQLITE_FULL or "full" in text:
                cause = f"the disk is full ({_free_space(self.path)})"
            elif code == _SQLITE_IOERR or "I/O error" in text:
                cause = f"a disk I/O error ({text}; {_free_space(self.path)})"
            elif "readonly" in text or "read-only" in text:
                cause = f"it has become read-only ({text})"
            else:
                raise
            lost = what[:1].upper() + what[1:200]
            raise DatabaseWriteError(f"cannot write {self.path}: {cause}. {lost} was not stored; every record "
                                     f"committed before it is kept: fix the cause and run the same command again "
                                     f"to resume") from None

    def retimed(self, stored: Record, timed: Record) -> Record:
        """Replace the latency of the stored ``stored`` with a new timing of the same kernel, ``timed``.

        For a kernel first timed short (or on a busy machine) that turned out to
        matter: the row keeps its identity and status, takes ``timed``'s latency,
        samples, timing mode, contention and device state, and adds its run and wall seconds to
        what the row had cost (the clock of a replayed trial charges both).
        """
        if stored.id is None:
            raise ValueError("retimed() takes a record read from this database")
        if self.readonly:
            raise DatabaseError(f"{self.path} was opened read-only; open it with readonly=False to store records")
        with self._writing(f"the new timing of {stored.config.key}"):
            self._conn.execute(
                "UPDATE records SET latency_s = ?, latency_cv = ?, samples = ?, number = ?, gflops = ?, "
                "run_s = run_s + ?, wall_s = wall_s + ?, timing = ?, contention = ?, dropped = ?, device_state = ? "
                "WHERE id = ?",
                (timed.latency_s, timed.latency_cv, json.dumps(list(timed.samples)), timed.number, timed.gflops,
                 timed.run_s, timed.wall_s, timed.timing, timed.contention, timed.dropped,
                 json.dumps(dict(timed.device_state), sort_keys=True), stored.id),
            )
        fresh = self.get(stored.workload, stored.target, stored.space, stored.config)
        assert fresh is not None
        return fresh

    # -- reading -------------------------------------------------------------
    def get(self, workload: str, target: str, space: str, config: Config) -> Record | None:
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM records WHERE workload = ? AND target = ? AND space = ? AND config = ?",
            (workload, target, space, config.key),
        ).fetchone()
        return _record(row) if row else None

    def records(self, workload: str | None = None, target: str | None = None, space: str | None = None,
                status: Status | None = None) -> list[Record]:
        """Records matching the given keys, oldest first."""
        where, args = _where(workload=workload, target=target, space=space,
                             status=status.value if status else None)
        rows = self._conn.execute(f"SELECT {_COLUMNS} FROM records {where} ORDER BY id", args).fetchall()
        return [_record(r) for r in rows]

    def best(self, workload: str, target: str | None = None, space: str | None = None, k: int = 1) -> list[Record]:
        """The ``k`` fastest correct records."""
        where, args = _where(workload=workload, target=target, space=space, status="ok")
        rows = self._conn.execute(f"SELECT {_COLUMNS} FROM records {where} ORDER BY gflops DESC LIMIT ?",
                                  (*args, k)).fetchall()
        return [_record(r) for r in rows]

    def count(self, workload: str | None = None, target: str | None = None, space: str | None = None) -> int:
        where, args = _where(workload=workload, target=target, space=space)
        return self._conn.execute(f"SELECT COUNT(*) FROM records {where}", args).fetchone()[0]

    def workloads(self) -> dict[str, Workload]:
        return {key: Workload.from_json(json.loads(text))
                for key, text in self._conn.execute("SELECT key, json FROM workloads")}

    def targets(self) -> dict[str, Target]:
        """Every target the database has seen, by fingerprint (records of other machines included)."""
        return {fingerprint: Target.from_json(json.loads(text))
                for fingerprint, text in self._conn.execute("SELECT fingerprint, json FROM targets")}

    def summaries(self) -> Iterator[Summary]:
        """Best record per (workload, target, space), most recently measured workloads first."""
        labels = dict(self._conn.execute("SELECT key, label FROM workloads").fetchall())
        groups = self._conn.execute(
            "SELECT workload, target, space, COUNT(*), SUM(status = 'ok'), MAX(id) FROM records "
            "GROUP BY workload, target, space ORDER BY MAX(id) DESC"
        ).fetchall()
        for workload, target, space, n, n_ok, _ in groups:
            best = self.best(workload, target, space)
            yield Summary(workload, labels.get(workload, workload), target, space, n, n_ok or 0,
                          best[0] if best else None)


def _where(**filters: str | None) -> tuple[str, tuple]:
    keys = [(k, v) for k, v in filters.items() if v is not None]
    if not keys:
        return "", ()
    return "WHERE " + " AND ".join(f"{k} = ?" for k, _ in keys), tuple(v for _, v in keys)


def _record(row: Iterable) -> Record:
    (rid, workload, target, space, config, status, latency_s, latency_cv, samples, number, gflops, build_s, run_s,
     wall_s, error, created, timing, contention, dropped, device_state) = row
    return Record(workload=workload, target=target, space=space, config=Config.from_json(config),
                  status=Status(status), latency_s=latency_s, latency_cv=latency_cv,
                  samples=tuple(json.loads(samples)), number=number, gflops=gflops, build_s=build_s, run_s=run_s,
                  wall_s=wall_s, error=error, created=created, timing=timing, contention=contention, dropped=dropped,
                  device_state=tuple(sorted(json.loads(device_state).items())), id=rid)


# -- opening: causes -----------------------------------------------------------------------------------------------
def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; returns the ones created (to remove on failure)."""
    missing = []
    probe = directory
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise DatabaseError(f"cannot create a database in {directory}: {probe} is a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseError(f"cannot create the directory {directory} for the database: "
                            f"{_describe_os_error(exc, probe)}") from None
    return missing[::-1]


def _why_not_writable(path: Path) -> str | None:
    """Why SQLite could not open ``path`` for writing (with its -wal and -shm files), or None."""
    directory = path.parent
    if path.exists():
        if not path.is_file():
            return "it is not a regular file"
        if not _can_open(path, os.O_RDONLY):
            return f"no permission to read it (mode {_mode(path)}, owner uid {path.stat().st_uid})"
        if not _can_open(path, os.O_RDWR):
            if _read_only_mount(path):
                return "it is on a read-only file system"
            return f"the file is read-only (mode {_mode(path)})"
        companions_exist = all(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))
        if not companions_exist and not _can_create_in(directory):
            if _read_only_mount(directory):
                return "it is on a read-only file system"
            return (f"its directory {directory} is read-only (mode {_mode(directory)}): SQLite creates "
                    f"{path.name}-wal and {path.name}-shm beside the database")
        return None
    if not _can_create_in(directory):
        if _read_only_mount(directory):
            return f"{directory} is on a read-only file system"
        return f"no permission to create files in {directory} (mode {_mode(directory)})"
    return None


def _can_open(path: Path, flags: int) -> bool:
    """Whether ``path`` opens with ``flags`` (the kernel's answer, capabilities included; nothing changes)."""
    try:
        os.close(os.open(path, flags | os.O_CLOEXEC))
    except PermissionError:
        return False
    except OSError as exc:
        return exc.errno != errno.EROFS
    return True


def _can_create_in(directory: Path) -> bool:
    """Whether files can be created in ``directory``: an unnamed O_TMPFILE leaves nothing behind."""
    if not hasattr(os, "O_TMPFILE"):  # not Linux
        return os.access(directory, os.W_OK | os.X_OK)
    try:
        os.close(os.open(directory, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    except PermissionError:
        return False
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return False
        return os.access(directory, os.W_OK | os.X_OK)  # no O_TMPFILE on this file system: ask access()
    return True


def _cause_suffix(path: Path) -> str:
    problem = _why_not_writable(path) if not path.is_dir() else "it is a directory"
    return f" ({problem})" if problem else ""


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _mode(path: Path) -> str:
    try:
        return oct(path.stat().st_mode & 0o777)
    except OSError:
        return "unknown"


def _describe_os_error(exc: OSError, where: Path) -> str:
    if exc.errno is not None and _read_only_mount(where):
        return f"{where} is on a read-only file system"
    return exc.strerror or str(exc)


def _remove_if_empty(path: Path) -> None:
    """Remove a database file this process created and left empty (a failed open leaves no file)."""
    try:
        if path.stat().st_size:
            return  # written: by this process before it failed, or by another one meanwhile
    except OSError:
        return
    for suffix in ("-wal", "-shm", "-journal", ""):
        with contextlib.suppress(OSError):
            Path(f"{path}{suffix}").unlink()


def _free_space(path: str) -> str:
    """``"12.0 KiB free of 1.0 MiB on /mnt"``-style text for the file system holding ``path``."""
    probe = Path(path).parent
    try:
        usage = shutil.disk_usage(probe)
    except OSError:
        return "free space unknown"
    return f"{_bytes(usage.free)} free of {_bytes(usage.total)} on its file system"


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
