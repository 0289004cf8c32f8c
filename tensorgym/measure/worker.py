"""Isolated worker processes that survive nothing going wrong in them.

A :class:`Worker` is a child Python process that runs functions sent to it
(``"module:function"`` plus pickled arguments) and sends back their results.
If the child segfaults, the call reports a crash; if it does not answer in
time, the child is killed and the call reports a timeout. Either way the
caller gets an :class:`Outcome`, never an exception, and the next call starts
a fresh child.

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

log = logging.getLogger(__name__)

# Runs in the child before anything else. Blocking `import torch` matters:
# tvm_ffi imports torch when it is installed, which costs ~2 s and ~200 MB per
# worker (shared/notes/tvm_probe.md, B5); workers never need it.
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
    """What became of one call: ``kind`` is ok, error, crash or timeout."""

    kind: str
    value: Any = None
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


class Worker:
    """One restartable child process. Not thread-safe; one call at a time."""

    def __init__(self, name: str, log_dir: str | Path, *, env: dict[str, str] | None = None,
                 block_torch: bool = True, preload: Sequence[str] = ("tvm",), unset: Sequence[str] = ()):
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
               "TENSORGYM_WORKER_PRELOAD": ",".join(self.preload)}
        with open(self.log_path, "ab") as logf:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, str(child_sock.fileno())],
                pass_fds=[child_sock.fileno()], stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                env=env, start_new_session=True,
            )
        child_sock.close()
        self._conn = Connection(parent_sock.detach())
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
        self.start()
        self._t0 = time.monotonic()
        try:
            self._conn.send((function, args, kwargs))
            self._send_failed = False
        except (OSError, EOFError):
            self._send_failed = True  # the child died before the call: report it as a crash

    @property
    def connection(self) -> Connection:
        return self._conn

    def collect(self, timeout: float | None) -> Outcome:
        """Wait for the answer to the last :meth:`submit`, up to ``timeout`` seconds."""
        if self._send_failed:
            return self._crashed()
        try:
            ready = self._conn.poll(timeout)
        except (OSError, EOFError):
            return self._crashed()
        if not ready:
            self._kill()
            self._cleanup()
            self.restarts += 1
            return Outcome("timeout", error=f"no answer within {timeout:.1f} s; worker killed",
                           seconds=time.monotonic() - self._t0)
        try:
            kind, value = self._conn.recv()
        except (OSError, EOFError):
            return self._crashed()
        elapsed = time.monotonic() - self._t0
        if kind == "ok":
            return Outcome("ok", value=value, seconds=elapsed)
        return Outcome("error", error=value, seconds=elapsed)

    def call(self, function: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Outcome:
        self.submit(function, *args, **kwargs)
        return self.collect(timeout)

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
            try:
                how = f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        return Outcome("crash", error=f"worker process {how}. {self._log_tail()}".strip(),
                       seconds=time.monotonic() - self._t0)

    def _log_tail(self, chars: int = 600) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        tail = text[-chars:].strip()
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
            results[index] = worker.collect(max(0.0, deadline - time.monotonic()))
            idle.append(worker)
    return results  # type: ignore[return-value]


# -- child side ------------------------------------------------------------------
def serve(fd: int) -> None:
    """The child's loop: receive ``(function, args, kwargs)``, answer ``(kind, value)``."""
    import importlib

    conn = Connection(fd)
    for module in filter(None, os.environ.get("TENSORGYM_WORKER_PRELOAD", "").split(",")):
        importlib.import_module(module)
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
            answer = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}")
        try:
            conn.send(answer)
        except (OSError, EOFError):
            return
