"""``tensorgym compare-network NETWORK``: several task schedulers on one network in one run; table, files and plot
(``compare`` over the network)."""

from __future__ import annotations

import argparse
import sys

from tensorgym.database import default_path
from tensorgym.networks import resolve_network

from .args import add_board_arguments
from .compare import report
from .tune_network import add_network_arguments, default_budget


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("compare-network", help="run several task schedulers on a network and tabulate them",
                              description="Run every task scheduler on the network with the same trial budget, one "
                                          "after the other, into one database; print the network's GFLOP/s (its "
                                          "layers' FLOPs over its estimated latency) after N trials and T seconds, "
                                          "the trials each needs to reach round-robin's final, and PyTorch's "
                                          "weighted sum over the same layers; write CSV/JSON/Markdown/HTML and a "
                                          "PNG, as compare does. Re-running resumes.")
    add_network_arguments(p)
    p.add_argument("--schedulers", default="round-robin,gradient,dual-task",
                   help="comma-separated schedulers (default: round-robin,gradient,dual-task; also "
                        "metaschedule-gradient and the metaschedule peer)")
    add_board_arguments(p, "compare-network-results", None, None)
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tensorgym.baselines.compare import compare

    network = resolve_network(args.network)
    db = args.db if args.db is not None else default_path()
    board = compare([network], args.schedulers, budget=default_budget(network, args), seeds=args.seeds, db=db,
                    space=args.space, dtype=args.dtype, time_budget=args.time_budget,
                    measure_per_round=args.measure_per_round, search=args.agent, out_dir=args.out,
                    trial_points=args.trial_points, time_points=args.time_points, vendor=not args.no_vendor,
                    plot=not args.no_plot, progress=not args.quiet)
    print(f"database: {db}", file=sys.stderr)
    return report(board, args.out)
