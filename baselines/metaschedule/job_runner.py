"""Running a MetaSchedule job in its worker process, following its progress, and reusing a finished run.

Shared by the single-layer agent (:mod:`.agent`) and the network tuner
(:mod:`.network`); the jobs themselves are :mod:`.job` and :mod:`.network_job`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tensorgym.measure.worker import Worker
from tensorgym.target import Target

log = logging.getLogger(__name__)


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
