"""What one fresh trial costs: tensorgym's agents beside TVM MetaSchedule, on the same layer, machine and run.

A trial's cost is the run's wall time over the trials it compiled and timed itself (``fresh``; trials the
database answered cost nothing and are not counted): compiling in the builder pool, loading, the NumPy
check, timing, and the agent's own work. One ``compare`` run per layer, every run into a fresh database
(so no trial is answered from an earlier one), vendors and re-timing off (they are not trials)::

    python bench/bench_trial_cost.py --out bench/reports/trial_cost.txt
    python bench/bench_trial_cost.py --envs Matmul-BERT-M0-v0 --budget 8 --out /tmp/cost.txt   # a smoke run
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tensorgym.baselines.compare import compare
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
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    if args.budget < 1:
        print("error: --budget must be at least 1", file=sys.stderr)
        return 2
    agents = args.agents.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tensorgym-cost-") as work:
        for env_id in args.envs.split(","):
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
    lines = header(f"Seconds per fresh trial: tensorgym's agents beside MetaSchedule ({args.budget} trials, seed "
                   f"{args.seed}, one run each, fresh databases)", local_cpu())
    lines += [format_table(rows, ["layer", "agent", "s / fresh trial", "MetaSchedule's / this",
                                  f"<= {TARGET_S} s"]),
              "", "s / fresh trial: the run's wall time over its trials compiled and timed in the run (build pool, "
                  "load, NumPy check, timing protocol and the agent's own work)."]
    emit("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
