"""Kernels timed on another machine through TVM RPC: the remote target and the RPC runner.

A device server (``tensorgym rpc-server``, :mod:`.rpc_server`) registers with a
TVM RPC tracker under a device key. From the client side:

* :func:`remote_target` asks one server of that key for its description
  (``tensorgym.device_info``, read on the device itself) and returns a
  :class:`~tensorgym.target.Target` whose fingerprint is the device's and
  whose :attr:`~tensorgym.target.Target.remote` says where it is. Spaces,
  environments and agents take it like any target; a
  :class:`~tensorgym.measure.Measurer` for it uses an :class:`RPCRunner`.
* Kernels are built here, by the measurer's builder pool, for the device's CPU
  (its LLVM ``mcpu`` and ISA extensions); the :class:`RPCRunner` uploads each
  library to the device, loads it there and calls
  :func:`~tensorgym.measure.tasks.check_and_time` with the remote TVM device,
  so the check against NumPy and the timing protocol are those of a local run.

**One session per kernel**, as MetaSchedule's and AutoTVM's RPC runners do: a
TVM RPC server serves one session at a time, so a session is also the lock
that keeps two measurements off one device, and a session's time limit
(``session_timeout``, enforced by the server) is the only bound on a kernel
that hangs on a machine the client cannot signal. Each session is a fresh
process on the device, so each kernel gets the protocol's process warm-up.

**Faults become records.** The client runs in a :class:`~.worker.Worker` child
with a hard time limit, and the remote part answers with a status:

* a kernel that outlives the session's limit: ``timeout``;
* a session that ends during the kernel while the device still serves (the
  kernel crashed the device's session process): ``runtime_error``;
* a server that went away during the kernel, no server of the key registered
  at the tracker, none free within ``request_timeout``, or no tracker:
  ``infra_error`` with the reason, at once (the machine's fault, not the
  kernel's: it is measured again later). Once a server is back, the next batch
  measures again.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import TensorgymError
from ..spaces.builder import KernelBuilder
from ..target import RemoteDevice, Target, TargetError
from .protocol import TimingProtocol
from .runner import Runner
from .tasks import FAULTS, check_and_time, compile_library
from .worker import Outcome, Worker

log = logging.getLogger(__name__)

DEVICE_INFO = "tensorgym.device_info"  # the global function a device server registers
_SELF = "tensorgym.measure.rpc"
_CONNECT_TIMEOUT = 10.0  # seconds to reach the tracker
_MARGIN = 15.0  # seconds the client may spend beyond a session's limit (connect, upload, answer)


class DeviceUnavailable(TensorgymError, ConnectionError):
    """No device server of the key could be reached (no tracker, no server registered, none free in time)."""


def remote_target(tracker: str = "127.0.0.1:9190", key: str = "", *, request_timeout: float = 60.0) -> Target:
    """The device a ``tensorgym rpc-server`` serves under ``key`` at ``tracker`` (``HOST:PORT``), as a Target.

    The description is read on the device: the fingerprint keying its records is the
    device's own. Raises :class:`DeviceUnavailable` when no such server answers within
    ``request_timeout`` seconds, and :class:`~tensorgym.target.TargetError` for a device
    this machine cannot build for (another ISA) or a server that is not tensorgym's.
    """
    device = RemoteDevice.parse(f"{tracker}/{key}", request_timeout)
    with tempfile.TemporaryDirectory(prefix="tensorgym-rpc-") as logs:
        worker = Worker("rpc-describe", logs)
        try:
            outcome = worker.call(f"{_SELF}:describe_device", device, timeout=request_timeout + 2 * _MARGIN)
        finally:
            worker.close()
    if not outcome.ok:
        raise DeviceUnavailable(f"cannot read the device {device.address}: {outcome.error.splitlines()[0]}")
    info = outcome.value
    if "error" in info:
        raise (TargetError if info.get("not_tensorgym") else DeviceUnavailable)(info["error"])
    here = os.uname().machine
    if info.get("machine") != here:
        raise TargetError(f"the device {device.address} is a {info.get('machine')} machine and this one {here}: "
                          f"cross-compiling for another ISA is not supported; build on a {info.get('machine')} host")
    # The device's own mcpu: None (LLVM's name for its CPU, ``system_mcpu``) unless the server restricts its CPU
    # to a profile (TENSORGYM_CPU=x86-64-v3 there), whose LLVM CPU is part of what the device is.
    target = Target.from_json({**info, "remote": device, "mcpu": info.get("mcpu") if info.get("profile") else None})
    if info.get("fingerprint") != target.fingerprint:
        log.warning("device %s reports fingerprint %s, computed here as %s (another tensorgym version on the "
                    "server?); records are keyed by %s", device.address, info.get("fingerprint"),
                    target.fingerprint, target.fingerprint)
    return target


class RPCRunner(Runner):
    """Checks and times kernels on a remote device: upload, load, :func:`check_and_time` over TVM RPC.

    The RPC client runs in one long-lived child process (a :class:`~.worker.Worker`),
    so a client stuck on a dead connection is killed at its time limit like a local
    runner, and the caller never blocks. ``fault`` (a test hook, see
    :class:`~tensorgym.measure.Measurer`) makes the *device* crash or hang: a kernel
    that writes far out of bounds, or one that never returns, runs there instead.
    """

    def __init__(self, target: Target, work_dir: str | Path, protocol: TimingProtocol | None = None):
        if target.remote is None:
            raise ValueError(f"{target.label} is not a remote target; use tensorgym.remote_target(...)")
        super().__init__(target, protocol)
        self.device = target.remote
        self._worker = Worker("rpc-runner", work_dir)

    def start(self) -> None:
        self._worker.start()

    def run(self, builder: KernelBuilder, config: Config, artifact: str, *, check: bool, timeout: float,
            fault: str | None = None, incumbent_s: float | None = None) -> Outcome:
        return self._worker.call(f"{_SELF}:run_remote", builder, config, artifact, device=self.device, check=check,
                                 protocol=self.protocol, fault=fault, session_timeout=timeout,
                                 incumbent_s=incumbent_s, timeout=timeout + self.device.request_timeout + _MARGIN)

    def close(self) -> None:
        self._worker.close()

    @property
    def restarts(self) -> int:
        return self._worker.restarts


# -- client side, inside the runner's child process ---------------------------------------------------
def request_session(device: RemoteDevice, session_timeout: float):
    """A TVM RPC session on a free server of ``device.key``, limited to ``session_timeout`` seconds.

    Asks the tracker directly (rather than through ``tvm.rpc.TrackerSession``) so that every
    step is bounded: a missing tracker or server is reported at once, and a request no server
    answers within ``request_timeout`` is dropped (the tracker skips requests whose client
    has gone).
    """
    from tvm import rpc
    from tvm.rpc import base

    where = f"{device.tracker_host}:{device.tracker_port}"
    with _tracker_connection(device.tracker_host, device.tracker_port) as sock:
        try:
            if device.key not in _server_keys(sock):
                raise DeviceUnavailable(f"no device server with key {device.key!r} is registered at the tracker "
                                        f"{where} (start one: tensorgym rpc-server --tracker {where} "
                                        f"--key {device.key})")
            sock.settimeout(device.request_timeout)
            base.sendjson(sock, [base.TrackerCode.REQUEST, device.key, "", 1])
            _, (host, port, match_key) = base.recvjson(sock)
        except DeviceUnavailable:
            raise
        except TimeoutError:
            raise DeviceUnavailable(f"no server with key {device.key!r} at {where} became free within "
                                    f"{device.request_timeout:g} s") from None
        except (OSError, ValueError, struct.error) as exc:
            raise DeviceUnavailable(f"the tracker at {where} broke off: {exc}") from None
    try:
        return rpc.connect(host, port, match_key, session_timeout=session_timeout)
    except RuntimeError as exc:
        raise DeviceUnavailable(f"the server of {device.key!r} at {host}:{port} refused the session: "
                                f"{_last_line(str(exc))}") from None


def tracker_servers(host: str, port: int) -> list[str]:
    """The device keys of the servers registered at the tracker ``host:port`` (one entry per server)."""
    with _tracker_connection(host, port) as sock:
        try:
            return _server_keys(sock)
        except (OSError, ValueError, struct.error) as exc:
            raise DeviceUnavailable(f"the tracker at {host}:{port} broke off: {exc}") from None


def _tracker_connection(host: str, port: int) -> socket.socket:
    """A socket that has shaken hands with the tracker at ``host:port`` (no retry loop: it answers or not)."""
    from tvm.rpc import base

    try:
        sock = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT)
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        magic = struct.unpack("<i", base.recvall(sock, 4))[0]
    except (OSError, struct.error) as exc:
        raise DeviceUnavailable(f"no RPC tracker answers at {host}:{port} ({exc})") from None
    if magic != base.RPC_TRACKER_MAGIC:
        sock.close()
        raise DeviceUnavailable(f"{host}:{port} is not a TVM RPC tracker")
    return sock


def _server_keys(sock: socket.socket) -> list[str]:
    from tvm.rpc import base

    base.sendjson(sock, [base.TrackerCode.SUMMARY])
    _, summary = base.recvjson(sock)
    keys = [server.get("key", "") for server in summary.get("server_info", [])]
    return [key.partition(":")[2] for key in keys if key.startswith("server:")]


def describe_device(device: RemoteDevice) -> dict[str, Any]:
    """The device's :func:`~tensorgym.target.device_description`, asked of a server of ``device.key``."""
    try:
        session = request_session(device, session_timeout=_CONNECT_TIMEOUT + _MARGIN)
    except DeviceUnavailable as exc:
        return {"error": str(exc)}
    try:
        describe = session.get_function(DEVICE_INFO)
    except (AttributeError, RuntimeError):
        return {"not_tensorgym": True, "error": f"the server of {device.address} does not describe its device "
                                                f"({DEVICE_INFO}): start it with `tensorgym rpc-server`"}
    try:
        return json.loads(describe())
    finally:
        del describe, session  # a remote handle keeps the session (and so the server) busy


