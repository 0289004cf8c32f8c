"""``tensorgym compare ENV_ID ...``: several agents on several envs in one run; table, files and plots."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tensorgym.baselines.board import DEFAULT_TIME_POINTS, DEFAULT_TRIAL_POINTS, Leaderboard
from tensorgym.baselines.compare import (
    BACKENDS, DEFAULT_AGENTS, LANDSCAPE_AGENTS, LANDSCAPE_TIME_POINTS, LANDSCAPE_TRIAL_POINTS, busy_summary, compare,
)
from tensorgym.baselines.render import caption, text_table
from tensorgym.baselines.vendor import PER_CALL, best_vendor
from tensorgym.catalog import ENVS
from tensorgym.database import database_path, default_path
from tensorgym.measure.contention import is_busy
from tensorgym.workloads import SUPPORTED_DTYPES

from .args import add_board_arguments, add_run_arguments, add_ray_argument, add_rpc_argument, finite_float, rpc_target
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
    add_board_arguments(p, "compare-results", DEFAULT_TRIAL_POINTS, DEFAULT_TIME_POINTS)
    p.add_argument("--space", default=None, choices=tuple(ENVS),
                   help="the space the search agents tune in (default: each agent's own; mapping for int8/bf16)")
    p.add_argument("--dtype", default="float32", choices=SUPPORTED_DTYPES,
                   help="data type of the workloads (default: float32)")
    p.add_argument("--remeasure", type=int, default=3,
                   help="rounds of re-timing every run's best config and the vendors at the end (default: 3)")
    p.add_argument("--no-paired-vendor", action="store_true",
                   help="do not time each env's best winner against the vendor in one process after the re-timing "
                        "(by default it is, on this machine's CPU: the paired ratio does not carry what the "
                        "machine did between two separate timings)")
    p.add_argument("--native-blas", action="store_true",
                   help="clear OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the vendor processes (OpenBLAS picks its "
                        "kernel for this CPU)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plots")
    p.add_argument("--backend", default="tvm", choices=BACKENDS,
                   help="tvm: compile and time every kernel (default); landscape: answer every run from the "
                        "layer's shipped landscape (its whole benchmark space measured once on this CPU: nothing "
                        "compiled, scored against the true optimum), several runs at a time")
    p.add_argument("--landscape", default=None, metavar="CPU",
                   help="use the landscapes of this CPU folder (another machine's, named explicitly)")
    p.add_argument("--jobs", type=int, default=None,
                   help="landscape runs at a time, each in its own process (default: one per core)")
    add_ray_argument(p)
    add_rpc_argument(p)
    add_run_arguments(p)
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


def _landscape_agents(args: argparse.Namespace) -> str:
    """The agents of a landscape comparison: those asked for, or (for the default list, whose MetaSchedule peer
    compiles its own kernels) the landscape leaderboard's."""
    return ",".join(LANDSCAPE_AGENTS) if args.agents == ",".join(DEFAULT_AGENTS) else args.agents


def run(args: argparse.Namespace) -> int:
    shape = parse_shape(args.shape) or None
    db = database_path(args.db) if args.db is not None else default_path()
    target = rpc_target(args.rpc)
    landscape = args.backend == "landscape"
    board = compare(args.env_ids, _landscape_agents(args) if landscape else args.agents, budget=args.budget,
                    seeds=args.seeds, db=db, out_dir=args.out,
                    # argparse keeps the default object itself when an option is not given
                    time_points=(LANDSCAPE_TIME_POINTS if landscape and args.time_points is DEFAULT_TIME_POINTS
                                 else args.time_points),
                    trial_points=(LANDSCAPE_TRIAL_POINTS if landscape and args.trial_points is DEFAULT_TRIAL_POINTS
                                  else args.trial_points),
                    time_budget=args.time_budget, vendor=not args.no_vendor, plot=not args.no_plot,
                    progress=not args.quiet, remeasure=args.remeasure, shape=shape, native_blas=args.native_blas,
                    target=target, ray=args.ray, space=args.space, dtype=args.dtype,
                    agent_options=_agent_options(args), backend=args.backend, landscape=args.landscape, jobs=args.jobs,
                    paired_vendor=not args.no_paired_vendor)
    if landscape:
        print(f"landscapes: {', '.join(f.path for f in board.landscapes.values())}", file=sys.stderr)
        return report(board, args.out)
    # Named once compare() has checked every option and opened the database (it offers no earlier hook):
    # a refused command prints its error alone.
    print(f"database: {db}" + (f"; timing on {target.label}" if target is not None else "")
          + (f"; runs on the Ray cluster {args.ray}" if args.ray else ""), file=sys.stderr)
    return report(board, args.out)


def report(board: Leaderboard, out_dir: str) -> int:
    """Print a board (of ``compare`` or ``compare-network``): its table and caption, the vendor lines (each
    agent over the vendor's best; the best winner against a vendor in one process), a warning on stderr when the
    machine was busy, each failed run (the first line of its error) and where the files are. Returns the exit
    status: 1 when a run failed."""
    print()
    print(text_table(board))
    print(f"\n{caption(board)}")
    for line in vendor_lines(board) + board.paired_vendor_lines():
        print(line)
    warning = busy_summary(board)
    if warning:
        print(warning, file=sys.stderr)
    for error in board.errors:
        print(f"FAILED: {error['agent']} on {error['env']} (seed {error['seed']}): {error['error'].splitlines()[0]}")
    print(f"written to {Path(out_dir).resolve()} (compare.html, compare.csv, compare.json, compare.md, results/, "
          f"plots/)")
    return 1 if board.errors else 0


def vendor_lines(board: Leaderboard) -> list[str]:
    """One line per env with vendor timings: each agent's best (re-timed where it was, mean over seeds) over the
    vendor's best per-call reference, with the space each agent tuned in. The table lists them as rows apart; this
    puts them side by side, so that agents of different spaces (``--agents random,random-structured``) read as
    what each space reaches. Per call, because a compare run's kernels pack their inputs in every call."""
    lines = []
    for env_id in board.env_ids:
        per_call = best_vendor(board.vendor.get(env_id, []), PER_CALL)
        ref = per_call or best_vendor(board.vendor.get(env_id, []))
        if ref is None:
            continue
        # A first timing taken on a busy machine gives no ratio (the median of the re-timing rounds does).
        ref_gflops = ref.get("remeasured_gflops") or (None if is_busy(ref.get("contention")) else ref["gflops"])
        if not ref_gflops:
            continue
        parts = []
        for agent in board.agents:
            runs = board.results.get((env_id, agent), [])
            values = [v for v in (r.extra.get("remeasured_gflops")
                                  or (None if r.extra.get("best_busy") else r.best_gflops) for r in runs) if v]
            if values:
                parts.append(f"{agent} ({runs[0].space} space) {sum(values) / len(values) / ref_gflops:.2f}x")
        if parts:
            name = " ".join(part for part in (ref.get("library"), ref.get("layout")) if part)  # a network's: no layout
            lines.append(f"{env_id}, over the vendor's best{' per call' if per_call else ''} ({name}, {ref_gflops:.1f}"
                         f"{' re-timed' if ref.get('remeasured_gflops') else ''}): " + ", ".join(parts))
    return lines
