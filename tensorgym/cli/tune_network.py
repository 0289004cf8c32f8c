"""``tensorgym tune-network NETWORK``: tune every layer of a network under one budget with a task scheduler,
then compare the estimated network latency with PyTorch's on the same layers."""

from __future__ import annotations

import argparse
import sys

from tensorgym.catalog import SCHEDULERS, make_scheduler
from tensorgym.database import default_path
from tensorgym.envs.network_env import NetworkEnv
from tensorgym.networks import NETWORKS, resolve_network
from tensorgym.tuner import ProgressBarCallback, check_budget

from .args import add_run_arguments
from .tune import trials_line

BUDGET_PER_TASK = 64  # default budget: 64 trials per live layer (one Ansor round each)


def add_network_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments ``tune-network`` and ``compare-network`` share."""
    p.add_argument("network", help=f"a built-in network ({', '.join(NETWORKS)}) or a JSON/TOML file of layers "
                                   f"and counts")
    p.add_argument("--space", default="tiles", help="search space of every layer (default: tiles)")
    p.add_argument("--dtype", default=None, help="data type of every layer (default: the network's, float32)")
    p.add_argument("--budget", type=int, default=None,
                   help=f"trials over the whole network (default: {BUDGET_PER_TASK} x the layers of positive count)")
    p.add_argument("--time-budget", type=float, default=None, help="seconds of tuning clock (default: none)")
    p.add_argument("--measure-per-round", type=int, default=None,
                   help="trials per round (default: Ansor's min(64, budget / layers))")
    p.add_argument("--agent", default=None, help="search inside each layer (default: ga in the tiles space, "
                                                 "random elsewhere)")
    add_run_arguments(p)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("tune-network", help="tune a network's layers under one budget with a task scheduler",
                              description="Tune every layer of a network under one shared trial budget; a task "
                                          "scheduler decides which layer (and mapping candidate) gets each round. "
                                          "Re-running with the same --db and --seed resumes.")
    add_network_arguments(p)
    p.add_argument("--scheduler", default="dual-task", help=f"task scheduler: {', '.join(SCHEDULERS)} "
                                                            f"(default: dual-task)")
    p.add_argument("--kappa", type=float, default=None, help="dual-task: share of a layer's candidates kept (0.2)")
    p.add_argument("--beta", type=float, default=None, help="dual-task: boost of candidates dropped last round (0.2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the run (a TuningResult) to this JSON file")
    p.set_defaults(func=run)


def default_budget(network, args: argparse.Namespace) -> int | None:
    """``--budget``, or 64 trials per live layer when neither a budget nor a time budget is given."""
    if args.budget is None and args.time_budget is None:
        return BUDGET_PER_TASK * len(network.live_tasks)
    return args.budget


def run(args: argparse.Namespace) -> int:
    # Everything that can be refused is checked before the database file is created.
    network = resolve_network(args.network)
    options = {k: v for k, v in (("kappa", args.kappa), ("beta", args.beta)) if v is not None}
    scheduler = make_scheduler(args.scheduler, **options)
    budget = default_budget(network, args)
    check_budget(budget, args.time_budget)
    db = args.db if args.db is not None else default_path()
    env = NetworkEnv(network, space=args.space, dtype=args.dtype, db=db, agent=args.agent)  # opens the database
    print(f"database: {db}", file=sys.stderr)
    try:
        result = scheduler.tune(env, budget=budget, time_budget=args.time_budget, seed=args.seed,
                                measure_per_round=args.measure_per_round,
                                callback=None if args.quiet else ProgressBarCallback())
        vendor = None
        if not args.no_vendor:
            from tensorgym.baselines.vendor import time_network_references

            vendor = time_network_references(env.network, progress=not args.quiet)[0]
            result.extra["vendor"] = vendor
    finally:
        env.close()
    if args.json:
        result.save(args.json)

    from tensorgym.baselines.render import task_table

    dtype = env.network.tasks[0].workload.dtype
    print(f"\n{env.network.name}, {result.space} space, {dtype}: {result.agent} scheduler (seed {result.seed}), "
          f"{result.search} inside each layer, {result.measure_per_round} trials per round")
    print(f"{trials_line(result, db)}\n")
    print(task_table(result, vendor))
    total = result.best_latency_s
    if total is None:
        print("\nno estimate: a layer has no correct kernel yet (see `tensorgym show` for the errors)")
    else:
        line = f"\nestimated network latency: {total * 1e3:.4f} ms ({result.best_gflops:.1f} GFLOP/s)"
        if vendor is not None and vendor["latency_s"]:
            line += (f"; {vendor['library']} on the same layers: {vendor['latency_s'] * 1e3:.4f} ms "
                     f"({vendor['latency_s'] / total:.2f}x)")
        print(line)
    return 0
