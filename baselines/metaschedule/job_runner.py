"""Running a MetaSchedule job in its worker process, following its progress, and reusing a finished run.

Shared by the single-layer agent (:mod:`.agent`) and the network tuner
(:mod:`.network`); the jobs themselves are :mod:`.job` and :mod:`.network_job`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tensorgym.measure.worker import Worker
from tensorgym.target import Target

_Run = TypeVar("_Run")  # what a reused run is read back as

log = logging.getLogger(__name__)


class JobOptions:
    """The options of a MetaSchedule job that the single-layer agent and the network tuner share.

    Args:
        work_dir: where runs keep their logs, database and results (default: beside the tensorgym
            database, ``<db>.metaschedule/``; a temporary directory for an in-memory database).
        top_k: how many of MetaSchedule's best schedules (per layer) to re-time.
        build_timeout, run_timeout: MetaSchedule's builder and runner timeouts (seconds per candidate).
        timeout: seconds the whole job may take (default: scaled with the budget and the FLOPs).
        reuse: reuse a finished run found in the work directory.
    """

    def __init__(self, work_dir: str | Path | None = None, top_k: int = 3, build_timeout: float = 30.0,
                 run_timeout: float = 30.0, timeout: float | None = None, reuse: bool = True):
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self.top_k = top_k
        self.build_timeout = build_timeout
        self.run_timeout = run_timeout
        self.timeout = timeout
        self.reuse = reuse

    @contextlib.contextmanager
    def work_root(self, database: Any) -> Iterator[Path]:
        """The directory runs go under (see ``work_dir``); a temporary one is removed afterwards."""
        db_path = getattr(database, "path", ":memory:")
        if self.work_dir is not None:
            yield self.work_dir
        elif db_path != ":memory:":
            yield Path(f"{db_path}.metaschedule")
        else:
            temporary = tempfile.mkdtemp(prefix="tensorgym-metaschedule-")
            try:
                yield Path(temporary)
            finally:
                shutil.rmtree(temporary, ignore_errors=True)


class ProgressFile:
    """Reads the JSON lines a job appends to its progress file, and hands each new one to ``on_entry`` once."""

    def __init__(self, path: Path, on_entry: Callable[[dict[str, Any]], None]):
        self.path = path
        self.on_entry = on_entry
        self.seen = 0

    def poll(self) -> None:
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return
        for line in lines[self.seen:]:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                break  # a line being written; read it next time
            self.seen += 1
            self.on_entry(entry)


RESULT_FILE = "result.json"


def save_finished_run(work_dir: Path, data: dict[str, Any]) -> None:
    """Keep a finished run's result, for :func:`finished_run` to reuse."""
    (work_dir / RESULT_FILE).write_text(json.dumps(data))


def finished_run(work_dir: Path, reuse: bool) -> dict[str, Any] | None:
    """The saved result of a finished run in ``work_dir``, or None (not finished, unreadable, or not reused)."""
    done = work_dir / RESULT_FILE
    if not (reuse and done.exists()):
        return None
    try:
        data = json.loads(done.read_text())
    except json.JSONDecodeError:
        log.warning("ignoring the unreadable %s", done)
        return None
    if not isinstance(data, dict):
        log.warning("ignoring the unreadable %s", done)
        return None
    log.info("reusing the finished MetaSchedule run in %s", work_dir)
    return data


def reused_or_restarted(work_dir: Path, reuse: bool, replay: Callable[[dict[str, Any]], _Run]) -> _Run | None:
    """``replay(data)`` of the finished run in ``work_dir`` (its result, its trials shown to the callbacks) when it
    is reused and readable; otherwise None, and ``work_dir`` is emptied for a new run (an interrupted run cannot
    be resumed: it starts again)."""
    data = finished_run(work_dir, reuse)
    if data is not None:
        try:
            return replay(data)
        except (KeyError, TypeError):
            log.warning("ignoring the unreadable %s", work_dir / RESULT_FILE)
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    return None


def run_job(name: str, label: str, work_dir: Path, target: Target, entry_point: str, args: Sequence[Any],
            timeout: float, progress: ProgressFile) -> dict[str, Any]:
    """Run ``entry_point(*args)`` in a fresh worker process, polling ``progress`` until it returns.

    Raises RuntimeError, naming the worker's log, when the job fails or runs past ``timeout`` seconds.
    """
    worker = Worker(name, work_dir, env={"TVM_NUM_THREADS": str(target.num_cores)}, preload=())
    try:
        worker.submit(entry_point, *args)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            conn = worker.connection
            if conn is None or conn.poll(2.0):
                break
            progress.poll()
        outcome = worker.collect(max(0.0, deadline - time.monotonic()))
        progress.poll()
    finally:
        worker.close()
    if not outcome.ok:
        raise RuntimeError(f"MetaSchedule on {label} failed ({outcome.kind}); see {worker.log_path}: "
                           f"{outcome.error[-1500:]}")
    return outcome.value
