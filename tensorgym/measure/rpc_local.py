"""A TVM RPC tracker and a ``tensorgym rpc-server`` on this machine, for trying RPC, tests and benchmarks.

    with LoopbackDevice(key="local") as device:
        env = gym.make("Matmul-BERT-M3-v0", target=device.target())

Both run as child processes, each in its own process group, and are stopped
by killing the group: nothing they start outlives :meth:`LoopbackDevice.stop`
(TVM's ``rpc_tracker`` forks a popen worker that a plain SIGTERM would orphan).
The server can be pinned to some of this machine's cores (``cores=``), which
makes it a device of its own: fewer cores, another fingerprint.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from ..target import Target

_CLI = "import sys; from tensorgym.cli import main; sys.exit(main(sys.argv[1:]))"  # `tensorgym`, installed or not


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def stop_group(proc: subprocess.Popen | None, grace: float = 5.0, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to the process group led by ``proc``, then SIGKILL the group after ``grace`` seconds."""
    if proc is None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever the leader left behind in its group
    except ProcessLookupError:
        pass
    proc.wait()


class LoopbackDevice:
    """A tracker on ``127.0.0.1`` and one device server of ``key`` registered with it."""

    def __init__(self, key: str = "loopback", *, cores: Iterable[int] | None = None, start_timeout: float = 120.0,
                 log_dir: str | Path | None = None):
        self.key = key
        self.cores = sorted(cores) if cores is not None else None
        self.start_timeout = start_timeout
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="tensorgym-rpc-"))
        self.tracker_port = 0
        self.tracker: subprocess.Popen | None = None
        self.server: subprocess.Popen | None = None
        self.fingerprint = ""  # the server's own, from its first line

    @property
    def tracker_address(self) -> str:
        return f"127.0.0.1:{self.tracker_port}"

    def start(self) -> "LoopbackDevice":
        try:
            self.tracker_port = free_port()
            self.tracker = self._spawn([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                                        "--port", str(self.tracker_port), "--port-end",
                                        str(self.tracker_port + 1)], "tracker.log")
            self.start_server()  # it waits for the tracker: both start at once
        except BaseException:
            self.stop()
            raise
        return self

    def start_server(self) -> None:
        """Start the device server (again) and wait until the tracker lists it."""
        port = free_port()
        cores = self.cores
        self.server = self._spawn(
            [sys.executable, "-c", _CLI, "rpc-server", "--tracker", self.tracker_address, "--key",
             self.key, "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1),
             "--wait-tracker", str(self.start_timeout)],
            "server.log", preexec=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
        self._wait(self.server_registered, "the device server", self.server)
        match = re.search(r"fingerprint ([0-9a-f]{16})", (self.log_dir / "server.log").read_text())
        self.fingerprint = match.group(1) if match else ""

    def server_registered(self) -> bool:
        """Does the tracker list a server of this key?"""
        from .rpc import tracker_servers

        try:
            return self.key in tracker_servers("127.0.0.1", self.tracker_port)
        except OSError:  # DeviceUnavailable: the tracker is not up yet
            return False

    def kill_server(self, sig: int = signal.SIGKILL) -> None:
        """Stop the device server's whole process group with ``sig`` (SIGKILL: as a crash would)."""
        stop_group(self.server, sig=sig)
        self.server = None

    def target(self, request_timeout: float = 30.0) -> Target:
        """The served device as a :class:`~tensorgym.target.Target` (:func:`tensorgym.remote_target`)."""
        from .rpc import remote_target

        return remote_target(self.tracker_address, self.key, request_timeout=request_timeout)

    def stop(self) -> None:
        stop_group(self.server)
        stop_group(self.tracker)
        self.server = self.tracker = None

    def __enter__(self) -> "LoopbackDevice":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers -----------------------------------------------------------------------------------
    def _spawn(self, args: list[str], log_name: str, preexec=None) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / log_name, "ab") as log:
            return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=preexec)

    def _wait(self, ready, what: str, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not ready():
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with code {proc.returncode}; see {self.log_dir}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} was not up after {self.start_timeout:g} s; see {self.log_dir}")
            time.sleep(0.2)
