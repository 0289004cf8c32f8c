"""The ``compare`` table for R5, M3 and a YOLO layer, budget 128, 3 seeds.

Runs every agent (random, ga, dgd, optuna, metaschedule) on every env with
the same measurement budget, one run at a time on this machine, into one
database, times the vendor libraries, and prints the table; then prints
where DGD and GA stand against the targets the issue names (measured on this
machine type before this work: MetaSchedule at 200 trials 93 GFLOP/s on R5
and 108 on M3, single-threaded; oneDNN 177.5 on R5; NumPy 185 on M3) and how
many measurements each agent needs to reach 95 % of its final best.

The defaults take hours (5 agents x 3 envs x 3 seeds x 128 measurements);
every setting is a flag, e.g. a smoke run::

    python bench/bench_compare.py --envs Matmul-BERT-M0-v0 --agents random,optuna --budget 8 --seeds 1 \\
        --out /tmp/compare-smoke --db /tmp/compare-smoke.db

Re-running with the same ``--out`` and ``--db`` resumes: finished runs are
read back, interrupted ones are answered from the database.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from tensorgym.baselines.board import DEFAULT_TIME_POINTS, DEFAULT_TRIAL_POINTS, REACH_FRACTION
from tensorgym.baselines.compare import DEFAULT_AGENTS, compare
from tensorgym.cli.args import add_board_arguments, add_run_arguments
from tensorgym.cli.compare import report

DEFAULT_ENVS = ("Conv2d-ResNet-R5-v0", "Matmul-BERT-M3-v0", "Conv2d-YOLO-Y7-v0")
# The reference figures (GFLOP/s), measured on this machine type before this work.
TARGETS = {
    "Conv2d-ResNet-R5-v0": {"MetaSchedule, 200 trials, 1 thread (probe)": 93.0, "oneDNN NCHW (issue)": 177.5},
    "Matmul-BERT-M3-v0": {"MetaSchedule, 128-200 trials, 1 thread (probe)": 108.0, "NumPy (issue)": 185.0},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(DEFAULT_ENVS), help="comma-separated env ids")
    parser.add_argument("--agents", default=",".join(DEFAULT_AGENTS),
                        help=f"comma-separated agents (default: {','.join(DEFAULT_AGENTS)})")
    parser.add_argument("--budget", type=int, default=128, help="measurements per run (default: 128)")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds of tuning clock per run")
    add_board_arguments(parser, "bench-compare", DEFAULT_TRIAL_POINTS, DEFAULT_TIME_POINTS)
    add_run_arguments(parser, "bench-compare.db")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    envs = [e.strip() for e in args.envs.split(",") if e.strip()]
    t0 = time.monotonic()
    board = compare(envs, args.agents, budget=args.budget, seeds=args.seeds, db=args.db,
                    time_points=args.time_points, trial_points=args.trial_points, out_dir=args.out,
                    time_budget=args.time_budget, vendor=not args.no_vendor, progress=not args.quiet,
                    native_blas=True)
    wall = time.monotonic() - t0

    print(f"\n== compare: {', '.join(envs)}; agents {', '.join(board.agents)}; budget {args.budget}; "
          f"seeds {board.seeds} ({wall / 60:.1f} min); database {args.db} ==")
    status = report(board, args.out)
    reach = f"to{round(REACH_FRACTION * 100)}%"
    print("metaschedule: @ columns are MetaSchedule's own timings, final its best re-timed by tensorgym.")

    for env_id in envs:
        vendors = {f"{v['library']} {v['layout']}": v["gflops"]
                   for v in board.vendor.get(env_id, []) if v.get("gflops")}
        references = {**TARGETS.get(env_id, {}), **{f"{k} (measured now)": v for k, v in vendors.items()}}
        print(f"\n{env_id} ({board.labels.get(env_id, '')}):")
        for agent in board.agents:
            stats = board.stats(env_id, agent)
            final = stats["final"]
            if final.mean is None:
                print(f"  {agent:13s} no result")
                continue
            against = ", ".join(f"{final.mean / v:.2f}x {k}" for k, v in references.items())
            print(f"  {agent:13s} final {final.format()} GFLOP/s; {reach} {stats[reach].format(0)} measurements"
                  + (f"; {against}" if against else ""))
    return status


if __name__ == "__main__":
    sys.exit(main())
