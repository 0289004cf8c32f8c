"""What one fresh trial costs: tensorgym's agents, in the tiles and microkernel spaces, beside TVM MetaSchedule,
on the same layer, machine and run.

A trial's cost is the run's wall time over the trials it compiled and timed itself (``fresh``; trials the
database answered cost nothing and are not counted): compiling in the builder pool, loading, the NumPy
check, timing, and the agent's own work. One ``compare`` run per layer and space (the tiles space with
random search, the GA and MetaSchedule; the microkernel space, as a user gets it from ``make_env(...,
space="microkernel")``, with its own random-structured sampler), each into a fresh database (so no trial is
answered from an earlier one), vendors and re-timing off (they are not trials). Then where the trials' time
went, by stage, from the records of those databases (see ``--stages``)::

    python bench/bench_trial_cost.py --out bench/reports/trial_cost.txt
    python bench/bench_trial_cost.py --envs Matmul-BERT-M0-v0 --budget 8 --out /tmp/cost.txt   # a smoke run

``--stages DB ...`` profiles other databases as well, from the stage timings every record keeps
(``build_s``: the compile in its builder process; ``run_s``: its check and timing; ``wall_s``: what it added to
the run's wall time, builds running two at a time), beside the kernel's own latency and the calls timed: a
layer whose kernels run for tens of milliseconds spends its trial running them. Nothing is measured for it; the
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
AGENTS = {"tiles": ("random", "ga", "metaschedule"), "microkernel": ("random-structured",)}  # space -> agents
PEER = "metaschedule"
TARGET_S = 0.25  # the aim: mean seconds per fresh trial on every CPU


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(ENVS))
    parser.add_argument("--spaces", default=",".join(AGENTS), help=f"spaces to run (of {', '.join(AGENTS)})")
    parser.add_argument("--budget", type=int, default=64, help="trials per run (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stages", nargs="*", default=(),
                        help="also profile the stages of the records in these databases (nothing measured)")
    parser.add_argument("--keep", default=None, help="keep the runs' databases in this folder (default: discarded)")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    if args.budget < 1:
        print("error: --budget must be at least 1", file=sys.stderr)
        return 2
    spaces = [name for name in args.spaces.split(",") if name]
    unknown = [name for name in spaces if name not in AGENTS]
    if unknown:
        print(f"error: unknown space {unknown[0]!r} (choose from {', '.join(AGENTS)})", file=sys.stderr)
        return 2
    envs = [e for e in args.envs.split(",") if e]
    rows, databases = [], []
    with tempfile.TemporaryDirectory(prefix="tensorgym-cost-") as scratch:
        work = Path(args.keep or scratch)
        work.mkdir(parents=True, exist_ok=True)
        for env_id in envs:
            runs, peer = [], None
            for space in spaces:
                db = work / f"{env_id}-{space}.db"
                board = compare([env_id], list(AGENTS[space]), budget=args.budget, seeds=[args.seed], db=db,
                                out_dir=work / f"{env_id}-{space}", space=space, vendor=False, plot=False,
                                progress=False, remeasure=0)
                databases.append(str(db))
                for agent in AGENTS[space]:
                    (result,) = board.results[(env_id, agent)]
                    fresh = sum(1 for t in result.trials if t.fresh)
                    seconds = result.wall_s / fresh if fresh else None
                    if agent == PEER:
                        peer = seconds
                    runs.append((env_id, space, agent, seconds))
            rows += [cost_row(*run, peer) for run in runs]
        title = (f"Seconds per fresh trial: tensorgym's agents beside MetaSchedule ({args.budget} trials, seed "
                 f"{args.seed}, one run each, fresh databases)" if envs else "Where a trial's time goes, by stage")
        lines = header(title, local_cpu())
        if rows:
            lines += [format_table(rows,
                                   ["layer", "space", "agent", "s / fresh trial", "MetaSchedule's / this",
                                    f"<= {TARGET_S} s"]),
                      "", "s / fresh trial: the run's wall time over its trials compiled and timed in the run (build "
                          "pool, load, NumPy check, timing protocol and the agent's own work).", ""]
        if databases or args.stages:
            lines += stage_profile([*databases, *args.stages])
    emit("\n".join(lines) + "\n", args.out)
    return 0


def cost_row(env_id: str, space: str, agent: str, seconds: float | None, peer: float | None) -> list[str]:
    """One row of the cost table: seconds per fresh trial, how many times cheaper than the peer's, the aim met."""
    mine = agent != PEER and seconds is not None
    return [env_id, space, agent, f"{seconds:.3f}" if seconds is not None else "-",
            f"{peer / seconds:.1f}x" if mine and peer else "-",
            ("yes" if seconds <= TARGET_S else "no") if mine else "-"]


def stage_profile(paths: list[str]) -> list[str]:
    """Mean seconds per correct record, by stage, of each workload and space in each database (see the module
    docs)."""
    rows = []
    for path in paths:
        with Database(path, readonly=True) as database:
            labels = {key: workload.label for key, workload in database.workloads().items()}
            groups: dict[tuple[str, str], list] = {}
            for record in database.records():
                if record.ok:
                    groups.setdefault((record.workload, record.space), []).append(record)
        for (key, space), records in sorted(groups.items()):
            rows.append([Path(path).name, labels.get(key, key), space, str(len(records)),
                         f"{statistics.fmean(r.build_s for r in records):.3f}",
                         f"{statistics.fmean(r.run_s for r in records):.3f}",
                         f"{statistics.fmean(r.wall_s for r in records):.3f}",
                         f"{1e3 * statistics.fmean(r.latency_s for r in records):.1f}",
                         f"{1e3 * statistics.median(r.latency_s for r in records):.1f}",
                         f"{statistics.fmean(r.number * len(r.samples) for r in records):.1f}"])
    return ["Where a trial's time goes, from the records' own stage timings (mean seconds per correct record):",
            format_table(rows, ["database", "workload", "space", "records", "build s", "check+timing s", "wall s",
                                "kernel ms (mean)", "kernel ms (median)", "timed calls"]),
            "", "build s: the compile in its builder process (two run at once on 2 cores); check+timing s: the "
                "NumPy check and the timing protocol; wall s: what the record added to the run's wall time; "
                "timed calls: number x samples (the first call and the check's come on top)."]


if __name__ == "__main__":
    sys.exit(main())
