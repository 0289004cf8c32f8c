"""The MetaSchedule network tuning job: ``ms.tune_tasks`` over a network's layers, in its own worker process.

The network-level twin of :mod:`.job`: one MetaSchedule task per live layer
(post-order-apply design space, evolutionary search, one XGBoost cost model),
weighted by the layer's count, scheduled by MetaSchedule's ``GradientBased``
task scheduler (seeded), with the same total trial budget as tensorgym's
schedulers. Every measured candidate is kept with its task and the time its
result was known; afterwards the best ``top_k`` schedules of each task are
matched to configs of that layer's ``metaschedule`` space and checked to
rebuild exactly the kernels MetaSchedule measured.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tensorgym.target import Target
from tensorgym.workloads import Workload

from .design import Design
from .recording import Clock, attach_configs, rebuilds_exactly, timed_runner_and_recorder
from .tvmscript import install_fast_tvmscript_stack, popen_initializer

GRADIENT_ALPHA = 0.2  # MetaSchedule's GradientBased defaults
GRADIENT_WINDOW = 3


def tune_network_here(workloads: Sequence[Workload], weights: Sequence[float], target: Target, budget: int,
                      seed: int, work_dir: str, time_budget: float | None, trials_per_iter: int,
                      build_timeout: float, run_timeout: float, top_k: int) -> dict[str, Any]:
    """Runs in the MetaSchedule worker: ``tune_tasks`` with a recorder, then each task's trials as configs."""
    install_fast_tvmscript_stack()
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir
    from tvm.s_tir.meta_schedule.utils import fork_seed

    designs = [Design(w, target) for w in workloads]
    names = [f"task{i:02d}" for i in range(len(workloads))]
    tasks = [ms.TuneContext(mod=d.mod, target=target.tvm_target(), space_generator="post-order-apply",
                            search_strategy="evolutionary", task_name=name, rand_state=state,
                            num_threads=target.num_cores, logger=logger).clone()
             for d, name, logger, state in zip(designs, names, get_loggers_from_work_dir(work_dir, names),
                                               fork_seed(seed, n=len(workloads)))]
    progress_path = Path(work_dir) / "progress.jsonl"
    progress_path.write_text("")
    clock = Clock()
    trials: list[dict[str, Any]] = []
    traces: list[Any] = []

    def on_batch(task_scheduler, task_id: int, batch, now: float) -> None:
        with progress_path.open("a") as f:  # one line per trial, read by the caller's callbacks
            for entry, trace in batch:
                trials.append(entry)
                traces.append(trace)
                f.write(json.dumps({k: entry[k] for k in ("task", "elapsed_s", "status", "latency_s")}) + "\n")
        if time_budget is not None and now >= time_budget:
            for i in range(len(tasks)):
                task_scheduler.terminate_task(i)

    runner, recorder = timed_runner_and_recorder(clock, run_timeout, on_batch)

    ms.tune_tasks(
        tasks=tasks, task_weights=[float(w) for w in weights], work_dir=work_dir, max_trials_global=budget,
        num_trials_per_iter=trials_per_iter,
        builder=ms.builder.LocalBuilder(max_workers=target.num_cores, timeout_sec=build_timeout,
                                        initializer=popen_initializer),
        runner=runner, database=ms.database.JSONDatabase(work_dir=work_dir), cost_model="xgb",
        measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), recorder],
        task_scheduler=ms.task_scheduler.GradientBased(alpha=GRADIENT_ALPHA, window_size=GRADIENT_WINDOW, seed=seed),
    )
    tune_s = clock()

    unmatched = attach_configs(trials, traces, lambda entry: designs[entry["task"]])
    top: list[list[int]] = [[] for _ in workloads]
    mismatched = 0
    ranked = sorted((i for i, e in enumerate(trials) if e["latency_s"] and e["config"]),
                    key=lambda i: trials[i]["latency_s"])
    for i in ranked:  # per task, its best top_k distinct configs that rebuild what MetaSchedule measured
        task = trials[i]["task"]
        if len(top[task]) >= top_k or trials[i]["config"] in [trials[j]["config"] for j in top[task]]:
            continue
        if rebuilds_exactly(designs[task], traces[i], trials[i]["config"]):
            top[task].append(i)
        else:
            mismatched += 1
    return {
        "signatures": [[[k.to_json() for k in knobs] for knobs in d.signature] for d in designs], "trials": trials,
        "tune_s": tune_s, "top": top, "unmatched": unmatched, "mismatched": mismatched, "tvm": tvm.__version__,
    }
