"""Build candidates in a process pool, then check and time them one by one with a Runner.

:meth:`Measurer.measure` takes a batch of configs of one space and returns one
:class:`Record` per config, whatever happens to the kernels:

* phase 1, build: every config is compiled by the builder pool (one process
  per core); a compiler error or crash is a ``build_error``, a build that
  exceeds ``build_timeout`` a ``timeout``;
* phase 2, run: the :class:`~tensorgym.measure.runner.Runner` loads, checks
  and times the kernels one at a time while the builders sit idle, so that no
  compile competes with a timing for the cores. A kernel that kills the
  runner is a ``runtime_error``; one that exceeds its time limit is a
  ``timeout``; one whose output differs from NumPy is a ``wrong_result``.
  The runner is restarted and the batch goes on.

**Kernel faults and machine faults** (the rules are in :mod:`.faults`). The
statuses above are the kernel's and final. When the *machine* fails instead
(the runner is killed from outside or by the OOM killer, dies before it
reaches the kernel or cannot start, the build or work directory runs out of
space or fails with an I/O error), the measurement is repeated, up to
``infra_retries`` times, after a short pause; if it still fails, the record
is an ``infra_error``, which the :class:`~tensorgym.evaluator.Evaluator`
measures again next time instead of reusing. After ``STORM_LIMIT`` kernels in a
row end in ``infra_error``, the batch stops with an
:class:`~tensorgym.measure.faults.InfrastructureError` (records made so far
were already handed to ``on_record``).

**Cheaper measurements.** Given the fastest latency known for a workload
(``incumbent_s``, which the :class:`~tensorgym.evaluator.Evaluator` reads from
the database), the runner times a kernel whose first call is already several
times slower with one sample only (``Record.timing == "short"``), and stops a
kernel whose checked call alone took ten times the incumbent right there
(see "Early stop" in :mod:`.protocol`); the incumbent improves as faster
kernels of the batch are timed. That early stop, and timing one-call samples
without ``time_evaluator``'s extra call (:func:`.tasks.main_sampler`), are the
``savings``: on by default, off to measure as before.

**Built once, timed again.** With ``keep_builds``, every kernel the measurer
builds stays in its work directory until it is closed, and a config of the same
space measured again is timed without a new compile: a landscape measured in
rounds (:func:`tensorgym.landscape.measuring.measure_rounds`) compiles each
config once. TVM builds the same library from the same config, so a round only
measures the timing again, which is what rounds are for. The record of a kept
kernel carries the seconds its one build took.

The measurer sees a space only through its
:class:`~tensorgym.spaces.builder.KernelBuilder` (:meth:`Space.builder()
<tensorgym.spaces.base.Space.builder>`): that is what the builder pool and the
runner receive, with each config; the space itself gives the records their keys
(its name, workload and target).

The target decides the default runner (:func:`runner_for`): a
:class:`~tensorgym.measure.runner.LocalRunner` (a child process on this
machine) for the local CPU, a :class:`~tensorgym.measure.runner.CudaRunner`
for a CUDA target, an :class:`~tensorgym.measure.rpc.RPCRunner` for a
remote target (:func:`tensorgym.remote_target`), so that an environment made
with ``target=remote_target(...)`` measures on that device with no other
change. The runner also names the builders' task (``build_task``): a shared
library for TVM's CPU kernels, a cubin or CUTLASS library for CUDA ones.
Other runners are passed in. The measurer holds no results: persisting them
is the :class:`~tensorgym.evaluator.Evaluator`'s job.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pathlib import Path

from ..checks import integer, number
from ..config import Config
from ..errors import InvalidArgumentError, InvalidTypeError
from ..record import Record, Status, summarize_samples
from ..spaces.base import Space
from ..spaces.builder import KernelBuilder
from ..target import Target, resolve_target
from .faults import (InfrastructureError, build_crash_is_schedule_fault, crash_is_kernel_fault,
                     timeout_is_kernel_fault)
from .paired import PairedReference
from .protocol import TimingProtocol
from .rpc import RPCRunner
from .runner import CudaRunner, LocalRunner, Runner
from .tasks import BUILD_FAULTS, FAULTS, RUN_FAULTS
from .worker import Outcome, Worker, run_all

log = logging.getLogger(__name__)

INFRA_RETRY_DELAY_S = 0.5  # pause before retry k: k times this (a killed runner's memory is freed meanwhile)
STORM_LIMIT = 3  # kernels in a row ending in infra_error after which a batch stops


def runner_for(target: Target, work_dir: str, protocol: TimingProtocol | None = None) -> Runner:
    """The runner a target is measured with: on this machine (its CPU, or its GPU for a CUDA target), or
    through TVM RPC for a remote target."""
    if target.remote is not None:
        return RPCRunner(target, work_dir, protocol)
    if target.kind == "cuda":
        return CudaRunner(target, work_dir, protocol)
    return LocalRunner(target, work_dir, protocol)


class Measurer:
    """Compiles and times kernels for one target. Use as a context manager or call :meth:`close`.

    Args:
        target: where kernels run (default: the local CPU; a given ``runner``'s target otherwise).
        runner: checks and times the built kernels (default: :func:`runner_for` the target:
            a :class:`~tensorgym.measure.runner.LocalRunner` on this machine, a
            :class:`~tensorgym.measure.runner.CudaRunner` for a CUDA target, or an RPC runner
            for a remote target).
        builders: build processes (default: one per core of this machine).
        protocol: the timing protocol of the default runner (a given runner has its own).
        build_timeout: seconds allowed to build one kernel (default: 30, MetaSchedule's; 600 for
            a CUDA target, where a CUTLASS kernel takes nvcc up to a minute). A few tiles configs
            (unroll 512 over a large register tile) take LLVM minutes to compile and are not fast
            when they are built.
        run_timeout: seconds allowed to check and time one kernel, counted from the moment
            it starts (a runner's start-up and loading the library have their own allowance
            of the same length); ``None`` scales with the workload: 10 s + 25 s per GFLOP.
        infra_retries: how many times a measurement the machine made fail is repeated before
            it is recorded as ``infra_error``.
        savings: stop timing a kernel whose checked call took ``protocol.stop_factor`` times the
            incumbent (a ``short`` record; only adaptive measurements have an incumbent), and time
            one-call samples around the call (``protocol.direct_calls``). False measures as before
            (the protocol, a given runner's included, is changed to say so).
        paired: a config of the spaces this measurer times, the *reference*: every kernel is then timed
            in alternation with it, and its samples are its ratio to the reference times the reference's
            latency at the start (:mod:`.paired`; about twice the timing time). For ranking near-peak
            kernels on a noisy machine. One space per measurer; runners on this machine's CPU only.
        keep_builds: keep every built kernel until :meth:`close` and time it again without building when
            the same config of the same space object is measured again (a landscape's rounds). The work
            directory then holds every kernel built (a CPU kernel's library: tens of kB).
        faults: test hook, ``{config: fault}`` with a fault of
            :data:`tensorgym.measure.tasks.FAULTS` (``"crash"``, ``"hang"``: the runner's process,
            the local child or the remote device's session, crashes or hangs instead of running the
            kernel; ``"kill"``: the runner is killed from outside; ``"nospace"``: the build finds the
            disk full), or ``"<fault>-once"``: on the first attempt only.
    """

    def __init__(self, target: Target | str | None = None, *, runner: Runner | None = None,
                 builders: int | None = None, protocol: TimingProtocol | None = None,
                 build_timeout: float | None = None,
                 run_timeout: float | None = None, infra_retries: int = 2, savings: bool = True,
                 paired: Config | None = None, keep_builds: bool = False,
                 faults: Mapping[Config, str] | None = None):
        if runner is not None and not isinstance(runner, Runner):
            raise InvalidTypeError(f"runner must be a tensorgym Runner, got {type(runner).__name__}")
        if protocol is not None and not isinstance(protocol, TimingProtocol):
            raise InvalidTypeError(f"protocol must be a TimingProtocol, got {type(protocol).__name__}")
        if runner is not None and protocol is not None:
            raise InvalidArgumentError("pass the protocol to the runner, not to the Measurer, when you give a runner")
        if not isinstance(savings, bool):
            raise InvalidTypeError(f"savings must be True or False, got {type(savings).__name__}")
        if not isinstance(keep_builds, bool):
            raise InvalidTypeError(f"keep_builds must be True or False, got {type(keep_builds).__name__}")
        if paired is not None and not isinstance(paired, Config):
            raise InvalidTypeError(f"paired must be a Config (the reference kernel's) or None, "
                                   f"got {type(paired).__name__}")
        build_timeout = None if build_timeout is None else number("build_timeout", build_timeout, positive=True)
        run_timeout = None if run_timeout is None else number("run_timeout", run_timeout, positive=True)
        self.infra_retries = integer("infra_retries", infra_retries, minimum=0)
        builders = None if builders is None else integer("builders", builders, minimum=1)
        self.target = runner.target if runner is not None and target is None else resolve_target(target)
        if runner is not None and runner.target.fingerprint != self.target.fingerprint:
            raise InvalidArgumentError(f"the runner times on {runner.target.label}, not on {self.target.label}")
        self.build_timeout = build_timeout if build_timeout is not None else (
            600.0 if self.target.kind == "cuda" else 30.0)
        self.run_timeout = run_timeout
        self.faults = dict(faults or {})
        for mode in self.faults.values():
            if not isinstance(mode, str) or mode.removesuffix("-once") not in FAULTS:
                raise InvalidArgumentError(f"unknown fault {mode!r}; use one of {FAULTS}, or one of them + '-once'")
        self._workdir = tempfile.mkdtemp(prefix="tensorgym-")
        n_builders = builders or resolve_target(None).num_cores
        # One thread per builder: parallelism comes from the processes. Builders import TVM up front
        # (their imports overlap); a CUDA machine without TVM can still build CUTLASS kernels.
        preload = ("tvm",) if importlib.util.find_spec("tvm") is not None else ()
        self._builders = [Worker(f"builder{i}", self._workdir, env={"TVM_NUM_THREADS": "1"}, preload=preload)
                          for i in range(n_builders)]
        self.runner = runner if runner is not None else runner_for(self.target, self._workdir, protocol)
        if not savings:
            self.runner.protocol = replace(self.runner.protocol, stop_factor=0.0, direct_calls=False)
        if paired is not None and not self.runner.pairs:
            raise InvalidArgumentError(f"paired timing runs on this machine's CPU; {type(self.runner).__name__} "
                                       f"cannot time two kernels in alternation")
        self.paired = paired
        self._reference: tuple[str, PairedReference] | None = None  # (space key, reference) once timed
        self.keep_builds = keep_builds
        # (id(space), config) -> (space, its build); the space is held so that its id is not reused.
        self._kept: dict[tuple[int, Config], tuple[Space, Outcome]] = {}
        self.kernels_built = 0
        self.kernels_run = 0

    @property
    def protocol(self) -> TimingProtocol:
        return self.runner.protocol

    # -- lifecycle -----------------------------------------------------------
    def __enter__(self) -> "Measurer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._reference = None
        self._kept.clear()
        for worker in self._builders:
            worker.close()
        self.runner.close()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    @property
    def runner_restarts(self) -> int:
        return self.runner.restarts

    # -- measuring -------------------------------------------------------------
    def measure(self, space: Space, configs: Sequence[Config], *, check: bool = True,
                on_record: Callable[[Record], None] | None = None, adaptive: bool = False,
                incumbent_s: float | None = None) -> list[Record]:
        """Build, check (if ``check``) and time ``configs``; one record each, in order.

        ``on_record`` is called with each record as soon as it exists (to persist it). With
        ``adaptive``, a kernel whose first call is several times slower than the fastest one known is
        timed short: ``incumbent_s`` is the fastest latency known for the workload beforehand (None: none
        yet), and it improves as the batch's kernels are timed. Without it every kernel is timed in full.
        """
        incumbents = ({space.workload.key: incumbent_s} if incumbent_s else {}) if adaptive else None
        return self.measure_pairs([(space, c) for c in configs], check=check, on_record=on_record,
                                  incumbents=incumbents)

    def measure_pairs(self, kernels: Sequence[tuple[Space, Config]], *, check: bool = True,
                      on_record: Callable[[Record], None] | None = None,
                      incumbents: Mapping[str, float] | None = None) -> list[Record]:
        """:meth:`measure` for ``(space, config)`` pairs of possibly different spaces, built together.

        ``incumbents``: the fastest latency known per workload key (may be empty), for adaptive timing
        (see :meth:`measure`); None times every kernel in full.
        """
        for space, config in kernels:
            if not isinstance(space, Space) or not isinstance(config, Config):
                raise InvalidTypeError(f"the measurer takes (Space, Config) pairs, got ({type(space).__name__}, "
                                       f"{type(config).__name__})")
            if space.target.fingerprint != self.target.fingerprint:
                raise InvalidArgumentError(f"space is for target {space.target.label}, this measurer for "
                                           f"{self.target.label}")
        if not kernels:
            return []
        # What the workers receive: each space's kernel builder (one per space: a batch's configs share it).
        made: dict[int, KernelBuilder] = {}
        for space, _ in kernels:
            if id(space) not in made:
                made[id(space)] = space.builder()
        kernel_builders = [made[id(space)] for space, _ in kernels]
        for worker in self._builders:
            _start_quietly(worker)  # start all together: their imports overlap
        _start_quietly(self.runner)
        reference = self._paired_reference(kernels[0][0], kernel_builders[0], made) if self.paired else None
        t0 = time.monotonic()
        builds: list[Outcome | None] = [self._kept_build(space, c) for space, c in kernels]
        missing = [i for i, built in enumerate(builds) if built is None]
        fresh = run_all(self._builders, [(self.runner.build_task, (kernel_builders[i], kernels[i][1], self._workdir),
                                          {"fault": self._fault(kernels[i][1], 0, BUILD_FAULTS)}) for i in missing],
                        timeout=self.build_timeout) if missing else []
        for i, built in zip(missing, fresh):
            builds[i] = built
        build_share = (time.monotonic() - t0) / len(kernels)
        self.kernels_built += len(missing)
        best = dict(incumbents or {})
        records: list[Record] = []
        in_a_row = 0  # kernels in a row that ended in infra_error
        try:
            for index, ((space, config), built) in enumerate(zip(kernels, builds)):
                key = space.workload.key
                record, builds[index] = self._measure_one(space, kernel_builders[index], config, built, check,
                                                          build_share, best.get(key), reference)
                trusted = record.ok and not record.short and not record.busy
                if incumbents is not None and trusted and record.latency_s < best.get(key, float("inf")):
                    best[key] = record.latency_s
                if self.keep_builds and builds[index].ok:
                    self._kept[(id(space), config)] = (space, builds[index])
                records.append(record)
                if on_record is not None:
                    on_record(record)
                in_a_row = in_a_row + 1 if record.status is Status.INFRA_ERROR else 0
                if in_a_row >= STORM_LIMIT and index + 1 < len(kernels):
                    raise InfrastructureError(
                        f"{in_a_row} kernels in a row could not be measured because of the machine, not the kernels "
                        f"(last: {_gist(record.error)}); stopped with {len(kernels) - index - 1} kernels of the batch "
                        f"left. Every record made so far is kept: fix the machine and run again to resume")
        finally:
            for (space, config), built in zip(kernels, builds):  # built and not run (the batch stopped), or done
                if built is not None and built.ok and self._kept_build(space, config) is not built:
                    Path(built.value["path"]).unlink(missing_ok=True)
        return records

    def _kept_build(self, space: Space, config: Config) -> Outcome | None:
        """The kept build of ``config`` of ``space`` (see ``keep_builds``), if there is one."""
        kept = self._kept.get((id(space), config))
        return kept[1] if kept is not None and kept[0] is space else None

    def _fault(self, config: Config, attempt: int, kinds: tuple[str, ...]) -> str | None:
        """The test fault of ``config`` on attempt ``attempt`` (0: the first), if it is one of ``kinds``."""
        mode = self.faults.get(config)
        if mode is None:
            return None
        if mode.endswith("-once"):
            mode = mode.removesuffix("-once") if attempt == 0 else None
        return mode if mode in kinds else None

    def _run_timeout(self, space: Space) -> float:
        """Seconds allowed to check and time one kernel of ``space`` (see ``run_timeout``)."""
        return self.run_timeout if self.run_timeout is not None else 10.0 + 25.0 * space.workload.gflop

    def _paired_reference(self, space: Space, builder: KernelBuilder,
                          made: Mapping[int, KernelBuilder]) -> PairedReference:
        """The session's reference kernel of ``space``: built and timed (normal protocol) the first time."""
        if len(made) > 1:
            raise InvalidArgumentError("a paired measurer times one space: its reference is a config of that space")
        key = f"{space.name}/{space.workload.key}"
        if self._reference is not None:
            if self._reference[0] != key:
                raise InvalidArgumentError(f"this paired measurer's reference is of {self._reference[0]}, not {key}")
            return self._reference[1]
        config = self.paired
        if not space.is_valid(config):
            raise InvalidArgumentError(f"the paired reference {config.key} is not a config of {key}")
        built = self._builders[0].call(self.runner.build_task, builder, config, self._workdir,
                                       timeout=self.build_timeout)
        if not built.ok:
            raise InvalidArgumentError(f"the paired reference {config.key} does not build: {_gist(built.error)}")
        ran = self.runner.run(builder, config, built.value["path"], check=True, timeout=self._run_timeout(space))
        if not ran.ok or ran.value.get("status") != "ok":
            error = ran.error if not ran.ok else ran.value.get("error", ran.value.get("status"))
            raise InvalidArgumentError(f"the paired reference {config.key} does not run correctly: {_gist(error)}")
        median, _ = summarize_samples(ran.value["samples"])
        reference = PairedReference(config, built.value["path"], median)
        self._reference = (key, reference)
        log.info("paired timing: reference %s of %s at %.4g ms", config.key, space.workload.label, median * 1e3)
        return reference

    def _measure_one(self, space: Space, builder: KernelBuilder, config: Config, built: Outcome, check: bool,
                     build_share: float, incumbent_s: float | None = None,
                     reference: PairedReference | None = None) -> tuple[Record, Outcome]:
        """The record of one built kernel, repeating what the machine made fail (see the module docs).
        Also returns the build outcome finally used (its artifact is the caller's to remove)."""
        t0 = time.monotonic()
        attempt = 0
        while True:
            record, machine_failed_in = self._attempt(space, builder, config, built, check, build_share, attempt,
                                                      incumbent_s, reference)
            if machine_failed_in is None or attempt >= self.infra_retries:
                break
            attempt += 1
            log.warning("%s of %s: the machine failed (%s); trying again (%d of %d)", config.key,
                        space.workload.label, record.error.splitlines()[0][:300], attempt, self.infra_retries)
            time.sleep(INFRA_RETRY_DELAY_S * attempt)
            if machine_failed_in == "build":
                if built.ok:
                    Path(built.value["path"]).unlink(missing_ok=True)
                built = self._builders[0].call(self.runner.build_task, builder, config, self._workdir,
                                               fault=self._fault(config, attempt, BUILD_FAULTS),
                                               timeout=self.build_timeout)
        if attempt:
            # The retries cost wall time too: the tuning clock charges it.
            record = replace(record, wall_s=build_share + (time.monotonic() - t0))
        return record, built

    def _attempt(self, space: Space, builder: KernelBuilder, config: Config, built: Outcome, check: bool,
                 build_share: float, attempt: int, incumbent_s: float | None = None,
                 reference: PairedReference | None = None) -> tuple[Record, str | None]:
        """One try: the record, and where the machine failed (``"build"``, ``"run"``) or None."""
        build_s = built.value["seconds"] if built.ok else built.seconds
        base = dict(workload=space.workload.key, target=self.target.fingerprint, space=space.name, config=config,
                    build_s=build_s, wall_s=build_share, created=time.time())
        if not built.ok:
            if built.kind == "timeout":
                return Record(status=Status.TIMEOUT, error=f"build: {built.error}", **base), None
            if built.kind == "infra" or (built.kind == "crash" and not build_crash_is_schedule_fault(built.signal)):
                return Record(status=Status.INFRA_ERROR, error=f"build (machine): {built.error}"[:4000],
                              **base), "build"
            return Record(status=Status.BUILD_ERROR, error=f"build: {built.error}"[:4000], **base), None
        timeout = self._run_timeout(space)
        paired = {"paired": reference} if reference is not None else {}
        ran = self.runner.run(builder, config, built.value["path"], check=check, timeout=timeout,
                              fault=self._fault(config, attempt, RUN_FAULTS), incumbent_s=incumbent_s, **paired)
        self.kernels_run += 1
        base["run_s"] = ran.seconds
        base["wall_s"] += ran.seconds
        phases = self.runner.reports_phases
        if ran.kind == "timeout" and timeout_is_kernel_fault(ran.phase, phases):
            return Record(status=Status.TIMEOUT, error=f"run: {ran.error}", **base), None
        if ran.kind in ("infra", "timeout") or (
                ran.kind == "crash" and not crash_is_kernel_fault(ran.signal, ran.phase, phases)):
            where = "before the kernel ran" if phases and ran.phase != "kernel" else "machine"
            return Record(status=Status.INFRA_ERROR, error=f"run ({where}): {ran.error}"[:4000], **base), "run"
        if not ran.ok:
            return Record(status=Status.RUNTIME_ERROR, error=f"run: {ran.error}"[:4000], **base), None
        result = ran.value
        if result["status"] == Status.INFRA_ERROR.value:  # a remote runner could not reach its device
            return Record(status=Status.INFRA_ERROR, error=result.get("error", "")[:4000], **base), "run"
        if result["status"] != "ok":
            return Record(status=Status(result["status"]), error=result.get("error", ""), **base), None
        median, cv = summarize_samples(result["samples"])
        device_state = dict(result.get("device_state", {}))
        if "reference_s" in device_state:  # a paired timing: its ratio is what compares between sessions
            device_state["paired_ratio"] = median / device_state["reference_s"]
        state = tuple(sorted((str(k), float(v)) for k, v in device_state.items()))
        return Record(status=Status.OK, latency_s=median, latency_cv=cv, samples=tuple(result["samples"]),
                      number=result["number"], gflops=space.workload.gflops(median),
                      timing=result.get("timing", "full"), contention=result.get("contention"),
                      dropped=result.get("dropped", 0), device_state=state, **base), None


def _gist(error: str, limit: int = 300) -> str:
    """The first and the last line of an error (a crash report's log tail ends with its cause)."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    gist = lines[0][:limit] if len(lines) == 1 else f"{lines[0][:limit]} ... {lines[-1][:limit]}"
    return gist


def _start_quietly(process) -> None:
    """Start a worker or runner; if it cannot start now, its first call reports that (``infra``)."""
    try:
        process.start()
    except OSError as exc:
        log.warning("could not start %s: %s", getattr(process, "name", type(process).__name__), exc)
