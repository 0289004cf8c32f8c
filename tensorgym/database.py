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

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .record import Record, Status
from .config import Config
from .errors import TensorgymError
from .target import Target
from .workloads import Workload

SCHEMA_VERSION = 1
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
    device_state TEXT NOT NULL DEFAULT '{}',
    UNIQUE (workload, target, space, config)
);
CREATE INDEX IF NOT EXISTS records_by_speed ON records (workload, target, space, gflops);
"""

_COLUMNS = ("id, workload, target, space, config, status, latency_s, latency_cv, samples, number, gflops, "
            "build_s, run_s, wall_s, error, created, device_state")
# Columns added after schema version 1 was first released: (name, definition), added to older files on open.
_ADDED_COLUMNS = (("device_state", "TEXT NOT NULL DEFAULT '{}'"),)


class DatabaseError(TensorgymError, RuntimeError):
    """The database file cannot be used (corrupt, or written by an incompatible version)."""


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


class Database:
    """A SQLite file of measurement records. ``Database(":memory:")`` keeps them in memory."""

    def __init__(self, path: str | Path):
        self.path = str(path) if str(path) == ":memory:" else str(Path(path).expanduser())
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout = 60000")
            if self.path != ":memory:":
                self._enable_wal()
            self._conn.execute("PRAGMA synchronous = FULL")
            self._create_schema()
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"cannot use {self.path} as a tensorgym database: {exc}") from None

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
            for statement in filter(str.strip, _SCHEMA.split(";")):
                self._conn.execute(statement)
            self._check_version()
            present = {row[1] for row in self._conn.execute("PRAGMA table_info(records)")}
            for column, definition in _ADDED_COLUMNS:
                if column not in present:
                    self._conn.execute(f"ALTER TABLE records ADD COLUMN {column} {definition}")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _check_version(self) -> None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise DatabaseError(f"{self.path} has schema version {row[0]}; this tensorgym reads {SCHEMA_VERSION}")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __deepcopy__(self, memo) -> "Database":
        return self  # an open connection is shared, not cloned (gym.make deep-copies env kwargs)

    # -- writing -------------------------------------------------------------
    def register(self, workload: Workload, target: Target) -> None:
        """Remember a workload's and target's descriptions (for ``show`` and datasets)."""
        self._conn.execute("INSERT OR IGNORE INTO workloads VALUES (?, ?, ?)",
                           (workload.key, workload.label, json.dumps(workload.to_json())))
        self._conn.execute("INSERT OR IGNORE INTO targets VALUES (?, ?, ?)",
                           (target.fingerprint, target.label, json.dumps(target.to_json())))

    def commit(self, record: Record) -> Record:
        """Store ``record`` durably and return the stored row (the earlier one if it already existed)."""
        self._conn.execute(
            "INSERT OR IGNORE INTO records (workload, target, space, config, status, latency_s, latency_cv, samples, "
            "number, gflops, build_s, run_s, wall_s, error, created, device_state) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.workload, record.target, record.space, record.config.key, record.status.value, record.latency_s,
             record.latency_cv, json.dumps(list(record.samples)), record.number, record.gflops, record.build_s,
             record.run_s, record.wall_s, record.error, record.created or time.time(),
             json.dumps(dict(record.device_state), sort_keys=True)),
        )
        stored = self.get(record.workload, record.target, record.space, record.config)
        assert stored is not None
        return stored

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

    def __len__(self) -> int:
        return self.count()


def _where(**filters: str | None) -> tuple[str, tuple]:
    keys = [(k, v) for k, v in filters.items() if v is not None]
    if not keys:
        return "", ()
    return "WHERE " + " AND ".join(f"{k} = ?" for k, _ in keys), tuple(v for _, v in keys)


def _record(row: Iterable) -> Record:
    (rid, workload, target, space, config, status, latency_s, latency_cv, samples, number, gflops, build_s, run_s,
     wall_s, error, created, device_state) = row
    return Record(workload=workload, target=target, space=space, config=Config.from_json(config),
                  status=Status(status), latency_s=latency_s, latency_cv=latency_cv,
                  samples=tuple(json.loads(samples)), number=number, gflops=gflops, build_s=build_s, run_s=run_s,
                  wall_s=wall_s, error=error, created=created,
                  device_state=tuple(sorted(json.loads(device_state).items())), id=rid)
