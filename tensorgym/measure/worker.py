"""Isolated worker processes that survive nothing going wrong in them.

A :class:`Worker` is a child Python process that runs functions sent to it
(``"module:function"`` plus pickled arguments) and sends back their results.
If the child dies, the call reports a crash (with the signal that killed it
and the last phase the child reported with :func:`mark`); if it does not
answer in time, the child is killed and the call reports a timeout; if the
call raised because of the machine (a full disk, no memory: see
:mod:`.faults`), the call reports ``infra``. Either way the caller gets an
:class:`Outcome`, never an exception, and the next call starts a fresh child.

Children are started with ``subprocess`` (``python -c <bootstrap>``), not
``multiprocessing``: they never re-import the user's ``__main__``, so scripts
without an ``if __name__ == "__main__"`` guard and notebooks work. A child's
stdout/stderr go to a log file, whose tail is attached to crash reports.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Sequence

from .faults import infrastructure_cause, signal_name

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # what a starting child (importing TVM on a loaded machine) may take

# Runs in the child before anything else. Blocking `import torch` matters:
# tvm_ffi imports torch when it is installed, which costs ~2 s and ~200 MB per
# worker (measured with TVM 0.27 and PyTorch 2.13); workers never need it.
_BOOTSTRAP = """
import json, os, sys
sys.path[:] = json.loads(os.environ["TENSORGYM_WORKER_SYS_PATH"])
if os.environ.get("TENSORGYM_WORKER_BLOCK_TORCH") == "1":
    class _BlockTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError("torch is blocked in tensorgym workers", name=name)
            return None
    sys.meta_path.insert(0, _BlockTorch())
from tensorgym.measure.worker import serve
serve(int(sys.argv[1]))
"""


@dataclass(frozen=True)
class Outcome:
    """What became of one call.

    ``kind`` is ``ok``, ``error`` (the call raised), ``infra`` (it raised because of the machine,
    or the child could not be started), ``crash`` (the child died: ``signal`` is the signal that
    killed it, None if it exited) or ``timeout``. ``phase`` is the last phase the child reported
    with :func:`mark` during the call ("" if none).
    """

    kind: str
    value: Any = None
    error: str = ""
    seconds: float = 0.0
    signal: int | None = None
    phase: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


class Worker:
    """One restartable child process. Not thread-safe; one call at a time."""

    def __init__(self, name: str, log_dir: str | Path, *, env: dict[str, str] | None = None,
                 block_torch: bool = True, preload: Sequence[str] = ("tvm",), report_ready: bool = False,
                 unset: Sequence[str] = ()):
        self.report_ready = report_ready  # the child says when it has started (see collect)
        self._ready = False
        self.name = name
        self.log_path = Path(log_dir) / f"{name}.log"
        self.env = dict(env or {})
        self.unset = tuple(unset)  # variables of this process's environment the child does not inherit
        self.block_torch = block_torch
        self.preload = tuple(preload)
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._t0 = 0.0
        self._send_failed = False
        self._start_error = ""
        self.phase = ""  # the last phase the child reported during the current call
        self.restarts = 0

    # -- lifecycle ---------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        if self.alive:
            return
        self._cleanup()
        parent_sock, child_sock = socket.socketpair()
        env = {**{k: v for k, v in os.environ.items() if k not in self.unset}, **self.env,
               "TENSORGYM_WORKER_SYS_PATH": json.dumps([p for p in sys.path if isinstance(p, str)]),
               "TENSORGYM_WORKER_BLOCK_TORCH": "1" if self.block_torch else "0",
               "TENSORGYM_WORKER_PRELOAD": ",".join(self.preload),
               "TENSORGYM_WORKER_REPORT_READY": "1" if self.report_ready else "0"}
        with open(self.log_path, "ab") as logf:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, str(child_sock.fileno())],
                pass_fds=[child_sock.fileno()], stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                env=env, start_new_session=True,
            )
        child_sock.close()
        self._conn = Connection(parent_sock.detach())
        self._ready = False
        log.debug("started worker %s (pid %d)", self.name, self._proc.pid)

    def close(self) -> None:
        if self._conn is not None and self.alive:
            try:
                self._conn.send(None)  # polite shutdown
                self._proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        self._cleanup()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._proc.kill()
            self._proc.wait()

    def _cleanup(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._proc = None

    # -- calls ---------------------------------------------------------------
    def submit(self, function: str, *args: Any, **kwargs: Any) -> None:
        """Send a call without waiting; collect it with :meth:`collect`."""
        self._t0 = time.monotonic()
        self.phase = ""
        self._send_failed = False
        try:
            self.start()
        except OSError as exc:  # no process could be started (no memory, no pids, no disk for the log)
            self._cleanup()
            self._start_error = f"could not start worker process {self.name}: {exc}"
            return
        self._start_error = ""
        try:
            self._conn.send((function, args, kwargs))
        except (OSError, EOFError):
            self._send_failed = True  # the child died before the call: report it as a crash

    @property
    def connection(self) -> Connection:
        return self._conn

    def collect(self, timeout: float | None, *, limit: float | None = None) -> Outcome:
        """Wait for the answer to the last :meth:`submit`, up to ``timeout`` seconds.

        ``limit`` is the call's time limit as the caller set it, for the timeout message (a pool
        that collects a call after its deadline waits 0 s, but the call had ``limit`` seconds).
        When the child reports a new phase (:func:`mark`), the wait starts again: ``timeout`` is
        the limit of each phase. A worker made with ``report_ready=True`` that has not finished
        starting (importing its preloads) gets at least :data:`START_TIMEOUT_S` for that.
        """
        if self._start_error:
            return Outcome("infra", error=self._start_error, seconds=time.monotonic() - self._t0)
        if self._send_failed:
            return self._crashed()
        allowance = timeout
        if timeout is not None and self.report_ready and not self._ready:
            allowance = max(timeout, START_TIMEOUT_S)  # a child still starting up gets its own allowance
        end = None if allowance is None else time.monotonic() + allowance
        while True:
            try:
                ready = self._conn.poll(None if end is None else max(0.0, end - time.monotonic()))
            except (OSError, EOFError):
                return self._crashed()
            if not ready:
                self._kill()
                self._cleanup()
                self.restarts += 1
                allowed = limit if limit is not None else timeout
                return Outcome("timeout", error=f"no answer within {allowed:.1f} s; worker killed",
                               seconds=time.monotonic() - self._t0, phase=self.phase)
            try:
                kind, value = self._conn.recv()
            except (OSError, EOFError):
                return self._crashed()
            if kind == "phase":
                # The limit is for each phase: a child's start-up and loading do not eat into the
                # time of the kernel it then runs.
                self.phase = value
                self._ready = self._ready or value == "ready"
                end = None if timeout is None else time.monotonic() + timeout
                continue
            break
        elapsed = time.monotonic() - self._t0
        if kind == "ok":
            return Outcome("ok", value=value, seconds=elapsed, phase=self.phase)
        return Outcome("infra" if kind == "infra" else "error", error=value, seconds=elapsed, phase=self.phase)

    def call(self, function: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Outcome:
        self.submit(function, *args, **kwargs)
        return self.collect(timeout)

    @property
    def pid(self) -> int | None:
        """The child's process id (None when no child runs)."""
        return self._proc.pid if self.alive else None

    def _crashed(self) -> Outcome:
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
        self._cleanup()
        self.restarts += 1
        if code is not None and code < 0:
            how = f"killed by signal {signal_name(-code)}"
        else:
            how = f"exited with code {code}"
        where = f" while in phase {self.phase!r}" if self.phase else ""
        return Outcome("crash", error=f"worker process {how}{where}. {self._log_tail()}".strip(),
                       seconds=time.monotonic() - self._t0, signal=-code if code is not None and code < 0 else None,
                       phase=self.phase)

    def _log_tail(self, chars: int = 600) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        tail = text[-chars:]
        if len(text) > chars and "\n" in tail:
            tail = tail[tail.index("\n") + 1:]  # whole lines only
        tail = tail.strip()
        return f"Log tail: {tail}" if tail else ""


