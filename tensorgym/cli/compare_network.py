"""``tensorgym compare-network NETWORK``: several task schedulers on one network in one run; table, files and plot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tensorgym.database import default_path
from tensorgym.networks import resolve_network
from tensorgym.tuner import check_budget

from .args import float_list, int_list, seed_list
from .compare import report
from .tune_network import add_network_arguments, default_budget


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("compare-network", help="run several task schedulers on a network and tabulate them",
                              description="Run every task scheduler on the network with the same trial budget, one "
                                          "after the other, into one database; print the estimated network latency "
                                          "after N trials and T seconds, the trials each needs to reach "
                                          "round-robin's final latency, and PyTorch's on the same layers; write "
                                          "CSV/JSON/Markdown and a PNG. Re-running resumes.")
    add_network_arguments(p)
    p.add_argument("--schedulers", default="round-robin,gradient,dual-task",
                   help="comma-separated schedulers (default: round-robin,gradient,dual-task; also "
                        "metaschedule-gradient and the metaschedule peer)")
    p.add_argument("--seeds", type=seed_list, default=3, help="number of seeds, or a list like 0,1,2 (default: 3)")
    p.add_argument("--out", default="compare-network-results", help="output directory")
    p.add_argument("--trial-points", type=int_list, default=None,
                   help="trial counts the table reads (default: 25/50/100 %% of the budget)")
    p.add_argument("--time-points", type=float_list, default=None,
                   help="seconds of tuning clock the table reads (default: 25/50/100 %% of the shortest run)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tensorgym.baselines.network_compare import compare_network
    from tensorgym.baselines.network_render import caption, text_table

    network = resolve_network(args.network)
    budget = default_budget(network, args)
    check_budget(budget, args.time_budget)
    db = args.db if args.db is not None else default_path()
    board = compare_network(network, args.schedulers, budget=budget, seeds=args.seeds, db=db, space=args.space,
                            dtype=args.dtype, time_budget=args.time_budget,
                            measure_per_round=args.measure_per_round, agent=args.agent, out_dir=args.out,
                            trial_points=args.trial_points, time_points=args.time_points,
                            vendor=not args.no_vendor, make_plot=not args.no_plot, progress=not args.quiet)
    print(f"database: {db}", file=sys.stderr)
    return report(text_table(board), caption(board), board.errors, lambda e: f"{e['scheduler']} (seed {e['seed']})",
                  f"{Path(args.out).resolve()} (compare_network.csv, .json, .md, .png, results/)")
