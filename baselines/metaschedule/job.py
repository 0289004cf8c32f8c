"""The MetaSchedule tuning job: ``tune_tir`` in its own worker process, its trials turned into configs.

Runs in a :class:`~tensorgym.measure.worker.Worker` started by the agent
(:mod:`.agent`), never in the process that holds the environment: it trains
XGBoost and starts popen pools, and a kernel timed in a process that trains
XGBoost was once seen 25 % slow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tensorgym.target import Target
from tensorgym.workloads import Workload

from .design import design as _cached_design
from .recording import Clock, attach_configs, rebuilds_exactly, timed_runner_and_recorder
from .tvmscript import install_fast_tvmscript_stack, popen_initializer


def tune_here(workload: Workload, target: Target, budget: int, seed: int, work_dir: str,
               time_budget: float | None, trials_per_iter: int, build_timeout: float, run_timeout: float,
               top_k: int) -> dict[str, Any]:
    """Runs in the MetaSchedule worker: ``tune_tir`` with a recorder, then the trials as configs."""
    install_fast_tvmscript_stack()
    import tvm
    from tvm.s_tir import meta_schedule as ms

    design = _cached_design(workload, target)
    progress_path = Path(work_dir) / "progress.jsonl"
    progress_path.write_text("")
    clock = Clock()
    trials: list[dict[str, Any]] = []
    traces: list[Any] = []
    best = 0.0

    def on_batch(task_scheduler, task_id: int, batch, now: float) -> None:
        nonlocal best
        lines = []
        for entry, trace in batch:
            del entry["task"]  # one task only
            trials.append(entry)
            traces.append(trace)
            gflops = workload.gflops(entry["latency_s"]) if entry["latency_s"] else None
            best = max(best, gflops or 0.0)
            lines.append(json.dumps({"index": len(trials), "elapsed_s": entry["elapsed_s"],
                                     "status": entry["status"], "gflops": gflops, "best_gflops": best}))
        with progress_path.open("a") as f:  # one line per trial, read by the agent's callbacks
            f.write("".join(line + "\n" for line in lines))
        if time_budget is not None and now >= time_budget:
            task_scheduler.terminate_task(task_id)

    runner, recorder = timed_runner_and_recorder(clock, run_timeout, on_batch)

    ms.tune_tir(
        mod=design.mod, target=target.tvm_target(), work_dir=work_dir, max_trials_global=budget,
        num_trials_per_iter=min(trials_per_iter, budget),
        builder=ms.builder.LocalBuilder(max_workers=target.num_cores, timeout_sec=build_timeout,
                                        initializer=popen_initializer),
        runner=runner, database=ms.database.JSONDatabase(work_dir=work_dir), cost_model="xgb",
        space=design.space_generator,
        measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), recorder],
        num_tuning_cores=target.num_cores, seed=seed,
    )
    tune_s = clock()

    unmatched = attach_configs(trials, traces, lambda entry: design)
    # Check that the configs to be re-timed rebuild exactly the kernels MetaSchedule measured.
    verified: list[int] = []
    mismatched: list[int] = []
    ranked = sorted((i for i, e in enumerate(trials) if e["latency_s"] and e["config"]),
                    key=lambda i: trials[i]["latency_s"])
    for i in ranked:
        if len(verified) >= top_k:
            break
        if trials[i]["config"] in [trials[j]["config"] for j in verified]:
            continue
        (verified if rebuilds_exactly(design, traces[i], trials[i]["config"]) else mismatched).append(i)
    return {
        "signature": [[k.to_json() for k in knobs] for knobs in design.signature], "trials": trials,
        "tune_s": tune_s, "design_spaces": len(design.traces), "unmatched": unmatched, "top": verified,
        "mismatched": mismatched, "tvm": tvm.__version__,
    }

