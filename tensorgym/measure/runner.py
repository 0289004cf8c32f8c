"""The Runner seam: what loads, checks and times a built kernel, isolated from the caller.

The :class:`~tensorgym.measure.Measurer` builds a batch of kernels in its
builder pool, then hands each built artifact (a shared library on this
machine's disk) to its :class:`Runner`, one at a time. A runner answers with
an :class:`~tensorgym.measure.worker.Outcome`, never an exception: ``ok`` with
the check-and-time result (``{"status": "ok", "samples": [...], "number": n}``,
or ``{"status": "wrong_result", ...}``), ``crash`` / ``timeout`` / ``error``
when its process died, did not answer in time, or the kernel raised, and
``infra`` when the machine failed (:mod:`.faults` says how a crash or a
timeout is told apart as the kernel's or the machine's).

Every runner checks and times the same way: on the device side it calls
:func:`tensorgym.measure.tasks.check_and_time` with its own TVM device and
the runner's :class:`~tensorgym.measure.TimingProtocol`. Runners differ only in
where that happens:

* :class:`LocalRunner`: a long-lived child process on this machine (the default);
* :class:`~tensorgym.measure.rpc.RPCRunner`: a device on another machine, through
  TVM RPC; :func:`tensorgym.measure.measurer.runner_for` picks it for a remote target;
* a CUDA runner plugs in here too, without touching spaces, environments or agents.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from ..config import Config
from ..spaces.base import Space
from ..target import Target
from .protocol import TimingProtocol
from .worker import Outcome, Worker

_TASKS = "tensorgym.measure.tasks"


class Runner(ABC):
    """Checks and times built kernels of one target, one at a time.

    Attributes:
        target: the device kernels run on; the records' fingerprint is its fingerprint.
        protocol: how every kernel is timed.
        reports_phases: whether :meth:`run`'s outcomes carry the phase the device side reached
            (``"kernel"`` once the kernel runs; see :mod:`.faults`). Without it, a crash or a
            timeout is blamed on the kernel, as there is no telling.
    """

    reports_phases: bool = False

    def __init__(self, target: Target, protocol: TimingProtocol | None = None):
        self.target = target
        self.protocol = protocol or TimingProtocol()

    @abstractmethod
    def run(self, space: Space, config: Config, artifact: str, *, check: bool, timeout: float,
            fault: str | None = None, incumbent_s: float | None = None) -> Outcome:
        """Load ``artifact`` (the built kernel of ``config``), check it if ``check``, and time it.

        ``incumbent_s`` is the fastest latency known for the workload, passed on to
        :func:`~tensorgym.measure.tasks.check_and_time` (a much slower kernel is timed short).
        """

    def start(self) -> None:  # noqa: B027 - a runner without set-up needs none
        """Get ready to run (start processes, open sessions); called before each batch's builds."""

    def close(self) -> None:  # noqa: B027 - a runner that holds nothing releases nothing
        """Release what the runner holds. It may be started again."""

    @property
    def restarts(self) -> int:
        """How many times the runner's process or session had to be replaced."""
        return 0

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalRunner(Runner):
    """One long-lived child process on this machine that runs every core (``TVM_NUM_THREADS``).

    A kernel that kills the process (a segfault) costs a ``crash`` outcome and a
    restart; one that outlives ``timeout`` has its process killed (``timeout``).
    The child reports when the kernel starts, so outcomes carry the phase.
    """

    reports_phases = True

    def __init__(self, target: Target, work_dir: str | Path, protocol: TimingProtocol | None = None):
        super().__init__(target, protocol)
        # The child reports when it has started, so that its start-up (after a restart) is not
        # charged to the kernel it then runs.
        self._worker = Worker("runner", work_dir, env={"TVM_NUM_THREADS": str(target.num_cores)}, report_ready=True)

    def start(self) -> None:
        self._worker.start()

    def run(self, space: Space, config: Config, artifact: str, *, check: bool, timeout: float,
            fault: str | None = None, incumbent_s: float | None = None) -> Outcome:
        return self._worker.call(f"{_TASKS}:run_local", space, config, artifact, check=check,
                                 protocol=self.protocol, fault=fault, incumbent_s=incumbent_s, timeout=timeout)

    def close(self) -> None:
        self._worker.close()

    @property
    def restarts(self) -> int:
        return self._worker.restarts
