"""What the single-layer and the network MetaSchedule jobs share: timing each trial and matching it to a config.

Runs only in the MetaSchedule worker process (:mod:`.job`, :mod:`.network_job`).
MetaSchedule reports a whole batch of candidates at once; the runner here runs
them one at a time and notes when each result was known, so that a trial's
``elapsed_s`` is when *it* finished, not when its batch did.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.spaces.base import SpaceError

from .design import Design, scalar
from .tvmscript import popen_initializer

# (task scheduler, task id, [(trial entry, trace)] in the order results were known, now) -> None
BatchHandler = Callable[[Any, int, list[tuple[dict[str, Any], Any]], float], None]


def trial_status(build_error: str | None, run_error: str | None) -> str:
    """MetaSchedule's build and run error messages as a tensorgym record status."""
    if build_error:
        return "timeout" if "Timeout" in build_error else "build_error"
    if run_error:
        return "timeout" if "Timeout" in run_error else "runtime_error"
    return "ok"


class Clock:
    """Seconds since the job started."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def __call__(self) -> float:
        return time.monotonic() - self._t0


def timed_runner_and_recorder(clock: Clock, run_timeout: float, on_batch: BatchHandler) -> tuple[Any, Any]:
    """A MetaSchedule runner that times candidates one by one, and the measure callback that reports them.

    Each reported entry holds ``task``, ``elapsed_s`` (when its result was
    known), ``status``, ``latency_s`` (mean of MetaSchedule's run seconds, or
    None) and ``error``; ``on_batch`` gets them with their traces.
    """
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    local_runner = ms.runner.LocalRunner(
        timeout_sec=run_timeout, initializer=popen_initializer,
        evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=100,
                                                   enable_cpu_cache_flush=False))

    @derived_object
    class TimedRunner(ms.runner.PyRunner):
        """LocalRunner, one candidate at a time, noting when each result is known."""

        def __init__(self) -> None:
            super().__init__()
            self.batches: list[tuple[float, list[float]]] = []  # (builds finished, each run finished)

        def run(self, runner_inputs):
            done: list[float] = []
            self.batches.append((clock(), done))
            futures = []
            for runner_input in runner_inputs:
                futures.extend(local_runner.run([runner_input]))
                done.append(clock())
            return futures

    runner = TimedRunner()

    @derived_object
    class Recorder(ms.measure_callback.PyMeasureCallback):
        """Hands every measured candidate, with the time its result was known, to ``on_batch``."""

        def __init__(self) -> None:
            super().__init__()
            self.batches_seen = 0

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            now = clock()
            new_batches = runner.batches[self.batches_seen:]
            self.batches_seen = len(runner.batches)
            builds_done = new_batches[0][0] if new_batches else now
            run_times = iter([t for _, times in new_batches for t in times])
            batch = []
            for candidate, built, ran in zip(measure_candidates, builder_results, runner_results):
                elapsed = builds_done if built.error_msg else next(run_times, now)
                secs = [float(scalar(s)) for s in ran.run_secs] if ran.run_secs else []
                status = trial_status(built.error_msg, ran.error_msg)
                latency = float(np.mean(secs)) if status == "ok" and secs else None
                batch.append(({"task": int(task_id), "elapsed_s": elapsed, "status": status, "latency_s": latency,
                               "error": (built.error_msg or ran.error_msg or "")[:2000]}, candidate.sch.trace))
            batch.sort(key=lambda item: item[0]["elapsed_s"])  # the order results were known in
            on_batch(task_scheduler, int(task_id), batch, now)

    return runner, Recorder()


def attach_configs(trials: Sequence[dict[str, Any]], traces: Sequence[Any],
                   design_of: Callable[[dict[str, Any]], Design]) -> int:
    """Sets each trial's ``config`` (JSON, or None where no config matches its trace); returns how many missed."""
    unmatched = 0
    for entry, trace in zip(trials, traces):
        config = design_of(entry).config_of(trace)
        entry["config"] = config.to_json() if config is not None else None
        unmatched += config is None
    return unmatched


def rebuilds_exactly(design: Design, trace: Any, config_json: str) -> bool:
    """Whether the config rebuilds exactly the kernel MetaSchedule measured for ``trace``."""
    import tvm
    import tvm_ffi

    original = tvm.s_tir.Schedule(design.mod)
    trace.apply_to_schedule(original, remove_postproc=False)
    try:
        rebuilt = design.schedule(Config.from_json(config_json)).mod
    except SpaceError:
        return False
    return bool(tvm_ffi.structural_equal(rebuilt, original.mod))
