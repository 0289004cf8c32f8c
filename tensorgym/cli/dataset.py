"""``tensorgym dataset build|export|stats``: a measurement dataset across many layers (seed 004).

  tensorgym dataset build --tasks 64 --per-task 64 --db data.db [--include "Conv2d-ResNet-R*"]
        sample layers from the shape prior (plus the suite layers asked for), explore each one
        (GA, then hop walks) and store every measurement; running it again resumes
  tensorgym dataset export data.db out.parquet [--format parquet|csv]
        one row per record, for pandas
  tensorgym dataset stats data.db
        records, failures and throughput per layer, and what the replay backend can use
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tensorgym.database import Database, default_path
from tensorgym.dataset.build import build_dataset, plan_tasks
from tensorgym.dataset.export import FORMATS, export_dataset
from tensorgym.dataset.priors import OPS, WEIGHTS, ShapePrior
from tensorgym.dataset.stats import dataset_stats
from tensorgym.envs.registration import matching_env_ids, workload_of
from tensorgym.errors import InvalidArgumentError
from tensorgym.text import format_table


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("dataset", help="build, export or summarise a measurement dataset")
    sub = parser.add_subparsers(dest="dataset_command", required=True)

    p = sub.add_parser("build", help="measure many layers along search trajectories (resumable)",
                       description="Sample layers from the shape prior of real architectures (seed 004's "
                                   "prior-guided task sampling), explore each with the GA and its cost model, "
                                   "then hop walks from its best configs, and store every measurement. Run the "
                                   "same command again to resume.")
    p.add_argument("--tasks", type=int, default=64, help="layers drawn from the prior (default: 64)")
    p.add_argument("--include", default="", help="suite env ids or patterns measured first, e.g. "
                                                 "'Conv2d-ResNet-R*,Matmul-BERT-M3-v0'")
    p.add_argument("--exclude", default="", help="suite env ids or patterns never measured (held-out layers)")
    p.add_argument("--per-task", type=int, default=64, help="measurements per layer (default: 64)")
    p.add_argument("--hop-share", type=float, default=0.25,
                   help="share of each layer's measurements spent on hop walks after the GA (default: 0.25)")
    p.add_argument("--ops", default=",".join(OPS), help=f"operators to draw (default: {','.join(OPS)})")
    p.add_argument("--weights", choices=WEIGHTS, default="count_batched",
                   help="prior weights: attention matmuls once per layer (count_batched) or per head (count)")
    p.add_argument("--max-gflop", type=float, default=2.0, help="skip drawn layers above this GFLOP (default: 2)")
    p.add_argument("--exclude-models", default="",
                   help="leave out rows that occur only in these models, e.g. 'VGG-16,DenseNet-121'")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db", default=None, help=f"SQLite database (default: $TENSORGYM_DB or {default_path()})")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("export", help="write one row per record as Parquet or CSV")
    p.add_argument("db", help="the database file")
    p.add_argument("out", help="output file (.parquet or .csv)")
    p.add_argument("--format", choices=FORMATS, default=None, help="default: from the output's suffix")
    p.add_argument("--space", default="tiles", help="records of this space (default: tiles; 'all' for every space)")
    p.add_argument("--target", default=None, help="records of this target fingerprint only")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("stats", help="records, failures, throughput and replay starts per layer")
    p.add_argument("db", nargs="?", default=None, help=f"the database (default: $TENSORGYM_DB or {default_path()})")
    p.add_argument("--space", default=None, help="only this space")
    p.set_defaults(func=cmd_stats)


def _existing(path: str | None) -> Path:
    path = Path(path) if path is not None else default_path()
    if not path.exists():
        raise InvalidArgumentError(f"{path} does not exist")
    return path


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def cmd_build(args: argparse.Namespace) -> int:
    if args.tasks < 0:
        raise InvalidArgumentError(f"--tasks must be >= 0, got {args.tasks}")
    include = [workload_of(i) for i in matching_env_ids(args.include)] if args.include.strip() else []
    prior = ShapePrior(_names(args.ops), args.weights, max_gflop=args.max_gflop,
                       exclude_models=_names(args.exclude_models))
    exclude = [workload_of(i) for i in matching_env_ids(args.exclude)] if args.exclude.strip() else []
    tasks = plan_tasks(args.tasks, include=include, exclude=exclude, prior=prior, seed=args.seed)
    if args.per_task < 1 or not 0 <= args.hop_share <= 1:
        raise InvalidArgumentError("--per-task must be >= 1 and --hop-share in [0, 1]")
    if not tasks:
        raise InvalidArgumentError("no layer to measure: give --tasks N or --include PATTERN")
    db = args.db if args.db is not None else default_path()
    with Database(db) as database:
        print(f"database: {db}", file=sys.stderr)  # once it opened: a refused command prints its error alone
        included = sum(wl.key in {i.key for i in include} for wl in tasks)
        print(f"{len(tasks)} layers ({included} included, {len(tasks) - included} drawn from {len(prior)} "
              f"shapes of the prior) x {args.per_task} measurements", file=sys.stderr)
        outcomes = build_dataset(tasks, database, per_task=args.per_task, hop_share=args.hop_share,
                                 seed=args.seed, progress=not args.quiet)
    rows = [(o.workload.label, o.workload.describe(), f"{o.ok}/{o.records}", f"{o.best_gflops:.1f}", o.measured,
             "done before" if o.skipped else f"{o.seconds:.0f}") for o in outcomes]
    print(format_table(rows, ("layer", "shape", "ok/records", "best GFLOP/s", "measured now", "seconds")))
    total = sum(o.seconds for o in outcomes)
    print(f"\n{len(outcomes)} layers, {sum(o.records for o in outcomes)} records "
          f"({sum(o.measured for o in outcomes)} measured now) in {total:.0f} s")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    path = _existing(args.db)
    with Database(path) as database:
        n = export_dataset(database, args.out, args.format, space=None if args.space == "all" else args.space,
                           target=args.target)
    print(f"wrote {n} rows to {args.out}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    path = _existing(args.db)
    with Database(path) as database:
        stats = dataset_stats(database, space=args.space)
    if not stats.layers:
        print(f"{path} holds no records")
        return 0
    rows = [(s.label, s.space, s.target[:8], s.records, s.ok, s.records - s.ok, f"{s.best_gflops:.1f}",
             f"{s.median_gflops:.1f}", "-" if s.replay_starts is None else s.replay_starts)
            for s in sorted(stats.layers, key=lambda s: (s.space, s.label))]
    print(format_table(rows, ("layer", "space", "target", "records", "ok", "failed", "best GFLOP/s",
                              "median GFLOP/s", "replay starts")))
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(stats.statuses.items()))
    ops = ", ".join(f"{k} {v}" for k, v in sorted(stats.ops.items()))
    print(f"\n{len(stats.layers)} layers ({ops}), {stats.records} records ({statuses}), "
          f"{len(stats.targets)} target(s)")
    print("replay starts: correct configs with a recorded correct 1-hop neighbour (where a replay episode may start)")
    return 0
