"""Every record of a Ray run in the one database the user named: a single writer, and a database view per run.

* :class:`RecordWriter` is the only process that opens the user's SQLite file. It
  runs as a Ray actor on the driver's node (the file stays on the driver's disk;
  no SQLite file is shared over a network file system). Actor calls run one at a
  time, so it needs no lock.
* :class:`NodeDatabase` is what a run on a node measures into. It implements the
  :class:`~tensorgym.database.Database` interface over a scratch SQLite file on the
  node, so envs, evaluators and agents use it unchanged, with two differences:

  - ``commit`` sends the record to the writer and waits until the writer has
    committed it to the user's file, *then* keeps it locally and returns: every
    measurement is durable in the one database before the run goes on;
  - ``get`` and ``records`` answer from the user's file (through the writer) for
    whatever the scratch file lacks: a run finds what any earlier or concurrent
    run, or an earlier attempt of itself, measured, exactly as a local run finds
    it in the shared database. A run that Ray retries after its worker or node
    died therefore measures nothing twice.

The writer also keeps, per run (a ``tag``), the attempts that started and the
records each run committed, so that a caller can check that no run measured a
config twice.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ..config import Config
from ..database import Database, SQLiteDatabase
from ..record import Record, Status
from ..target import Target
from ..workloads import Workload

WRITER_TIMEOUT = 300.0  # seconds a run waits for the writer to answer before it fails


class RecordWriter:
    """The body of the writer actor: the only connection to the user's database."""

    def __init__(self, path: str):
        self.db = Database(path)
        self.path = self.db.path
        self.commits = 0
        self.duplicates = 0  # commits whose config another run (or attempt) had stored first
        self.seconds = 0.0  # spent inside commits
        self._runs: dict[str, dict[str, Any]] = {}

    def ready(self) -> str:
        return self.path

    def close(self) -> None:
        self.db.close()

    def run_started(self, tag: str, node: str, pid: int) -> None:
        self._run(tag)["attempts"].append({"node": node, "pid": pid, "started": time.time()})

    def register(self, workload: Workload, target: Target) -> None:
        self.db.register(workload, target)

    def commit(self, tag: str, record: Record) -> Record:
        t0 = time.perf_counter()
        stored = self.db.commit(record)
        self.seconds += time.perf_counter() - t0
        self.commits += 1
        run = self._run(tag)
        key = (record.workload, record.target, record.space, record.config.key)
        if key in run["keys"]:
            run["repeats"] += 1  # the same run measured a config twice: what resuming must prevent
        run["keys"].add(key)
        if stored.created != record.created or stored.status != record.status:
            self.duplicates += 1
        return stored

    def get(self, workload: str, target: str, space: str, config: Config) -> Record | None:
        return self.db.get(workload, target, space, config)

    def records(self, workload: str | None, target: str | None, space: str | None,
                status: Status | None) -> list[Record]:
        return self.db.records(workload, target, space, status)

    def stats(self) -> dict[str, Any]:
        """Commits, their mean seconds, and per run tag: attempts, records committed, configs committed twice."""
        runs = {tag: {"attempts": run["attempts"], "records": len(run["keys"]), "repeats": run["repeats"]}
                for tag, run in self._runs.items()}
        return {"path": self.path, "commits": self.commits, "duplicates": self.duplicates,
                "commit_seconds": self.seconds, "rows": self.db.count(), "pid": os.getpid(), "runs": runs}

    def _run(self, tag: str) -> dict[str, Any]:
        return self._runs.setdefault(tag, {"attempts": [], "keys": set(), "repeats": 0})


class NodeDatabase(Database):
    """A run's database on a node: a scratch SQLite file in front of the user's database, reached through the
    writer (the same interface as the user's :class:`~tensorgym.database.Database`).

    ``writer`` is the handle of the :class:`RecordWriter` actor; ``tag`` names the run. Writes go to the
    writer first (the durable store), then to the scratch file; a config the scratch file lacks is asked
    of the writer; the rest is read from the scratch file.
    """

    writer: Any

    def __init__(self, path: str | Path, writer, tag: str):
        self._local = SQLiteDatabase(path, durable=False)  # the writer's file is the durable one
        self.path = self._local.path
        self.writer = writer
        self.tag = tag

    def _call(self, method: str, *args: Any) -> Any:
        import ray

        return ray.get(getattr(self.writer, method).remote(*args), timeout=WRITER_TIMEOUT)

    def close(self) -> None:
        self._local.close()

    def register(self, workload: Workload, target: Target) -> None:
        self._call("register", workload, target)
        self._local.register(workload, target)

    def commit(self, record: Record) -> Record:
        """Commit ``record`` to the user's database (through the writer), then keep the stored row here."""
        stored = self._call("commit", self.tag, record)
        return self._local.commit(stored)

    def retimed(self, stored: Record, timed: Record) -> Record:
        return self._local.retimed(stored, timed)

    def get(self, workload: str, target: str, space: str, config: Config) -> Record | None:
        record = self._local.get(workload, target, space, config)
        if record is None:
            record = self._call("get", workload, target, space, config)
            if record is not None:
                record = self._local.commit(record)
        return record

    def records(self, workload: str | None = None, target: str | None = None, space: str | None = None,
                status: Status | None = None) -> list[Record]:
        for record in self._call("records", workload, target, space, status):
            self._local.commit(record)
        return self._local.records(workload, target, space, status)

    def best(self, workload: str, target: str | None = None, space: str | None = None, k: int = 1) -> list[Record]:
        return self._local.best(workload, target, space, k)

    def count(self, workload: str | None = None, target: str | None = None, space: str | None = None) -> int:
        return self._local.count(workload, target, space)

    def workloads(self) -> dict[str, Workload]:
        return self._local.workloads()

    def targets(self) -> dict[str, Target]:
        return self._local.targets()

    def summaries(self):
        return self._local.summaries()
