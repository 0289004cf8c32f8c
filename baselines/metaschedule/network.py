"""TVM MetaSchedule's network tuner as a peer of tensorgym's task schedulers (``--scheduler metaschedule``).

:class:`MetaScheduleNetworkTuner` tunes the live layers of a network env's
network the way MetaSchedule's users do: ``ms.tune_tasks`` over one TIR task
per layer, weighted by the layer's count, with MetaSchedule's gradient task
scheduler (``GradientBased``, alpha 0.2, window 3, seeded), its evolutionary
search and XGBoost cost model, the same total trial budget as tensorgym's
schedulers and the same round size (``num_trials_per_iter`` =
``measure_per_round``, by default Ansor's ``min(64, budget // tasks)``). It
runs in its own worker process (:mod:`.network_job`), like the single-layer
peer (:mod:`.agent`), never in the process that holds the env.

**Results.** The :class:`~tensorgym.tuner.TuningResult`'s timeline
is MetaSchedule's own: its measurements in the order their results were
known, its latencies (the mean of its ``run_secs``), its elapsed wall time,
and the network estimate ``sum_i w_i m_i`` they give. Each layer's best
``top_k`` schedules are then re-timed by tensorgym's measurer (checked
against NumPy, timed with tensorgym's protocol, stored in the env's database
as records of the ``metaschedule`` space); the tasks' best latencies, and so
the final ``best_latency_s`` (and ``best_gflops``), are the re-timed ones. ``extra`` keeps
MetaSchedule's own final estimate.

**Resume.** As the single-layer peer: a finished run leaves ``result.json``
in its work directory (beside the database) and is reused; an interrupted
one starts again (``tune_tasks`` cannot resume).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from tensorgym.config import Config
from tensorgym.envs.network_env import unwrap_network_env
from tensorgym.evaluator import Evaluator
from tensorgym.text import slug
from tensorgym.tuner import (TaskResult, Trial, TuningCallback, TuningResult, as_callback, check_budget,
                             default_measure_per_round, network_key)

from .design import signature_from_json
from .job_runner import JobOptions, ProgressFile, reused_or_restarted, run_job, save_finished_run
from .space import MetaScheduleSpace

log = logging.getLogger(__name__)


class MetaScheduleNetworkTuner(JobOptions):
    """MetaSchedule's ``tune_tasks`` on a network env's layers (see the module docs).

    Args:
        work_dir: where its runs keep logs, database and results (default: beside the tensorgym database).
        top_k: schedules per layer re-timed by tensorgym's measurer.
        build_timeout, run_timeout: MetaSchedule's builder and runner timeouts (seconds per candidate).
        timeout: seconds the whole job may take (default: scaled with the budget and the network's FLOPs).
        reuse: reuse a finished run found in the work directory.
    """

    name = "metaschedule"

    def tune(self, env: gym.Env, budget: int | None = None, time_budget: float | None = None, seed: int = 0,
             measure_per_round: int | None = None,
             callback: TuningCallback | Sequence[TuningCallback] | None = None) -> TuningResult:
        """Run MetaSchedule over ``env``'s network, then re-time each layer's best schedules into its database."""
        check_budget(budget, time_budget)
        base = unwrap_network_env(env)
        if base.target.kind != "llvm":
            raise ValueError(f"the metaschedule network tuner tunes LLVM CPU targets, not {base.target.kind!r}")
        network = base.network
        live = list(network.live_tasks)
        per_round = measure_per_round or default_measure_per_round(budget, len(live))
        callback = as_callback(callback)
        callback.on_start(f"{self.name} {network.name}", budget)
        started = time.monotonic()
        key = hashlib.sha256("|".join([base.target.fingerprint] + [f"{network.tasks[i].workload.key}*"
                                                                   f"{network.tasks[i].weight}" for i in live])
                             .encode()).hexdigest()[:10]
        run_name = f"seed{seed}-budget{budget}-round{per_round}" + (f"-time{time_budget:g}" if time_budget else "")
        try:
            with self.work_root(base.database) as root:
                data = self._run(base, live, root / f"network-{slug(network.name)}-{key}" / run_name, budget,
                                 time_budget, seed, per_round, callback)
                return self._result(base, live, data, seed, budget, time_budget, per_round,
                                    time.monotonic() - started)
        finally:
            callback.on_end()

    def _run(self, base, live: list[int], work_dir: Path, budget: int | None, time_budget: float | None, seed: int,
             per_round: int, callback: TuningCallback) -> dict[str, Any]:
        network = base.network

        def replay(data: dict[str, Any]) -> dict[str, Any]:
            for trial in self._timeline(network, live, data["trials"]):
                callback.on_trial(trial)
            return data

        reused = reused_or_restarted(work_dir, self.reuse, replay)
        if reused is not None:
            return reused
        trials = budget if budget is not None else 1_000_000  # time budget only: MetaSchedule stops on the clock
        workloads = [network.tasks[i].workload for i in live]
        if self.timeout is not None:
            timeout = self.timeout
        elif budget is not None:
            timeout = 900.0 + budget * (5.0 + 20.0 * max(w.gflop for w in workloads))
        else:
            timeout = 900.0 + 2.0 * time_budget
        log.info("MetaSchedule on %s (%d layers): %s trials, logs in %s", network.name, len(live), budget, work_dir)
        timeline = _Timeline(network, live)
        progress = ProgressFile(work_dir / "progress.jsonl", lambda entry: callback.on_trial(timeline.add(entry)))
        data = run_job("metaschedule-network", network.name, work_dir, base.target,
                       "tensorgym.baselines.metaschedule.network_job:tune_network_here",
                       (workloads, [network.tasks[i].weight for i in live], base.target, trials, seed, str(work_dir),
                        time_budget, per_round, self.build_timeout, self.run_timeout, self.top_k), timeout, progress)
        save_finished_run(work_dir, data)
        return data

    @staticmethod
    def _timeline(network, live: list[int], entries: Sequence[dict[str, Any]]) -> list[Trial]:
        """MetaSchedule's own trials as network trials, with the estimate its own latencies give."""
        timeline = _Timeline(network, live)
        return [timeline.add(entry) for entry in entries]

    def _result(self, base, live: list[int], data: dict[str, Any], seed: int, budget: int | None,
                time_budget: float | None, per_round: int, wall_s: float) -> TuningResult:
        network = base.network
        timeline = self._timeline(network, live, data["trials"])
        tasks = []
        retimed: list[dict[str, Any]] = []
        for i, task in enumerate(network.tasks):
            result = TaskResult(label=task.label, workload_key=task.workload.key, weight=task.weight,
                                gflop=task.workload.gflop, candidates=["metaschedule"],
                                note=task.note if task.live else f"not tuned (weight 0): {task.note}")
            if i in live:
                j = live.index(i)
                space = MetaScheduleSpace(task.workload, base.target, signature_from_json(data["signatures"][j]))
                evaluator = Evaluator(space, base.database, base.measurer)
                picks = data["top"][j]
                records = evaluator.evaluate([Config.from_json(data["trials"][k]["config"]) for k in picks])
                ok = [r for r in records if r.ok]
                top = min(ok, key=lambda r: r.latency_s) if ok else None
                own = [e for e in data["trials"] if e["task"] == j]
                result.trials, result.candidate_trials = len(own), [len(own)]
                if top is not None:
                    result.best_latency_s, result.best_latency_cv = top.latency_s, top.latency_cv
                    result.best_config, result.best_candidate = top.config.to_json(), 0
                result.candidate_best_s = [result.best_latency_s]
                retimed += [{"task": task.label, "config": r.config.to_json(), "status": r.status.value,
                             "latency_s": r.latency_s, "metaschedule_latency_s": data["trials"][k]["latency_s"]}
                            for k, r in zip(picks, records)]
                if own and top is None:
                    log.warning("none of MetaSchedule's best schedules of %s ran correctly under tensorgym's "
                                "measurer", task.label)
            tasks.append(result)
        extra = {"metaschedule_estimate_s": timeline[-1].best_latency_s if timeline else None,
                 "metaschedule_tune_s": data["tune_s"], "retimed": retimed, "unmatched": data["unmatched"],
                 "mismatched": data["mismatched"], "tvm": data["tvm"]}
        estimate = network.estimate([t.best_latency_s for t in tasks])
        return TuningResult(
            agent=self.name, workload=network.name, workload_key=network_key(network), space="metaschedule",
            target=base.target.fingerprint, seed=seed, budget=budget, time_budget=time_budget, trials=timeline,
            best_gflops=network.gflop / estimate if estimate else 0.0, best_latency_s=estimate,
            measured=len(timeline), reused=0, wall_s=wall_s, extra=extra, tasks=tasks, rounds=[],
            search="metaschedule", measure_per_round=per_round)


class _Timeline:
    """MetaSchedule's trials, one at a time, as trials of a network run (task index, estimate so far)."""

    def __init__(self, network, live: list[int]):
        self.network, self.live = network, live
        self.best: dict[int, float] = {}
        self.count = 0

    def add(self, entry: dict[str, Any]) -> Trial:
        task = self.live[entry["task"]]
        latency = entry["latency_s"]
        if latency:
            self.best[task] = min(self.best.get(task, latency), latency)
        self.count += 1
        estimate = self.network.estimate([self.best.get(i) for i in range(len(self.network.tasks))])
        config = entry.get("config")
        return Trial(self.count, entry["elapsed_s"], Config.from_json(config) if config is not None else None,
                     entry["status"], self.network.tasks[task].workload.gflops(latency) if latency else None,
                     self.network.gflop / estimate if estimate else 0.0, True, task=task, latency_s=latency,
                     best_latency_s=estimate)

