"""Measuring runs on a Ray cluster: one at a time per node, every record in the user's database.

:class:`MeasuringCluster` is the helper every command with ``--ray`` uses
(``compare`` today; ``dataset build`` and ``compare-network`` can call it the
same way)::

    with MeasuringCluster("auto", db="runs.db") as cluster:
        jobs = {cluster.submit(tune_one, workload, seed, tag=f"run {seed}"): seed for seed in range(4)}
        for job, outcome in cluster.as_completed(jobs):
            ...  # outcome.ok, outcome.value (what tune_one returned) or outcome.error

``tune_one(db, *args, **kwargs)`` is any importable function: it runs on a
node, receives a :class:`~tensorgym.database.Database` whose commits land in
``runs.db`` before they return (:class:`~.records.NodeDatabase`), measures
into it (``make_env(workload, db=db)``), and returns something picklable.

* **One measuring run per node.** Each run asks for one unit of the custom
  resource ``tensorgym_measure`` and no CPU; a node that should measure
  declares one unit (``ray start ... --resources '{"tensorgym_measure": 1}'``),
  so it runs one measuring job at a time whatever its core count, and that
  job's builders and runner have the node's cores to themselves. Give a
  machine one such node. A cluster without the resource is refused at once.
* **A fresh worker process per run** (``max_calls=1``): no thread pool,
  cost model or memory of one run leaks into the next.
* **Lost workers and nodes are retried** (``retries`` times, Ray's task
  retry): the retried run finds every record the lost attempt committed, so
  nothing is lost or measured twice. An exception *raised* by the job (a bug,
  a bad argument) is not retried: it is the outcome's error.

Ray is imported only here, when a cluster is used: ``pip install tensorgym[ray]``.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TensorgymError

log = logging.getLogger(__name__)

MEASURE_RESOURCE = "tensorgym_measure"
WRITER_PREFIX = "tensorgym-records-"
START_NODE = ("ray start --address HEAD:6379 --resources '{\"" + MEASURE_RESOURCE + "\": 1}'")


class ClusterError(TensorgymError, RuntimeError):
    """The Ray cluster cannot run measuring jobs (Ray missing, no cluster, no measuring node)."""


@dataclass(frozen=True)
class Outcome:
    """What became of one submitted job: ``value`` if ``ok``, else ``error`` (one line)."""

    ok: bool
    value: Any = None
    error: str = ""


def import_ray():
    """``ray``, or a :class:`ClusterError` that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray: pip install 'tensorgym[ray]'") from None
    return ray


def _run_job(job: Callable[..., Any], tag: str, writer, args: tuple, kwargs: dict) -> Any:
    """The task body on a node: a scratch :class:`NodeDatabase` in front of the user's, then ``job``."""
    import ray

    from .records import WRITER_TIMEOUT, NodeDatabase

    ray.get(writer.run_started.remote(tag, ray.get_runtime_context().get_node_id(), os.getpid()),
            timeout=WRITER_TIMEOUT)
    work = tempfile.mkdtemp(prefix="tensorgym-ray-")
    db = NodeDatabase(Path(work) / "records.db", writer, tag)
    try:
        return job(db, *args, **kwargs)
    finally:
        db.close()
        shutil.rmtree(work, ignore_errors=True)