def run_all(workers: Sequence[Worker], calls: Sequence[tuple[str, tuple, dict]], timeout: float) -> list[Outcome]:
    """Run ``calls`` on a pool of workers, each at most ``timeout`` seconds; results in call order."""
    results: list[Outcome | None] = [None] * len(calls)
    queue = list(range(len(calls)))[::-1]
    busy: dict[int, tuple[Worker, float]] = {}  # call index -> (worker, deadline)
    idle = list(workers)
    while queue or busy:
        while queue and idle:
            index = queue.pop()
            worker = idle.pop()
            function, args, kwargs = calls[index]
            worker.submit(function, *args, **kwargs)
            busy[index] = (worker, time.monotonic() + timeout)
        by_conn = {w.connection: i for i, (w, _) in busy.items() if w.connection is not None}
        earliest = min(deadline for _, deadline in busy.values())
        ready = wait(list(by_conn), timeout=max(0.0, earliest - time.monotonic())) if by_conn else []
        finished = {by_conn[c] for c in ready}
        finished |= {i for i, (w, d) in busy.items() if w.connection is None or time.monotonic() >= d}
        for index in finished:
            worker, deadline = busy.pop(index)
            results[index] = worker.collect(max(0.0, deadline - time.monotonic()), limit=timeout)
            idle.append(worker)
    return results  # type: ignore[return-value]


# -- child side ------------------------------------------------------------------
_CONNECTION: Connection | None = None  # the child's connection to its parent (None outside workers)


def mark(phase: str) -> None:
    """Tell the parent which phase the current call has reached (e.g. ``"kernel"``: the kernel runs
    now), so that a crash can be blamed on the right party. Does nothing outside a worker."""
    if _CONNECTION is not None:
        _CONNECTION.send(("phase", phase))


def serve(fd: int) -> None:
    """The child's loop: receive ``(function, args, kwargs)``, answer ``(kind, value)``."""
    import importlib

    global _CONNECTION
    conn = _CONNECTION = Connection(fd)
    for module in filter(None, os.environ.get("TENSORGYM_WORKER_PRELOAD", "").split(",")):
        importlib.import_module(module)
    if os.environ.get("TENSORGYM_WORKER_REPORT_READY") == "1":
        mark("ready")
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        function, args, kwargs = message
        try:
            module_name, _, attr = function.partition(":")
            result = getattr(importlib.import_module(module_name), attr)(*args, **kwargs)
            answer = ("ok", result)
        except BaseException as exc:  # noqa: BLE001 - report everything to the parent
            kind = "infra" if infrastructure_cause(exc) else "error"
            answer = (kind, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}")
        try:
            conn.send(answer)
        except (OSError, EOFError):
            return
