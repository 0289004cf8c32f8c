"""The Runner seam: what loads, checks and times a built kernel, isolated from the caller.

The :class:`~tensorgym.measure.Measurer` builds a batch of kernels in its
builder pool (with the runner's ``build_task`` and each space's
:class:`~tensorgym.spaces.builder.KernelBuilder`), then hands each built artifact
(a shared library on this machine's disk; for the CUDA runner, a manifest of a
cubin or a CUTLASS library) to its :class:`Runner`, one at a time. A runner answers with
an :class:`~tensorgym.measure.worker.Outcome`, never an exception: ``ok`` with
the check-and-time result (``{"status": "ok", "samples": [...], "number": n}``,
or ``{"status": "wrong_result", ...}``), ``crash`` / ``timeout`` / ``error``
when its process died, did not answer in time, or the kernel raised, and
``infra`` when the machine failed (:mod:`.faults` says how a crash or a
timeout is told apart as the kernel's or the machine's).

Every runner checks and times the same way: on the device side it calls
:func:`tensorgym.measure.tasks.check_and_time` with its own TVM device and
the runner's :class:`~tensorgym.measure.TimingProtocol` (the CUDA runner, which
launches cubins through the CUDA driver rather than TVM's runtime, applies the
same check and protocol in :func:`tensorgym.measure.cuda_tasks.run_cuda`).
Runners differ only in where that happens:

* :class:`LocalRunner`: a long-lived child process on this machine (the default for CPUs);
* :class:`~tensorgym.measure.rpc.RPCRunner`: a device on another machine, through
  TVM RPC; :func:`tensorgym.measure.measurer.runner_for` picks it for a remote target;
* :class:`CudaRunner`: a long-lived child process holding a CUDA context on this
  machine's GPU (the default for CUDA targets); it checks and times with
  :func:`tensorgym.measure.cuda_tasks.run_cuda` (CUDA events, L2 flushed between samples).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from ..config import Config
from ..spaces.builder import KernelBuilder
from ..target import Target
from .paired import PairedReference
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
    # Whether :meth:`run` takes ``paired``, a reference kernel (:mod:`.paired`): runners on this machine's CPU.
    pairs: bool = False
    # The builder-pool function that makes this runner's artifacts (a shared library for LocalRunner).
    build_task = f"{_TASKS}:build"

    def __init__(self, target: Target, protocol: TimingProtocol | None = None):
        self.target = target
        self.protocol = protocol or TimingProtocol()

    @abstractmethod
    def run(self, builder: KernelBuilder, config: Config, artifact: str, *, check: bool, timeout: float,
            fault: str | None = None, incumbent_s: float | None = None,
            paired: PairedReference | None = None) -> Outcome:
        """Load ``artifact`` (the built kernel of ``config``), check it if ``check``, and time it.

        ``builder`` (the space's :class:`~tensorgym.spaces.builder.KernelBuilder`) gives the kernel's
        arguments, the runtime set-up it needs and its output in the workload's layout.

        ``incumbent_s`` is the fastest latency known for the workload, passed on to
        :func:`~tensorgym.measure.tasks.check_and_time` (a much slower kernel is timed short);
        ``paired``, a reference kernel given only to a runner that :attr:`pairs`, is timed in alternation
        with the kernel (:mod:`.paired`).
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


# The GPU protocol: every sample is one call, replayed from a CUDA graph and timed by CUDA events after an L2 flush
# (a call of a few microseconds is still far above the events' resolution), 10 to 50 of them per round, 200 at most.
GPU_TIMING = TimingProtocol(warmup_ms=20.0, process_warmup_ms=300.0, min_repeat_ms=0.0, round_ms=50.0,
                            min_samples=10, max_samples=50, target_spread=0.02, max_timing_ms=300.0,
                            max_total_samples=200)


# A TVM library stays mapped in the process that loaded it (five memory maps each, measured), and a process
# may hold vm.max_map_count of them (65,530 by default): after about 13,000 kernels loading the next one fails.
# The runner's process is replaced after this many kernels, long before; the new one is warmed up again.
KERNELS_PER_PROCESS = 2048


class LocalRunner(Runner):
    """One long-lived child process on this machine that runs every core (``TVM_NUM_THREADS``).

    A kernel that kills the process (a segfault) costs a ``crash`` outcome and a
    restart; one that outlives ``timeout`` has its process killed (``timeout``).
    The child reports when the kernel starts, so outcomes carry the phase. The
    process is replaced after :data:`KERNELS_PER_PROCESS` kernels (loaded
    libraries are never unmapped), and after a call the machine made fail, so
    that the measurer's retry runs in a fresh one.
    """

    reports_phases = True
    pairs = True

    def __init__(self, target: Target, work_dir: str | Path, protocol: TimingProtocol | None = None):
        super().__init__(target, protocol)
        # The child reports when it has started, so that its start-up (after a restart) is not
        # charged to the kernel it then runs.
        self._worker = Worker("runner", work_dir, env={"TVM_NUM_THREADS": str(target.num_cores)}, report_ready=True)
        self._loaded = 0  # kernels the current process has loaded

    def start(self) -> None:
        self._worker.start()

    def run(self, builder: KernelBuilder, config: Config, artifact: str, *, check: bool, timeout: float,
            fault: str | None = None, incumbent_s: float | None = None,
            paired: PairedReference | None = None) -> Outcome:
        if self._loaded >= KERNELS_PER_PROCESS or not self._worker.alive:
            self._worker.close()  # the next call starts a fresh process
            self._loaded = 0
        self._loaded += 1
        outcome = self._worker.call(f"{_TASKS}:run_local", builder, config, artifact, check=check,
                                    protocol=self.protocol, fault=fault, incumbent_s=incumbent_s, paired=paired,
                                    timeout=timeout)
        if outcome.kind == "infra":  # the machine failed this process: the retry gets a new one
            self._worker.close()
        return outcome

    def close(self) -> None:
        self._worker.close()

    @property
    def restarts(self) -> int:
        return self._worker.restarts


class CudaRunner(Runner):
    """One long-lived child process with a CUDA context on this machine's GPU (see :mod:`.cuda_tasks`).

    It runs nvcc-built cubins and CUTLASS libraries, checks them against NumPy and times them
    with CUDA events (default protocol :data:`GPU_TIMING`). A kernel that faults takes the
    CUDA context with it: the process is replaced (a restart) and the record is a
    ``runtime_error``. The process imports no TVM. Like the local runner, the child reports
    when it is ready and when the kernel starts, so outcomes carry the phase.
    """

    build_task = "tensorgym.measure.cuda_tasks:build"  # cubins and CUTLASS libraries, with their manifests
    reports_phases = True

    def __init__(self, target: Target, work_dir: str | Path, protocol: TimingProtocol | None = None):
        if target.kind != "cuda":
            raise ValueError(f"the CUDA runner times CUDA targets, not {target.label}")
        super().__init__(target, protocol or GPU_TIMING)
        self._worker = Worker("cuda-runner", work_dir, preload=("tensorgym.measure.cuda_tasks",), report_ready=True)
        self._lost_contexts = 0
        self._checked = False

    def start(self) -> None:
        if not self._checked:
            self._check_device()
            self._checked = True
        self._worker.start()

    def _check_device(self) -> None:
        """Refuse to time anything unless this machine has the GPU the target describes (no records then)."""
        from ..cuda.driver import GpuUnavailable, describe_gpu
        from ..target import TargetError, cuda_ordinal

        ordinal = cuda_ordinal()
        try:
            here = describe_gpu(ordinal)["name"]
        except GpuUnavailable as exc:
            raise TargetError(f"cannot time kernels for {self.target.label} here: {exc}") from None
        if here != self.target.device.name:
            raise TargetError(f"this machine's GPU {ordinal} is a {here}, not the {self.target.device.name} the "
                              f"target describes; measure with target='cuda'")

    def run(self, builder: KernelBuilder, config: Config, artifact: str, *, check: bool, timeout: float,
            fault: str | None = None, incumbent_s: float | None = None) -> Outcome:
        outcome = self._worker.call("tensorgym.measure.cuda_tasks:run_cuda", builder, config, artifact, check=check,
                                    protocol=self.protocol, fault=fault, incumbent_s=incumbent_s, timeout=timeout)
        if outcome.kind == "error" and "GpuContextLost" in outcome.error:
            self._worker.close()  # the next kernel gets a fresh process and context
            self._lost_contexts += 1
        return outcome

    def close(self) -> None:
        self._worker.close()

    @property
    def restarts(self) -> int:
        return self._worker.restarts + self._lost_contexts
