"""What one fresh trial costs: tensorgym's agents beside TVM MetaSchedule, on the same layer, machine and run.

A trial's cost is the run's wall time over the trials it compiled and timed itself (``fresh``; trials the
database answered cost nothing and are not counted): compiling in the builder pool, loading, the NumPy
check, timing, and the agent's own work. One ``compare`` run per layer, every run into a fresh database
(so no trial is answered from an earlier one), vendors and re-timing off (they are not trials)::

    python bench/bench_trial_cost.py --out bench/reports/trial_cost.txt
    python bench/bench_trial_cost.py --envs Matmul-BERT-M0-v0 --budget 8 --out /tmp/cost.txt   # a smoke run

``--stages DB ...`` adds where a trial's time goes, from the stage timings every record keeps (``build_s``: the
compile in its builder process; ``run_s``: its check and timing; ``wall_s``: what it added to the run's wall
time, builds running two at a time), beside the kernel's own latency and the calls timed: a layer whose kernels
run for tens of milliseconds spends its trial running them. Nothing is measured for it; the
databases of ``landscape measure`` or ``landscape sample`` hold thousands of records of a layer::

    python bench/bench_trial_cost.py --envs '' --stages work/landscapes-m3.db work/samples.db \
        --out bench/reports/trial_cost_stages.txt          # the stages alone (--envs '': no runs)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from tensorgym.baselines.compare import compare
from tensorgym.database import Database
from tensorgym.target import local_cpu
from tensorgym.text import format_table

from report_header import emit, header

ENVS = ("Conv2d-ResNet-R5-v0", "Matmul-BERT-M3-v0")
AGENTS = ("random", "ga", "metaschedule")
TARGET_S = 0.25  # the aim: mean seconds per fresh trial on every CPU


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(ENVS))
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--budget", type=int, default=64, help="trials per run (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stages", nargs="*", default=(),
                        help="also profile the stages of the records in these databases (nothing measured)")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    if args.budget < 1:
        print("error: --budget must be at least 1", file=sys.stderr)
        return 2
    agents = args.agents.split(",")
    envs = [e for e in args.envs.split(",") if e]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tensorgym-cost-") as work:
        for env_id in envs:
            board = compare([env_id], agents, budget=args.budget, seeds=[args.seed], db=Path(work) / f"{env_id}.db",
                            out_dir=Path(work) / env_id, vendor=False, plot=False, progress=False, remeasure=0)
            cost = {}
            for agent in agents:
                (result,) = board.results[(env_id, agent)]
                fresh = sum(1 for t in result.trials if t.fresh)
                cost[agent] = result.wall_s / fresh if fresh else None
            peer = cost.get("metaschedule")
            for agent in agents:
                seconds = cost[agent]
                rows.append([env_id, agent, f"{seconds:.3f}" if seconds is not None else "-",
                             f"{peer / seconds:.1f}x" if peer and seconds and agent != "metaschedule" else "-",
                             ("yes" if seconds <= TARGET_S else "no") if seconds is not None and
                             agent != "metaschedule" else "-"])
    title = (f"Seconds per fresh trial: tensorgym's agents beside MetaSchedule ({args.budget} trials, seed "
             f"{args.seed}, one run each, fresh databases)" if envs else "Where a trial's time goes, by stage")
    lines = header(title, local_cpu())
    if rows:
        lines += [format_table(rows, ["layer", "agent", "s / fresh trial", "MetaSchedule's / this",
                                      f"<= {TARGET_S} s"]),
                  "", "s / fresh trial: the run's wall time over its trials compiled and timed in the run (build "
                      "pool, load, NumPy check, timing protocol and the agent's own work).", ""]
    if args.stages:
        lines += stage_profile(args.stages)
    emit("\n".join(lines) + "\n", args.out)
    return 0


def stage_profile(paths: list[str]) -> list[str]:
    """Mean seconds per correct record, by stage, of each workload in each database (see the module docs)."""
    rows = []
    for path in paths:
        with Database(path, readonly=True) as database:
            labels = {key: workload.label for key, workload in database.workloads().items()}
            by_workload: dict[str, list] = {}
            for record in database.records():
                if record.ok:
                    by_workload.setdefault(record.workload, []).append(record)
        for key, records in sorted(by_workload.items()):
            run = statistics.fmean(r.run_s for r in records)
            rows.append([Path(path).name, labels.get(key, key), str(len(records)),
                         f"{statistics.fmean(r.build_s for r in records):.3f}", f"{run:.3f}",
                         f"{statistics.fmean(r.wall_s for r in records):.3f}",
                         f"{1e3 * statistics.fmean(r.latency_s for r in records):.1f}",
                         f"{1e3 * statistics.median(r.latency_s for r in records):.1f}",
                         f"{statistics.fmean(r.number * len(r.samples) for r in records):.1f}"])
    return ["Where a trial's time goes, from the records' own stage timings (mean seconds per correct record):",
            format_table(rows, ["database", "workload", "records", "build s", "check+timing s", "wall s",
                                "kernel ms (mean)", "kernel ms (median)", "timed calls"]),
            "", "build s: the compile in its builder process (two run at once on 2 cores); check+timing s: the "
                "NumPy check and the timing protocol; wall s: what the record added to the run's wall time; "
                "timed calls: number x samples (the first call and the check's come on top)."]


if __name__ == "__main__":
    sys.exit(main())
