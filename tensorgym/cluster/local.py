"""A Ray cluster of several nodes on this machine's loopback, for trying ``--ray``, tests and benchmarks.

    with LocalRayCluster(nodes=2) as cluster:
        compare(..., ray=cluster.address)

Each node is one ``ray start --block`` in its own process group, on
``127.0.0.2``, ``127.0.0.3``, ... (Ray replaces ``127.0.0.1`` by the machine's
network address), with its own ports, its own short temporary directory (Unix
socket paths are limited to 107 bytes) and one ``tensorgym_measure`` slot.
Stopping a node kills its group, so every process it started goes with it;
``ray stop`` is never used (it stops *every* Ray process of the user).

Authentication is explicit: every node and this process get ``RAY_AUTH_MODE``
and a private ``RAY_AUTH_TOKEN_PATH``. (Ray 2.60's ``ray start --head`` turns
token authentication on by itself when ``~/.ray/auth_token`` exists, which a
plain ``ray.init()`` creates, while ``ray start --address`` does not: worker
nodes are then refused.) Node-failure detection is shortened to about 2 s.

All nodes share this machine's cores, so timings on them are not
independent: the cluster shows that runs are spread, resumed and recorded
correctly, not how fast a real cluster is.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .runs import MEASURE_RESOURCE, import_ray


_AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN")
# A worker node that exits while the cluster starts is started again, on new ports, this many times: its ports are
# picked free before `ray start` binds them, and once in a while another process takes one in between.
NODE_RESTARTS = 2
LOG_TAIL_LINES = 15  # of a node's log, quoted in the error when it cannot be started (the log goes with the cluster)


def _reload_ray_auth() -> None:
    """Ray caches its configuration and token when first used: make it read the environment again."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _descendants(root: int) -> set[int]:
    """``root`` and every live process whose parent chain reaches it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def processes_mentioning(text: str) -> list[int]:
    """Pids of the processes whose command line contains ``text`` (this one excepted)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in command:
                pids.append(int(entry.name))
    return pids


