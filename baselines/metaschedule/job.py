"""The MetaSchedule tuning job: ``tune_tir`` in its own worker process, its trials turned into configs.

Runs in a :class:`~tensorgym.measure.worker.Worker` started by the agent
(:mod:`.agent`), never in the process that holds the environment: it trains
XGBoost and starts popen pools, and a kernel timed in a process that trains
XGBoost was once seen 25 % slow.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.spaces.base import SpaceError
from tensorgym.target import Target
from tensorgym.workloads import Workload

from .design import design as _cached_design
from .design import scalar
from .tvmscript import install_fast_tvmscript_stack, popen_initializer


def _status(build_error: str | None, run_error: str | None) -> str:
    if build_error:
        return "timeout" if "Timeout" in build_error else "build_error"
    if run_error:
        return "timeout" if "Timeout" in run_error else "runtime_error"
    return "ok"


def tune_here(workload: Workload, target: Target, budget: int, seed: int, work_dir: str,
               time_budget: float | None, trials_per_iter: int, build_timeout: float, run_timeout: float,
               top_k: int) -> dict[str, Any]:
    """Runs in the MetaSchedule worker: ``tune_tir`` with a recorder, then the trials as configs."""
    install_fast_tvmscript_stack()
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    design = _cached_design(workload, target)
    progress_path = Path(work_dir) / "progress.jsonl"
    progress_path.write_text("")
    t0 = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t0

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
    trials: list[dict[str, Any]] = []
    traces: list[Any] = []

    @derived_object
    class Recorder(ms.measure_callback.PyMeasureCallback):
        """Keeps every measured candidate with the time its result was known; enforces the time budget."""

        def __init__(self) -> None:
            super().__init__()
            self.batches_seen = 0
            self.best = 0.0

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
                status = _status(built.error_msg, ran.error_msg)
                latency = float(np.mean(secs)) if status == "ok" and secs else None
                error = (built.error_msg or ran.error_msg or "")[:2000]
                batch.append(({"elapsed_s": elapsed, "status": status, "latency_s": latency, "error": error},
                              candidate.sch.trace))
            batch.sort(key=lambda item: item[0]["elapsed_s"])  # the order results were known in
            lines = []
            for entry, trace in batch:
                trials.append(entry)
                traces.append(trace)
                gflops = workload.gflops(entry["latency_s"]) if entry["latency_s"] else None
                self.best = max(self.best, gflops or 0.0)
                lines.append(json.dumps({"index": len(trials), "elapsed_s": entry["elapsed_s"],
                                         "status": entry["status"], "gflops": gflops, "best_gflops": self.best}))
            with progress_path.open("a") as f:  # one line per trial, read by the agent's callbacks
                f.write("".join(line + "\n" for line in lines))
            if time_budget is not None and now >= time_budget:
                task_scheduler.terminate_task(task_id)

    ms.tune_tir(
        mod=design.mod, target=target.tvm_target(), work_dir=work_dir, max_trials_global=budget,
        num_trials_per_iter=min(trials_per_iter, budget),
        builder=ms.builder.LocalBuilder(max_workers=target.num_cores, timeout_sec=build_timeout,
                                        initializer=popen_initializer),
        runner=runner, database=ms.database.JSONDatabase(work_dir=work_dir), cost_model="xgb",
        space=design.space_generator,
        measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), Recorder()],
        num_tuning_cores=target.num_cores, seed=seed,
    )
    tune_s = clock()

    unmatched = 0
    for entry, trace in zip(trials, traces):
        config = design.config_of(trace)
        entry["config"] = config.to_json() if config is not None else None
        unmatched += config is None
    # Check that the configs to be re-timed rebuild exactly the kernels MetaSchedule measured.
    verified, mismatched = [], []
    ranked = sorted((i for i, e in enumerate(trials) if e["latency_s"] and e["config"]),
                    key=lambda i: trials[i]["latency_s"])
    for i in ranked:
        if len(verified) >= top_k:
            break
        config = Config.from_json(trials[i]["config"])
        if config.to_json() in [trials[j]["config"] for j in verified]:
            continue
        original = tvm.s_tir.Schedule(design.mod)
        traces[i].apply_to_schedule(original, remove_postproc=False)
        try:
            same = _structural_equal(design.schedule(config).mod, original.mod)
        except SpaceError:
            same = False
        (verified if same else mismatched).append(i)
    return {
        "signature": [[k.to_json() for k in knobs] for knobs in design.signature], "trials": trials,
        "tune_s": tune_s, "design_spaces": len(design.traces), "unmatched": unmatched, "top": verified,
        "mismatched": mismatched, "tvm": tvm.__version__,
    }


def _structural_equal(a, b) -> bool:
    import tvm_ffi

    return bool(tvm_ffi.structural_equal(a, b))
