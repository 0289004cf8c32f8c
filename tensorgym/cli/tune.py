"""``tensorgym tune ENV_ID``: tune one environment with a search agent, then compare with the vendor library."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from tensorgym.catalog import ENVS, make_agent
from tensorgym.database import default_path
from tensorgym.envs.registration import make_env, workload_of
from tensorgym.target import resolve_target
from tensorgym.workloads import SUPPORTED_DTYPES
from tensorgym.text import format_table
from tensorgym.tuner import ProgressBarCallback, check_budget

from .shapes import parse_shape


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("tune", help="tune one environment with a search agent")
    p.add_argument("env_id", help="e.g. Conv2d-ResNet-R5-v0 (see `tensorgym list`)")
    p.add_argument("--shape", help="shape of tensorgym/Conv2d-v0 or tensorgym/Matmul-v0, e.g. M=512,N=768,K=3072")
    p.add_argument("--agent", default="random", help="search agent (default: random)")
    p.add_argument("--target", default="llvm", help="llvm (this CPU, default) or cuda (this machine's GPU)")
    p.add_argument("--dtype", choices=SUPPORTED_DTYPES, default=None,
                   help="input dtype (default: the layer's, float32); float16/bfloat16 sum in float32")
    p.add_argument("--space", default=None, choices=tuple(ENVS),
                   help="search space (default: the agent's, tiles for most)")
    p.add_argument("--features", choices=("af", "generic"),
                   help="cost-model features of the ga / dgd agents (default: ga generic, dgd af)")
    p.add_argument("--budget", type=int, default=64, help="measurements (default: 64)")
    p.add_argument("--time-budget", type=float, default=None, help="seconds of tuning (default: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db", default=None, help=f"SQLite database; resumes if it exists (default: $TENSORGYM_DB or "
                                              f"{default_path()})")
    p.add_argument("--json", help="also write the tuning history to this JSON file")
    p.add_argument("--no-vendor", action="store_true", help="skip timing the vendor library")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Everything that can be refused is checked before the database file is created.
    workload = workload_of(args.env_id, parse_shape(args.shape))
    if args.dtype:
        workload = dataclasses.replace(workload, dtype=args.dtype)
    target = resolve_target(args.target)
    agent = make_agent(args.agent, **({"features": args.features} if args.features else {}))
    space = args.space or agent.env_space
    agent.check_space(space)
    check_budget(args.budget, args.time_budget)
    db = args.db if args.db is not None else default_path()
    print(f"database: {db}", file=sys.stderr)
    env = make_env(workload, space=space, db=db, target=target)
    try:
        result = agent.tune(env, budget=args.budget, time_budget=args.time_budget, seed=args.seed,
                            callback=None if args.quiet else ProgressBarCallback())
    finally:
        env.close()
    if args.json:
        result.save(args.json)

    print(f"\n{args.env_id}: {workload.label}, {workload.describe()}, {workload.gflop:.4g} GFLOP")
    print(f"agent {result.agent} (seed {result.seed}) in the {result.space} space: {len(result.trials)} trials "
          f"({result.measured} measured now, {result.reused} from {db}), {result.wall_s:.1f} s")
    rows = []
    if result.best_config is not None:
        rows.append((f"tensorgym {result.agent} best", f"{result.best_gflops:.1f}",
                     f"{result.best_latency_s * 1e3:.3f}", f"{result.best_latency_cv * 100:.1f}", ""))
    else:
        print("no config ran correctly; see `tensorgym show` for the errors")
    if not args.no_vendor:
        from tensorgym.baselines import VendorUnavailable, time_vendor

        try:
            ref = time_vendor(workload, target=target)
            rows.append((f"{ref.library} {ref.layout}", f"{ref.gflops:.1f}", f"{ref.latency_s * 1e3:.3f}",
                         f"{ref.latency_cv * 100:.1f}", ""))
            if result.best_gflops:
                rows[0] = (*rows[0][:4], f"{result.best_gflops / ref.gflops:.2f}x vendor")
        except VendorUnavailable as exc:
            print(f"(no vendor reference: {exc})")
    if rows:
        print(format_table(rows, ("kernel", "GFLOP/s", "latency ms", "cv %", "")))
    if result.best_config is not None:
        print(f"best config: {json.dumps(result.best_config.to_json())}")
    return 0