class LocalRayCluster:
    """``nodes`` Ray nodes on 127.0.0.2, 127.0.0.3, ..., each with one measuring slot and ``cpus_per_node`` CPUs."""

    def __init__(self, nodes: int = 2, *, cpus_per_node: int = 1, start_timeout: float = 120.0,
                 env: dict[str, str] | None = None):
        if nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {nodes}")
        self.n_nodes = nodes
        self.cpus_per_node = cpus_per_node
        self.start_timeout = start_timeout
        self.env = dict(env or {})
        self.root = Path(tempfile.mkdtemp(prefix="tgray", dir="/tmp"))  # short: socket paths < 107 bytes
        self.gcs_port = 0
        self.nodes: list[subprocess.Popen] = []
        self._family: set[int] = set()
        self._saved_env: dict[str, str | None] | None = None

    @staticmethod
    def ip(index: int) -> str:
        return f"127.0.0.{index + 2}"

    @property
    def address(self) -> str:
        """The head's ``HOST:PORT``, for ``ray.init`` and ``--ray``."""
        return f"{self.ip(0)}:{self.gcs_port}"

    def auth_env(self) -> dict[str, str]:
        token = self.root / "auth_token"
        if not token.exists():
            token.write_text(secrets.token_hex(32))
            token.chmod(0o600)
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}

    def use_from_this_process(self) -> None:
        """Make this process (a driver) authenticate to this cluster (undone by :meth:`stop`)."""
        if self._saved_env is None:
            self._saved_env = {name: os.environ.get(name) for name in _AUTH_VARIABLES}
        os.environ.pop("RAY_AUTH_TOKEN", None)
        os.environ.update(self.auth_env())
        _reload_ray_auth()

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> "LocalRayCluster":
        import_ray()
        self.gcs_port = _free_port()
        try:
            self.nodes.append(self._start_node(0))
            self._wait(lambda: self._gcs_listening(), "the head node")
            for index in range(1, self.n_nodes):
                self.nodes.append(self._start_node(index))
            self._wait(lambda: self._alive_nodes() >= self.n_nodes, f"{self.n_nodes} nodes", restarts=NODE_RESTARTS)
            self.use_from_this_process()
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> "LocalRayCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self, grace: float = 3.0) -> None:
        """Stop every node (workers first, the head last); nothing started here is left running."""
        for node in self.nodes:
            self._family |= _descendants(node.pid)
        for node in reversed(self.nodes):
            try:
                os.killpg(node.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        for node in self.nodes:
            try:
                node.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(node.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            node.wait()
        # Ray workers may have left their node's group; idle ones exit by themselves shortly.
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(_alive(p) for p in self._family):
            time.sleep(0.1)
        for pid in {p for p in self._family if _alive(p)} | set(processes_mentioning(str(self.root))):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.nodes = []
        shutil.rmtree(self.root, ignore_errors=True)
        if self._saved_env is not None:  # this process's Ray settings as they were before
            for name, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self._saved_env = None
            _reload_ray_auth()

    # -- helpers -----------------------------------------------------------------------------------
    def _start_node(self, index: int) -> subprocess.Popen:
        ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray") or "ray"
        temp = self.root / f"n{index}"
        temp.mkdir(parents=True, exist_ok=True)
        args = [ray_bin, "start", "--block", "--node-ip-address", self.ip(index),
                "--num-cpus", str(self.cpus_per_node), "--num-gpus", "0",
                "--resources", json.dumps({MEASURE_RESOURCE: 1}), "--temp-dir", str(temp),
                "--object-store-memory", str(100 * 1024 * 1024),  # Ray's default is 30 % of the memory
                "--dashboard-agent-listen-port", str(_free_port()), "--dashboard-agent-grpc-port", str(_free_port()),
                "--metrics-export-port", str(_free_port()), "--runtime-env-agent-port", str(_free_port()),
                "--node-manager-port", str(_free_port()), "--object-manager-port", str(_free_port()),
                "--min-worker-port", "0", "--max-worker-port", "0", "--disable-usage-stats", "--log-style", "record"]
        args += (["--head", "--port", str(self.gcs_port), "--include-dashboard", "false"] if index == 0
                 else ["--address", self.address])
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
               "RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3",
               **self.auth_env(), **self.env}
        with open(self.root / f"node{index}.log", "ab") as log:
            return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)

    def _log_tail(self, index: int) -> str:
        try:
            lines = (self.root / f"node{index}.log").read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-LOG_TAIL_LINES:])

    def _gcs_listening(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            return sock.connect_ex((self.ip(0), self.gcs_port)) == 0

    def _alive_nodes(self) -> int:
        from ray._private.state import GlobalState  # Ray 2.60's GCS client, without a driver
        from ray._raylet import GcsClientOptions

        self.use_from_this_process()
        state = GlobalState()
        try:
            state._initialize_global_state(GcsClientOptions.create(self.address, None, True, False))
            return sum(1 for node in state.node_table() if node["Alive"])
        except Exception:  # noqa: BLE001 - the GCS is not ready yet
            return 0
        finally:
            state.disconnect()

    def _wait(self, ready, what: str, restarts: int = 0) -> None:
        """Until ``ready()``; a worker node that exits meanwhile is started again up to ``restarts`` times."""
        deadline = time.monotonic() + self.start_timeout
        while not ready():
            for index, node in enumerate(self.nodes):
                if node.poll() is None:
                    continue
                if index > 0 and restarts > 0:
                    restarts -= 1
                    try:  # whatever the failed `ray start` left in its group
                        os.killpg(node.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    self.nodes[index] = self._start_node(index)
                    continue
                raise RuntimeError(f"ray node {index} exited with code {node.returncode}; its log ends:\n"
                                   + self._log_tail(index))
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not up after {self.start_timeout:g} s; see {self.root}")
            time.sleep(0.2)
