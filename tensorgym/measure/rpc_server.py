"""The device server behind ``tensorgym rpc-server``: TVM's RPC server, describing its device, cleaning up after itself.

It runs TVM 0.27's own listen loop (``tvm.rpc.server``) in this process, with
three changes that a measuring service needs:

* **It describes its device.** ``tensorgym.device_info`` is registered before
  the first session, and sessions are forked from this process, so every
  session answers it: clients key their records by the fingerprint read here
  (:func:`~tensorgym.target.device_description`), not by their own machine.
  (A function registered in the process that creates a ``tvm.rpc.Server``
  object is *not* seen by its sessions: those fork from a separate popen worker.)
* **A crashing kernel does not stop the server.** TVM's ``_serving`` raises
  when a session's process dies (a kernel that segfaults), and that exception
  ends the listen thread: the server stays registered at the tracker but never
  serves again. Here the session is logged as lost and the loop goes on.
* **Stopping it stops everything it started.** SIGTERM, SIGINT and SIGHUP kill
  every descendant (the session processes) before the server exits;
  ``python -m tvm.exec.rpc_server`` orphans its popen worker, which keeps
  listening. Session processes get the default signal handlers back, so the
  SIGTERM with which TVM ends a session past its time limit still kills a
  session stuck in a kernel (a Python handler would wait for the kernel).

The session processes run kernels with every core of the machine
(``TVM_NUM_THREADS``), as the local runner does.

**Trust.** TVM RPC has no authentication and no encryption: whoever can reach
the server's port can upload a library and run it, that is run any code on
this machine as the server's user. So by default the server listens only on
the interface this machine reaches the tracker through (:func:`default_host`:
loopback for a tracker on this machine, the private LAN address for a tracker
on the LAN), the address the tracker gives clients anyway; and it warns, in
one line, when it listens on a public address or on every interface of a
machine that has a public one (:func:`exposure_warning`). Run it on a trusted
network only, or firewall its ports to the clients.

``tvm.rpc.server.PopenRPCServerState`` and ``_serving`` are TVM internals; tensorgym
pins TVM 0.27, and the tests run this server end to end.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Callable

from ..errors import TensorgymError
from ..target import device_description, local_cpu

log = logging.getLogger(__name__)

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def register_device_functions() -> None:
    """Register ``tensorgym.device_info`` (this machine's description, JSON) in this process."""
    import tvm

    description = json.dumps(device_description())
    tvm.register_global_func("tensorgym.device_info", lambda: description, override=True)


def keep_serving_after_lost_sessions() -> None:
    """Patch ``tvm.rpc.server._serving`` so that a session process that dies does not end the listen loop."""
    import tvm.rpc.server as server

    if getattr(server._serving, "tensorgym_safe", False):
        return
    serving = server._serving

    def safe_serving(sock, addr, opts, load_library):
        cwd = os.getcwd()
        try:
            serving(sock, addr, opts, load_library)
        except RuntimeError as exc:  # "Child process N exited unsuccessfully": the client got kShutdown
            log.warning("session from %s was lost (%s); still serving", addr, exc)
            try:
                sock.close()
            except OSError:
                pass
            os.chdir(cwd)

    safe_serving.tensorgym_safe = True
    server._serving = safe_serving


def kill_descendants(grace: float = 2.0) -> None:
    """SIGTERM every descendant of this process, then SIGKILL those alive after ``grace`` seconds."""
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for child in children:
        try:
            child.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(children, timeout=grace)
    for child in alive:
        try:
            child.kill()
        except psutil.Error:
            pass


def _install_cleanup() -> None:
    def stop(signum, _frame):
        log.info("signal %d: stopping the device server and its sessions", signum)
        kill_descendants()
        os._exit(128 + signum)

    for sig in _STOP_SIGNALS:
        signal.signal(sig, stop)

    def default_handlers_in_child() -> None:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)

    os.register_at_fork(after_in_child=default_handlers_in_child)