def run_remote(builder: KernelBuilder, config: Config, path: str, *, device: RemoteDevice, check: bool,
               protocol: TimingProtocol, fault: str | None, session_timeout: float,
               incumbent_s: float | None = None) -> dict[str, Any]:
    """The RPC runner's entry point: upload the library at ``path``, then check and time it on the device.

    Returns what :func:`~tensorgym.measure.tasks.check_and_time` returns, or
    ``{"status": "timeout" | "runtime_error" | "infra_error", "error": ...}`` for the faults of a remote
    run: a kernel that hangs is a ``timeout``; one that ends its session while the device still serves
    (it crashed the session's process) a ``runtime_error``; a device that cannot be reached, or that
    went away during the kernel, an ``infra_error`` (the machine's fault, measured again later). The
    library is left in place: the measurer removes it once the kernel has its record.
    """
    try:
        session = request_session(device, session_timeout)
    except DeviceUnavailable as exc:
        return {"status": "infra_error", "error": f"rpc: {exc}"}
    from tvm.error import RPCSessionTimeoutError

    try:
        session.upload(path)
        module = session.load_module(Path(path).name)
        if fault is not None:
            _run_fault(session, builder.target, fault)
        # The session is a process that has timed nothing yet: it gets the protocol's process warm-up.
        return check_and_time(module, session.cpu(0), builder, config, check=check, protocol=protocol,
                              fresh_process=True, incumbent_s=incumbent_s)
    except RPCSessionTimeoutError:
        return {"status": "timeout", "error": f"rpc: the kernel did not finish within the session's "
                                              f"{session_timeout:.1f} s on {device.address}"}
    except RuntimeError as exc:
        module = session = None  # noqa: F841 - release the session before asking for another
        if _still_serving(device):
            return {"status": "runtime_error", "error": f"rpc: the kernel ended its session on {device.address} "
                                                        f"(it crashed the device's session process): "
                                                        f"{_last_line(str(exc))}"[:4000]}
        return {"status": "infra_error", "error": f"rpc: the device {device.address} went away during the kernel: "
                                                  f"{_last_line(str(exc))}"[:4000]}
    finally:
        module = session = None  # noqa: F841 - release the remote objects: the server serves one session at a time