class MeasuringCluster:
    """A connection to a Ray cluster for measuring jobs, and the writer of the user's database ``db``.

    Args:
        address: ``"auto"`` (the cluster started on this machine with ``ray start --head``)
            or the head's ``HOST:PORT``.
        db: the tensorgym database every record lands in (created if missing).
        retries: how many times a job whose worker or node died is run again.
    """

    def __init__(self, address: str, db: str | Path, *, retries: int = 2):
        if not address:
            raise ClusterError("give a Ray address: 'auto' or HEAD_HOST:PORT")
        self.address = address
        self.db_path = str(Path(db).expanduser().resolve())
        self.retries = retries
        self._ray = None
        self._owns_connection = False
        self._writer = None
        self._task = None
        # The writer is a named actor, so that tools connected to the same cluster can ask for its statistics.
        self.writer_name = f"{WRITER_PREFIX}{uuid.uuid4().hex[:12]}"

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> "MeasuringCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "MeasuringCluster":
        ray = self._ray = import_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if not ray.is_initialized():
            try:
                ray.init(address=self.address, _node_ip_address=_loopback_host(self.address), log_to_driver=False,
                         configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ClusterError(f"cannot connect to the Ray cluster at {self.address!r}: "
                                   f"{str(exc).strip().splitlines()[0]}") from None
            self._owns_connection = True
        try:
            slots = ray.cluster_resources().get(MEASURE_RESOURCE, 0)
            if slots < 1:
                raise ClusterError(f"the Ray cluster at {self.address!r} has no measuring node: start each "
                                   f"measuring machine's node with `{START_NODE}`")
            here = ray.get_runtime_context().get_node_id()
            writer_class = ray.remote(num_cpus=0, max_restarts=0)(_writer_class())
            self._writer = writer_class.options(
                name=self.writer_name, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
            ).remote(self.db_path)
            ray.get(self._writer.ready.remote(), timeout=120)
            self._task = ray.remote(num_cpus=0, resources={MEASURE_RESOURCE: 1}, max_calls=1,
                                    max_retries=self.retries)(_run_job)
            log.info("Ray cluster %s: %g measuring node(s); records go to %s", self.address, slots, self.db_path)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._ray is not None and self._writer is not None:
            try:
                self._ray.get(self._writer.close.remote(), timeout=60)  # every commit is durable already
                self._ray.kill(self._writer)
            except Exception:  # noqa: BLE001 - the cluster may be gone already
                pass
        self._writer = None
        if self._owns_connection and self._ray is not None:
            self._ray.shutdown()
            self._owns_connection = False

    # -- jobs ---------------------------------------------------------------------------------------
    def submit(self, job: Callable[..., Any], *args: Any, tag: str, **kwargs: Any):
        """Run ``job(db, *args, **kwargs)`` on a measuring node; returns a handle for :meth:`as_completed`.

        ``tag`` names the run (in the writer's statistics and in errors)."""
        if self._task is None:
            raise ClusterError("the cluster is not started: use `with MeasuringCluster(...) as cluster`")
        return self._task.options(name=f"tensorgym {tag}"[:200]).remote(job, tag, self._writer, args, kwargs)

    def as_completed(self, handles: Iterable[Any], timeout: float | None = None) -> Iterator[tuple[Any, Outcome]]:
        """Yield ``(handle, outcome)`` for each job as it finishes; never raises for a failed job.

        ``timeout``: seconds to wait for the next job to finish; when none does, the
        jobs left are cancelled and reported as failed."""
        ray = self._ray
        pending = list(handles)
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            if not done:
                for handle in pending:
                    ray.cancel(handle, force=True)
                    yield handle, Outcome(False, error=f"no result within {timeout:g} s; cancelled")
                return
            handle = done[0]
            try:
                yield handle, Outcome(True, ray.get(handle))
            except Exception as exc:  # noqa: BLE001 - a job's failure is its outcome
                yield handle, Outcome(False, error=_one_line(exc))

    def stats(self) -> dict[str, Any]:
        """The writer's statistics: commits, duplicates, rows, and per run tag attempts and repeats."""
        return self._ray.get(self._writer.stats.remote(), timeout=120)


def _writer_class():
    from .records import RecordWriter

    return RecordWriter


def _loopback_host(address: str) -> str | None:
    """The driver's node address for a cluster on this machine's loopback (``127.0.0.2:6379``), else None.

    Ray replaces 127.0.0.1 by the machine's network address, so local test clusters
    run on 127.0.0.2, .3, ...; a driver connecting to one must say it is on that node.
    """
    host = address.rpartition(":")[0] if ":" in address else address
    try:
        return host if ipaddress.ip_address(host).is_loopback else None
    except ValueError:
        return None


def _one_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # RayTaskError: the job's own exception
    text = str(cause if cause is not None else exc).strip()
    name = type(cause if cause is not None else exc).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    return f"{name}: {lines[-1] if lines else text}"[:2000]