def default_host(tracker: tuple[str, int]) -> str:
    """The local address this machine reaches ``tracker`` from: where the server listens by default.

    A UDP socket ``connect()``-ed to the tracker (which sends nothing) gets the address the
    routing table picks for it (``getsockname``): ``127.0.0.1`` for a tracker on this machine,
    the LAN address for one on the LAN. The tracker tells clients this same address.
    """
    host, port = tracker
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise TensorgymError(f"cannot resolve the tracker's host {host!r}: {exc.strerror}") from None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)  # IPv4 first, as TVM's tracker is usually reached
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(address)
        except OSError as exc:
            raise TensorgymError(f"no route to the tracker {host}:{port} ({exc.strerror or exc}); name the "
                                 f"address to listen on with --host") from None
        return probe.getsockname()[0]


def _public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return not (address.is_private or address.is_loopback or address.is_link_local or address.is_unspecified)


def _interface_addresses() -> list[str]:
    import psutil

    return [a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family in (socket.AF_INET, socket.AF_INET6)]


def exposure_warning(host: str, interfaces: list[str] | None = None) -> str | None:
    """One line of warning when listening on ``host`` exposes the server beyond private networks, else None.

    A public address (neither private nor loopback, per :mod:`ipaddress`) is exposed; so is an
    unspecified one (``0.0.0.0``, ``::``: every interface) on a machine with a public address
    among its ``interfaces`` (default: this machine's). A host name is resolved first.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            address = ipaddress.ip_address(socket.gethostbyname(host))
        except (OSError, ValueError):
            return None  # listening on it will fail with its own error
    risk = ("TVM RPC has no authentication: anyone who reaches the port can run any code on this machine as "
            "this user; listen on a private or loopback address (--host) or firewall the port")
    if address.is_unspecified:
        public = []
        for name in _interface_addresses() if interfaces is None else interfaces:
            try:
                if _public(ipaddress.ip_address(name)):
                    public.append(name)
            except ValueError:
                continue
        if public:
            return f"the device server listens on every interface ({host}), public {', '.join(public)} included: " \
                   + risk
        return None
    if _public(address):
        return f"the device server listens on {host}, a public address: " + risk
    return None


def warn_if_exposed(host: str) -> None:
    """Log :func:`exposure_warning`'s line, if any."""
    text = exposure_warning(host)
    if text:
        log.warning(text)


def _wait_for_tracker(tracker: tuple[str, int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(tracker, timeout=5).close()
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise TensorgymError(f"no RPC tracker answers at {tracker[0]}:{tracker[1]} ({exc}); start one "
                                     f"with `python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port {tracker[1]}`"
                                     ) from None
            time.sleep(0.5)


def serve(tracker: tuple[str, int], key: str, *, host: str | None = None, port: int = 9090, port_end: int = 9199,
          custom_addr: str | None = None, on_ready: Callable[[int], None] | None = None,
          tracker_timeout: float = 30.0) -> int:
    """Serve this machine's CPU under ``key`` at ``tracker`` until a signal stops it; returns an exit code.

    ``host`` is the address to listen on (default: :func:`default_host`, the interface that
    reaches the tracker; see the module docs on trust: a public one is warned about).
    ``port`` .. ``port_end`` is the range the server may listen on (the first free
    one is taken); ``custom_addr`` is the address the tracker gives clients (default:
    the address the server reaches the tracker from). ``on_ready(port)`` is called
    once the server listens. A tracker that does not answer within ``tracker_timeout``
    seconds is an error.
    """
    _wait_for_tracker(tracker, tracker_timeout)
    if host is None:
        host = default_host(tracker)
    warn_if_exposed(host)
    _install_cleanup()
    os.environ["TVM_NUM_THREADS"] = str(local_cpu().num_cores)  # before TVM starts a thread pool
    import tvm  # noqa: F401 - loaded once here: forked sessions start with it
    from tvm.rpc.server import PopenRPCServerState

    register_device_functions()
    keep_serving_after_lost_sessions()
    state = PopenRPCServerState(host, port, port_end, False, tracker, key, None, custom_addr, True)
    if on_ready is not None:
        on_ready(state.port)
    while state.thread.is_alive():
        state.thread.join(1.0)  # in slices, so that signal handlers run
    log.error("the RPC listen loop ended; exiting so that a supervisor can restart the server")
    kill_descendants()
    return 1

