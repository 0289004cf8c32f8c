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

The default runner is a :class:`~tensorgym.measure.runner.LocalRunner`
(a child process on this machine) for a CPU target and a
:class:`~tensorgym.measure.runner.CudaRunner` for a CUDA one; other runners
(remote devices) are passed in. The measurer holds no results: persisting them is the
:class:`~tensorgym.evaluator.Evaluator`'s job.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence

from ..config import Config
from ..record import Record, Status, summarize_samples
from ..spaces.base import Space
from ..target import Target, resolve_target
from .protocol import TimingProtocol
from .runner import Runner, default_runner
from .tasks import FAULTS
from .worker import Outcome, Worker, run_all

log = logging.getLogger(__name__)


class Measurer:
    """Compiles and times kernels for one target. Use as a context manager or call :meth:`close`.

    Args:
        target: where kernels run (default: the local CPU; a given ``runner``'s target otherwise).
        runner: checks and times the built kernels (default: a
            :class:`~tensorgym.measure.runner.LocalRunner` on this machine, a
            :class:`~tensorgym.measure.runner.CudaRunner` for a CUDA target).
        builders: build processes (default: one per core of this machine).
        protocol: the timing protocol of the default runner (a given runner has its own).
        build_timeout: seconds allowed to build one kernel (default: 30, MetaSchedule's; 600 for
            a CUDA target, where a CUTLASS kernel takes nvcc up to a minute). A few tiles configs
            (unroll 512 over a large register tile) take LLVM minutes to compile and are not fast
            when they are built.
        run_timeout: seconds allowed to check and time one kernel; ``None`` scales
            with the workload: 10 s + 25 s per GFLOP.
        faults: test hook, ``{config: "crash" | "hang"}``: the local runner crashes or
            hangs instead of running that config's kernel.
    """

    def __init__(self, target: Target | str | None = None, *, runner: Runner | None = None,
                 builders: int | None = None, protocol: TimingProtocol | None = None,
                 build_timeout: float | None = None,
                 run_timeout: float | None = None, faults: Mapping[Config, str] | None = None):
        if runner is not None and protocol is not None:
            raise ValueError("pass the protocol to the runner, not to the Measurer, when you give a runner")
        self.target = runner.target if runner is not None and target is None else resolve_target(target)
        if runner is not None and runner.target.fingerprint != self.target.fingerprint:
            raise ValueError(f"the runner times on {runner.target.label}, not on {self.target.label}")
        self.build_timeout = build_timeout if build_timeout is not None else (
            600.0 if self.target.kind == "cuda" else 30.0)
        self.run_timeout = run_timeout
        self.faults = dict(faults or {})
        for mode in self.faults.values():
            if mode not in FAULTS:
                raise ValueError(f"unknown fault {mode!r}; use one of {FAULTS}")
        self._workdir = tempfile.mkdtemp(prefix="tensorgym-")
        n_builders = builders or resolve_target(None).num_cores
        # One thread per builder: parallelism comes from the processes. Builders import TVM up front
        # (their imports overlap); a CUDA machine without TVM can still build CUTLASS kernels.
        preload = ("tvm",) if importlib.util.find_spec("tvm") is not None else ()
        self._builders = [Worker(f"builder{i}", self._workdir, env={"TVM_NUM_THREADS": "1"}, preload=preload)
                          for i in range(n_builders)]
        self.runner = runner if runner is not None else default_runner(self.target, self._workdir, protocol)
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
        for worker in self._builders:
            worker.close()
        self.runner.close()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __deepcopy__(self, memo) -> "Measurer":
        # A measurer is a shared service (processes, a work dir): copies of an env's
        # kwargs, as gym.make makes, share it rather than clone it.
        return self

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
                on_record: Callable[[Record], None] | None = None) -> list[Record]:
        """Build, check (if ``check``) and time ``configs``; one record each, in order.

        ``on_record`` is called with each record as soon as it exists (to persist it).
        """
        return self.measure_pairs([(space, c) for c in configs], check=check, on_record=on_record)

    def measure_pairs(self, kernels: Sequence[tuple[Space, Config]], *, check: bool = True,
                      on_record: Callable[[Record], None] | None = None) -> list[Record]:
        """:meth:`measure` for ``(space, config)`` pairs of possibly different spaces, built together."""
        for space, _ in kernels:
            if space.target.fingerprint != self.target.fingerprint:
                raise ValueError(f"space is for target {space.target.label}, this measurer for {self.target.label}")
        if not kernels:
            return []
        for worker in self._builders:
            worker.start()  # start all together: their imports overlap
        self.runner.start()
        t0 = time.monotonic()
        task = self.runner.build_task
        builds = run_all(self._builders, [(task, (space, c, self._workdir), {}) for space, c in kernels],
                         timeout=self.build_timeout)
        build_share = (time.monotonic() - t0) / len(kernels)
        self.kernels_built += len(kernels)
        records = []
        for (space, config), built in zip(kernels, builds):
            records.append(self._run_one(space, config, built, check, build_share))
            if on_record is not None:
                on_record(records[-1])
        return records

    def _run_one(self, space: Space, config: Config, built: Outcome, check: bool, build_share: float) -> Record:
        build_s = built.value["seconds"] if built.ok else built.seconds
        base = dict(workload=space.workload.key, target=self.target.fingerprint, space=space.name, config=config,
                    build_s=build_s, wall_s=build_share, created=time.time())
        if not built.ok:
            status = Status.TIMEOUT if built.kind == "timeout" else Status.BUILD_ERROR
            return Record(status=status, error=f"build: {built.error}"[:4000], **base)
        timeout = self.run_timeout if self.run_timeout is not None else 10.0 + 25.0 * space.workload.gflop
        ran = self.runner.run(space, config, built.value["path"], check=check, timeout=timeout,
                              fault=self.faults.get(config))
        self.kernels_run += 1
        base["run_s"] = ran.seconds
        base["wall_s"] += ran.seconds
        if ran.kind == "timeout":
            return Record(status=Status.TIMEOUT, error=f"run: {ran.error}", **base)
        if not ran.ok:
            return Record(status=Status.RUNTIME_ERROR, error=f"run: {ran.error}"[:4000], **base)
        result = ran.value
        if result["status"] != "ok":
            return Record(status=Status(result["status"]), error=result.get("error", ""), **base)
        median, cv = summarize_samples(result["samples"])
        state = tuple(sorted((str(k), float(v)) for k, v in result.get("device_state", {}).items()))
        return Record(status=Status.OK, latency_s=median, latency_cv=cv, samples=tuple(result["samples"]),
                      number=result["number"], gflops=space.workload.gflops(median), device_state=state, **base)
