"""The ``tensorgym`` command line.

  tensorgym list [--suite NAME]                 every registered environment, its shape and GFLOP count
  tensorgym tune ENV_ID [--agent random] [--budget N] [--db PATH] [--shape M=..,N=..,K=..] ...
                                                tune one env; re-running with the same --db resumes
  tensorgym compare ENV_ID [ENV_ID ...] --agents random,ga,dgd --budget N --seeds S
                                                every agent on every env, one run: table, CSV/JSON, PNG
  tensorgym show PATH                           the best record per workload in a database
  tensorgym microkernels calibrate [--quick]    measure this machine's microkernel catalogue (once)
  tensorgym microkernels show                   the kept microkernels and their % of the measured peak
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from .text import format_table

DEFAULT_DB = "tensorgym.db"


def cmd_list(args: argparse.Namespace) -> int:
    from .suites import SUITES, env_id

    rows = []
    for suite in SUITES.values():
        if args.suite and args.suite.lower() not in (suite.name.lower(), suite.env_prefix.lower()):
            continue
        for wl in suite.layers:
            rows.append((env_id(suite, wl), suite.name, wl.describe(), f"{wl.gflop:.4g}"))
    if not rows:
        print(f"no suite matches {args.suite!r}; suites: {', '.join(SUITES)}", file=sys.stderr)
        return 2
    print(format_table(rows, ("env id", "suite", "shape", "GFLOP")))
    print("\nCustom shapes: gym.make('tensorgym/Conv2d-v0', C=.., H=.., F=.., R=..) or "
          "gym.make('tensorgym/Matmul-v0', M=.., N=.., K=..); on the command line "
          "`tensorgym tune tensorgym/Matmul-v0 --shape M=..,N=..,K=..`")
    return 0


def _make_env(env_id: str, space: str, db: str, shape: str | None):
    import gymnasium as gym

    from .envs import parse_shape, shape_kwargs

    try:
        return gym.make(env_id, space=space, db=db, **shape_kwargs(env_id, parse_shape(shape or "")))
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None


def cmd_tune(args: argparse.Namespace) -> int:
    from .agents import make_agent
    from .agents.base import tuning_env

    env = _make_env(args.env_id, args.space, args.db, args.shape)
    base = tuning_env(env)
    options = {"features": args.features} if args.features else {}
    try:
        agent = make_agent(args.agent, **options)
        result = agent.tune(env, budget=args.budget, time_budget=args.time_budget, seed=args.seed,
                            progress=not args.quiet)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    finally:
        env.close()
    if args.json:
        result.save(args.json)

    wl = base.workload
    print(f"\n{args.env_id}: {wl.label}, {wl.describe()}, {wl.gflop:.4g} GFLOP")
    print(f"agent {result.agent} (seed {result.seed}) in the {result.space} space: {len(result.trials)} trials "
          f"({result.measured} measured now, {result.reused} from {args.db}), {result.wall_s:.1f} s")
    rows = []
    if result.best_config is not None:
        rows.append((f"tensorgym {result.agent} best", f"{result.best_gflops:.1f}",
                     f"{result.best_latency_s * 1e3:.3f}", f"{result.best_latency_cv * 100:.1f}", ""))
    else:
        print("no config ran correctly; see `tensorgym show` for the errors")
    if not args.no_vendor:
        from .baselines import VendorUnavailable, time_vendor

        try:
            ref = time_vendor(wl)
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


def cmd_show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .database import Database

    if not Path(args.path).exists():
        raise SystemExit(f"error: {args.path} does not exist")
    with Database(args.path) as db:
        rows = []
        for s in db.summaries():
            best = s.best
            rows.append((s.label, s.space, f"{s.ok}/{s.records}",
                         f"{best.gflops:.1f}" if best else "-", f"{best.latency_s * 1e3:.3f}" if best else "-",
                         f"{best.latency_cv * 100:.1f}" if best else "-",
                         json.dumps(best.config.to_json(), separators=(",", ":")) if best else ""))
    if not rows:
        print(f"{args.path} holds no records")
        return 0
    print(format_table(rows, ("workload", "space", "ok/records", "best GFLOP/s", "latency ms", "cv %", "best config")))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .envs import ENV_CLASSES

    parser = argparse.ArgumentParser(prog="tensorgym", description="Tune tensor kernels as Gymnasium environments.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list the registered environments")
    p.add_argument("--suite", help="only this suite (e.g. ResNet-50, BERT)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("tune", help="tune one environment with a search agent")
    p.add_argument("env_id", help="e.g. Conv2d-ResNet-R5-v0 (see `tensorgym list`)")
    p.add_argument("--shape", help="shape of tensorgym/Conv2d-v0 or tensorgym/Matmul-v0, e.g. M=512,N=768,K=3072")
    p.add_argument("--agent", default="random", help="search agent (default: random)")
    p.add_argument("--space", default="tiles", choices=tuple(ENV_CLASSES),
                   help="search space (default: tiles)")
    p.add_argument("--features", choices=("af", "generic"),
                   help="cost-model features of the ga / dgd agents (default: ga generic, dgd af)")
    p.add_argument("--budget", type=int, default=64, help="measurements (default: 64)")
    p.add_argument("--time-budget", type=float, default=None, help="seconds of tuning (default: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db", default=DEFAULT_DB, help=f"SQLite database; resumes if it exists (default: {DEFAULT_DB})")
    p.add_argument("--json", help="also write the tuning history to this JSON file")
    p.add_argument("--no-vendor", action="store_true", help="skip timing the vendor library")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_tune)

    from .baselines.leaderboard import add_compare_parser
    from .cli_microkernels import add_microkernels_parser

    add_compare_parser(sub)
    add_microkernels_parser(sub)

    p = sub.add_parser("show", help="best record per workload in a database")
    p.add_argument("path", help="database file")
    p.set_defaults(func=cmd_show)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if getattr(args, "budget", None) is not None and args.budget < 1:
        raise SystemExit("error: --budget must be >= 1")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