def _still_serving(device: RemoteDevice) -> bool:
    """Whether the device still opens a session (a kernel crashed its session) or not (the device went away)."""
    try:
        session = request_session(device, 10.0)
    except DeviceUnavailable:
        return False
    del session
    return True


def _run_fault(session, target: Target, fault: str) -> None:
    """Make the device's session crash (a wild store) or hang (an endless loop), as the test hook asks."""
    import numpy as np
    import tvm

    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; use one of {FAULTS}")
    path = _fault_library(target, fault)
    session.upload(path)
    kernel = session.load_module(Path(path).name)
    dtype, size = ("float32", 16) if fault == "crash" else ("int32", 1)
    kernel["main"](tvm.runtime.tensor(np.zeros(size, dtype), session.cpu(0)))
    raise RuntimeError(f"the {fault} fault kernel returned")


@lru_cache(maxsize=4)
def _fault_library(target: Target, fault: str) -> str:
    import tvm
    from tvm.script import tirx as T

    if fault == "crash":
        @T.prim_func
        def main(A: T.Buffer((16,), "float32")):
            for i in range(16):  # one TiB past the buffer
                A[T.int64(i) * T.int64(1 << 36) + T.int64(1 << 40)] = T.float32(1)
    else:
        @T.prim_func
        def main(A: T.Buffer((1,), "int32")):
            while A[0] >= 0:  # a store per iteration: LLVM cannot drop the loop
                A[0] = (A[0] + 1) % 1000

    return compile_library(tvm.IRModule({"main": main}), target, tempfile.mkdtemp(prefix="tensorgym-fault-"))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
