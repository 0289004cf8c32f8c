"""``tensorgym compare ENV_ID ...``: several agents on several envs in one run; table, files and plots."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tensorgym.baselines.board import DEFAULT_TIME_POINTS, DEFAULT_TRIAL_POINTS
from tensorgym.baselines.compare import DEFAULT_AGENTS, busy_summary, compare
from tensorgym.baselines.render import caption, text_table
from tensorgym.catalog import ENVS
from tensorgym.database import database_path, default_path
from tensorgym.workloads import SUPPORTED_DTYPES

from .args import add_ray_argument, add_rpc_argument, finite_float, float_list, int_list, rpc_target, seed_list
from .shapes import parse_shape


def add_parser(subparsers) -> None:
    """Define ``tensorgym compare`` on the CLI's subparsers; returns the parser."""
    p = subparsers.add_parser("compare", help="run several agents on several envs and tabulate them",
                              description="Run every agent on every env with the same measurement budget, one "
                                          "after the other, into one database; print the table and write "
                                          "CSV/JSON/Markdown and PNG plots. Re-running resumes.")
    p.add_argument("env_ids", nargs="+", metavar="ENV_ID", help="e.g. Conv2d-ResNet-R5-v0 Matmul-BERT-M3-v0")
    p.add_argument("--shape", help="shape of the parametric ids tensorgym/Conv2d-v0 or tensorgym/Matmul-v0, "
                                   "e.g. M=512,N=768,K=3072")
    p.add_argument("--agents", default=",".join(DEFAULT_AGENTS),
                   help=f"comma-separated agent names (default: {','.join(DEFAULT_AGENTS)})")
    p.add_argument("--policy", help="policy file of the rl agent (written by `tensorgym train`)")
    p.add_argument("--model", help="predictor file of the one-shot agent (written by `tensorgym oneshot train`)")
    p.add_argument("--top-k", type=int, help="configs the one-shot agent measures (default: 32)")
    p.add_argument("--budget", type=int, default=128, help="measurements per run (default: 128)")
    p.add_argument("--time-budget", type=finite_float, default=None,
                   help="seconds of tuning clock per run (default: none)")
    p.add_argument("--seeds", type=seed_list, default=3, help="number of seeds, or a list like 0,1,2 (default: 3)")
    p.add_argument("--db", default=None, help=f"SQLite database all runs share (default: $TENSORGYM_DB or "
                                              f"{default_path()})")
    p.add_argument("--out", default="compare-results", help="output directory (default: compare-results)")
    p.add_argument("--trial-points", type=int_list, default=DEFAULT_TRIAL_POINTS,
                   help="measurement counts the table reads (default: 16,32,64,128)")
    p.add_argument("--time-points", type=float_list, default=DEFAULT_TIME_POINTS,
                   help="seconds of tuning clock the table reads (default: 60,120)")
    p.add_argument("--space", default=None, choices=tuple(ENVS),
                   help="the space the search agents tune in (default: each agent's own; mapping for int8/bf16)")
    p.add_argument("--dtype", default="float32", choices=SUPPORTED_DTYPES,
                   help="data type of the workloads (default: float32)")
    p.add_argument("--no-vendor", action="store_true", help="skip timing the vendor libraries")
    p.add_argument("--remeasure", type=int, default=3,
                   help="rounds of re-timing every run's best config and the vendors at the end (default: 3)")
    p.add_argument("--native-blas", action="store_true",
                   help="clear OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the vendor processes (OpenBLAS picks its "
                        "kernel for this CPU)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plots")
    add_ray_argument(p)
    add_rpc_argument(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def _agent_options(args: argparse.Namespace) -> dict[str, dict]:
    """Options of the agents that take files: ``--policy`` for rl, ``--model`` / ``--top-k`` for one-shot."""
    options: dict[str, dict] = {}
    if args.policy is not None:
        options["rl"] = {"policy": args.policy}
    one_shot = {k: v for k, v in (("model", args.model), ("k", args.top_k)) if v is not None}
    if one_shot:
        options["one-shot"] = one_shot
    return options


def run(args: argparse.Namespace) -> int:
    shape = parse_shape(args.shape) or None
    db = database_path(args.db) if args.db is not None else default_path()
    target = rpc_target(args.rpc)
    board = compare(args.env_ids, args.agents, budget=args.budget, seeds=args.seeds, db=db,
                    time_points=args.time_points, trial_points=args.trial_points, out_dir=args.out,
                    time_budget=args.time_budget, vendor=not args.no_vendor, plot=not args.no_plot,
                    progress=not args.quiet, remeasure=args.remeasure, shape=shape, native_blas=args.native_blas,
                    target=target, ray=args.ray, space=args.space, dtype=args.dtype,
                    agent_options=_agent_options(args))
    # Named once compare() has checked every option and opened the database (it offers no earlier hook):
    # a refused command prints its error alone, as compare-network does.
    print(f"database: {db}" + (f"; timing on {target.label}" if target is not None else "")
          + (f"; runs on the Ray cluster {args.ray}" if args.ray else ""), file=sys.stderr)
    return report(text_table(board), caption(board), board.errors,
                  lambda e: f"{e['agent']} on {e['env']} (seed {e['seed']})", f"{Path(args.out).resolve()} "
                  f"(compare.html, compare.csv, compare.json, compare.md, results/, plots/)", busy_summary(board))


def report(table: str, note: str, errors: list[dict], which: Callable[[dict], str], written: str,
           warning: str = "") -> int:
    """Print a board (of ``compare`` or ``compare-network``): its table and caption (``note``), a ``warning`` on
    stderr, each failed run (``which`` run, the first line of its error) and where the files are (``written``).
    Returns the exit status: 1 when a run failed."""
    print()
    print(table)
    print(f"\n{note}")
    if warning:
        print(warning, file=sys.stderr)
    for error in errors:
        print(f"FAILED: {which(error)}: {error['error'].splitlines()[0]}")
    print(f"written to {written}")
    return 1 if errors else 0
