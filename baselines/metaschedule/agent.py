"""TVM MetaSchedule as a peer: its own tuner on the same workload, re-timed by tensorgym's measurer.

:class:`MetaScheduleAgent` (``"metaschedule"``) runs ``tvm.s_tir.meta_schedule``
the way its users do (``ms.tune_tir``: post-order-apply design space,
evolutionary search, XGBoost cost model, LocalBuilder/LocalRunner) with the
same trial budget as tensorgym's agents (``max_trials_global = budget``,
``num_trials_per_iter = min(64, budget)``), then re-times MetaSchedule's best
schedules with tensorgym's :class:`~tensorgym.measure.Measurer`, so that its
numbers are checked against NumPy, timed with tensorgym's protocol and stored
in the tensorgym database like every other agent's.

**Isolation.** MetaSchedule runs in its own worker process (a
:class:`~tensorgym.measure.worker.Worker`), never in the process that holds
the environment: it trains XGBoost and starts popen pools, and a kernel
timed in the process that trains XGBoost was once measured 25 % slow.
That process, and the popen workers it
starts, get ``TVM_NUM_THREADS`` = the core count, so MetaSchedule times its
kernels on every core like tensorgym and the vendor libraries do; the
target carries ``num-cores``. MetaSchedule's logs go to files in its work
directory; the caller sees a progress bar.

**Import time (B4).** The first import of ``tvm.s_tir.tensor_intrin``
(which ``TuneContext`` triggers) takes 20-30 s, because each of its ~500
TVMScript functions calls ``inspect.stack()``, which resolves the module of
every frame of the stack. The TVMScript parser only reads the frame objects
and the source line of the first few frames, so
:func:`install_fast_tvmscript_stack` gives it a stack without module
resolution (3 s instead of 30 s). It is installed in the MetaSchedule
process, in its builder/runner popen workers (``initializer=``), and in
tensorgym's build workers before they regenerate a design space.

**int8 and bf16.** MetaSchedule tunes the blocked formulation of
:mod:`.packed` (channels-last activations, VNNI-blocked weights, laid out
outside its timed kernel) with its ``MultiLevelTilingWithIntrin`` rule on
tensorgym's AVX-512 VNNI (int8) or AVX512-BF16 (bf16) dot-product intrinsic;
tensorgym's re-timing and NumPy check use the same layouts.

**The** ``metaschedule`` **space.** To store MetaSchedule's schedules as
tensorgym records they need configs: :class:`MetaScheduleSpace` has one
config per (design space, sampling decisions) of MetaSchedule's design
spaces for the workload: ``{"space": 1, "k00_tile": [4, 1, 8, 2], ...,
"k03_par": 32, "k04_cat": 2, "k05_loc": -1}`` where ``tile`` is a
SamplePerfectTile decision, ``cat`` a SampleCategorical decision (the index
of the candidate, e.g. of the unroll depth), ``loc`` a SampleComputeLocation
decision and ``par`` the value of the ``meta_schedule.parallel`` annotation
(the one non-decision that MetaSchedule's MutateParallel changes).
``apply`` replays that design space's trace with those decisions and runs
MetaSchedule's postprocessors. A measured MetaSchedule trace is matched to
its design space by comparing the simplified traces, and the match is
checked by structural equality of the scheduled modules before re-timing.

**Budget and results.** MetaSchedule's own trials are the budget. The
:class:`~tensorgym.tuner.TuningResult`'s timeline is MetaSchedule's own
measurements in the order their results were known, with MetaSchedule's
latencies (the mean of its ``run_secs``) and its elapsed wall time, so
best-at-N-trials and best-at-T-seconds are meaningful; the elapsed time of
a trial is when its run finished (failed builds: when the batch's builds
finished). The re-timing of the best ``top_k`` configs is extra, not charged
to the budget: ``best_gflops`` / ``best_config`` / ``best_latency_*`` are
the best *re-timed* record (the number to headline), and
``extra["metaschedule_best_gflops"]`` is MetaSchedule's own best. A
``time_budget`` stops MetaSchedule after the batch in which it runs out.

**Resume.** Each run works in a directory beside the tensorgym database
(``<db>.metaschedule/<workload>/seed<S>-budget<B>``); a finished run leaves
``result.json`` there and a re-run reuses it (the re-timing is then answered
by the tensorgym database). An interrupted MetaSchedule run is started again
from scratch: ``tune_tir`` cannot resume a search.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from tensorgym.agents.base import Agent
from tensorgym.config import Config
from tensorgym.envs.base import tuning_env
from tensorgym.errors import InvalidArgumentError
from tensorgym.evaluator import Evaluator
from tensorgym.record import Record
from tensorgym.target import Target
from tensorgym.text import slug
from tensorgym.tuner import Trial, TuningCallback, TuningResult, as_callback, check_budget
from tensorgym.workloads import Workload

from .design import Signature, signature_from_json
from .job_runner import JobOptions, ProgressFile, reused_or_restarted, run_job, save_finished_run
from .space import MetaScheduleSpace

log = logging.getLogger(__name__)

TRIALS_PER_ITER = 64  # MetaSchedule's default batch


@dataclass
class MetaScheduleRun:
    """What one MetaSchedule tuning job produced (``result.json`` in its work directory)."""

    signature: Signature
    trials: list[dict[str, Any]]  # elapsed_s, status, latency_s, error, config (JSON or None)
    tune_s: float
    top: list[int]  # indices of the trials to re-time (best first, verified)
    work_dir: str
    info: dict[str, Any] = field(default_factory=dict)


class MetaScheduleAgent(Agent, JobOptions):
    """TVM MetaSchedule on the env's workload, as a peer of tensorgym's agents (see the module docs).

    Args:
        work_dir: where MetaSchedule's runs keep their logs, database and
            results (default: ``<tensorgym db>.metaschedule/``; a temporary
            directory for an in-memory database).
        top_k: how many of MetaSchedule's best schedules to re-time.
        trials_per_iter: MetaSchedule's batch size (capped by the budget).
        build_timeout, run_timeout: MetaSchedule's builder and runner timeouts (seconds per candidate).
        timeout: seconds the whole MetaSchedule job may take (default: scaled with budget and workload).
        reuse: reuse a finished run found in the work directory.

    The agent works in any env of a conv2d or matmul on the local CPU: it
    ignores the env's search space (MetaSchedule searches its own) but uses
    its workload, target, database and measurer.
    """

    name = "metaschedule"

    def __init__(self, work_dir: str | Path | None = None, top_k: int = 3, trials_per_iter: int = TRIALS_PER_ITER,
                 build_timeout: float = 30.0, run_timeout: float = 30.0, timeout: float | None = None,
                 reuse: bool = True):
        JobOptions.__init__(self, work_dir, top_k, build_timeout, run_timeout, timeout, reuse)
        if trials_per_iter < 1:
            raise ValueError(f"trials_per_iter must be >= 1, got {trials_per_iter}")
        self.trials_per_iter = trials_per_iter

    # -- tune ------------------------------------------------------------------------
    def tune(self, env: gym.Env, budget: int | None = 64, time_budget: float | None = None, seed: int = 0,
             callback: TuningCallback | Sequence[TuningCallback] | None = None) -> TuningResult:
        """Run MetaSchedule on ``env``'s workload, then re-time its best schedules into ``env``'s database."""
        check_budget(budget, time_budget)
        base = tuning_env(env)
        workload, target = base.workload, base.target
        if target.kind != "llvm":
            raise ValueError(f"the metaschedule agent tunes LLVM CPU targets, not {target.kind!r}")
        if target.remote is not None:
            raise InvalidArgumentError(f"the metaschedule agent times on this machine; it cannot tune the remote "
                                       f"device {target.remote.address}")
        started = time.monotonic()
        callback = as_callback(callback)
        callback.on_start(f"{self.name} {workload.label}", budget)
        key = hashlib.sha256(f"{workload.key}|{target.fingerprint}".encode()).hexdigest()[:10]
        run_name = f"seed{seed}-budget{budget}" + (f"-time{time_budget:g}" if time_budget else "")
        try:
            with self.work_root(base.database) as root:
                run = self.run_metaschedule(workload, target, root / f"{slug(workload.label)}-{key}" / run_name,
                                            budget=budget, time_budget=time_budget, seed=seed,
                                            on_trial=callback.on_trial)
                evaluator = Evaluator(MetaScheduleSpace(workload, target, run.signature), base.database,
                                      base.evaluator.measurer)
                return self._result(run, evaluator, seed, budget, time_budget, time.monotonic() - started)
        finally:
            callback.on_end()

    def run_metaschedule(self, workload: Workload, target: Target, work_dir: str | Path, *, budget: int | None,
                         time_budget: float | None, seed: int,
                         on_trial: Callable[[Trial], None] | None = None) -> MetaScheduleRun:
        """Tune ``workload`` with MetaSchedule in a fresh process (or reuse the finished run in ``work_dir``).

        ``on_trial`` sees MetaSchedule's trials while it runs (with its own timings; no configs).
        """
        work_dir = Path(work_dir)

        def replay(data: dict[str, Any]) -> MetaScheduleRun:
            run = self._run_from_json(data, work_dir)
            for trial in self._timeline(run, workload) if on_trial is not None else ():
                on_trial(trial)
            return run

        reused = reused_or_restarted(work_dir, self.reuse, replay)
        if reused is not None:
            return reused
        trials = budget if budget is not None else 100_000  # time budget only: MetaSchedule stops on the clock
        if self.timeout is not None:
            timeout = self.timeout
        elif budget is not None:
            timeout = 600.0 + budget * (5.0 + 20.0 * workload.gflop)
        else:
            timeout = 600.0 + 2.0 * time_budget
        log.info("MetaSchedule on %s: %s trials, logs in %s", workload.label, budget, work_dir)
        progress = ProgressFile(work_dir / "progress.jsonl", _trial_reporter(on_trial))
        data = run_job("metaschedule", workload.label, work_dir, target,
                       "tensorgym.baselines.metaschedule.job:tune_here",
                       (workload, target, trials, seed, str(work_dir), time_budget, self.trials_per_iter,
                        self.build_timeout, self.run_timeout, self.top_k), timeout, progress)
        data["budget"], data["time_budget"], data["seed"] = budget, time_budget, seed
        save_finished_run(work_dir, data)
        return self._run_from_json(data, work_dir)

    @staticmethod
    def _run_from_json(data: dict[str, Any], work_dir: Path) -> MetaScheduleRun:
        info = {k: data[k] for k in ("design_spaces", "unmatched", "mismatched", "tvm") if k in data}
        return MetaScheduleRun(signature=signature_from_json(data["signature"]), trials=data["trials"],
                               tune_s=data["tune_s"], top=list(data["top"]), work_dir=str(work_dir), info=info)

    @staticmethod
    def _timeline(run: MetaScheduleRun, workload: Workload) -> list[Trial]:
        """MetaSchedule's own trials, in the order their results were known, with its own timings."""
        trials: list[Trial] = []
        best = 0.0
        for number, entry in enumerate(run.trials, start=1):
            gflops = workload.gflops(entry["latency_s"]) if entry["latency_s"] else None
            best = max(best, gflops or 0.0)
            config = Config.from_json(entry["config"]) if entry["config"] else None
            trials.append(Trial(number, entry["elapsed_s"], config, entry["status"], gflops, best, True))
        return trials

    def _result(self, run: MetaScheduleRun, evaluator: Evaluator, seed: int, budget: int | None,
                time_budget: float | None, wall_s: float) -> TuningResult:
        space = evaluator.space
        workload = space.workload
        trials = self._timeline(run, workload)
        best = trials[-1].best_gflops if trials else 0.0
        # Re-time MetaSchedule's best schedules with tensorgym's measurer (checked, stored, not charged).
        configs = [Config.from_json(run.trials[i]["config"]) for i in run.top]
        records: list[Record] = evaluator.evaluate(configs) if configs else []
        retimed = [{"config": r.config.to_json(), "status": r.status.value, "gflops": r.gflops,
                    "latency_s": r.latency_s, "latency_cv": r.latency_cv, "error": r.error[:500],
                    "metaschedule_gflops": workload.gflops(run.trials[i]["latency_s"])}
                   for i, r in zip(run.top, records)]
        ok = [r for r in records if r.ok]
        top = max(ok, key=lambda r: r.gflops) if ok else None
        if best > 0 and not ok:
            log.warning("none of MetaSchedule's best %d schedules of %s ran correctly under tensorgym's measurer",
                        len(records), workload.label)
        extra = {
            "metaschedule_best_gflops": best, "metaschedule_tune_s": run.tune_s, "work_dir": run.work_dir,
            "log": str(Path(run.work_dir) / "metaschedule.log"), "retimed": retimed,
            "retimed_best_gflops": top.gflops if top else 0.0, **run.info,
        }
        return TuningResult(
            agent=self.name, workload=workload.label, workload_key=workload.key, space=space.name,
            target=space.target.fingerprint, seed=seed, budget=budget, time_budget=time_budget, trials=trials,
            best_config=top.config if top else None, best_gflops=top.gflops if top else 0.0,
            best_latency_s=top.latency_s if top else None, best_latency_cv=top.latency_cv if top else None,
            measured=len(trials), reused=0, wall_s=wall_s, extra=extra,
        )


def _trial_reporter(on_trial: Callable[[Trial], None] | None) -> Callable[[dict[str, Any]], None]:
    """Turns the job's progress lines into trials for ``on_trial`` (MetaSchedule's own timings, no configs)."""

    def report(entry: dict[str, Any]) -> None:
        if on_trial is not None:
            on_trial(Trial(entry["index"], entry["elapsed_s"], None, entry["status"], entry["gflops"],
                           entry["best_gflops"], True))

    return report
