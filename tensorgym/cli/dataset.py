"""``tensorgym dataset build|export|stats|minari``: a measurement dataset across many layers (seed 004), and
offline-RL episodes as Minari datasets.

  tensorgym dataset build --tasks 64 --per-task 64 --db data.db [--include "Conv2d-ResNet-R*"]
        sample layers from the shape prior (plus the suite layers asked for), explore each one
        (GA, then hop walks) and store every measurement; running it again resumes
  tensorgym dataset export data.db out.parquet [--format parquet|csv]
        one row per record, for pandas
  tensorgym dataset stats data.db
        records, failures and throughput per layer, and what the replay backend can use
  tensorgym dataset minari ENV_ID (--landscape [CPU|PATH] | --db PATH) --episodes N --seed S --out DIR
        episodes of the layer's tile-hop env over a landscape or a database's records, written as a Minari
        dataset (minari.load_dataset reads it; tensorgym.dataset.minari_export)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tensorgym.database import Database, default_path
from tensorgym.dataset.build import build_dataset, plan_tasks
from tensorgym.dataset.export import FORMATS, export_dataset
from tensorgym.dataset.minari_export import export_database_dataset, export_landscape_dataset
from tensorgym.dataset.priors import OPS, WEIGHTS, ShapePrior
from tensorgym.dataset.stats import dataset_stats
from tensorgym.envs.registration import matching_env_ids, workload_of
from tensorgym.errors import InvalidArgumentError
from tensorgym.target import RUNNABLE_PROFILES
from tensorgym.text import format_table

from .args import fraction
from .shapes import parse_shape

THIS_CPU = ""  # `--landscape` without a value: this CPU's shipped landscape


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

    p = sub.add_parser("minari", help="write a layer's tile-hop episodes as a Minari dataset (offline RL)",
                       description="Walk a layer's tile-hop env over a landscape (every config of a benchmark "
                                   "space, measured once) or over a database's records (the replay backend), with "
                                   "a seeded behaviour policy: uniformly random among the allowed actions, and a "
                                   "share --greedy of greedy steps (the allowed move to the config of highest "
                                   "recorded throughput). Minari's DataCollector records the episodes; "
                                   "minari.load_dataset(ID) reads them with MINARI_DATASETS_PATH=OUT. Nothing is "
                                   "compiled or timed. Needs pip install 'tensorgym[minari]'.")
    p.add_argument("env_id", help="a tensorgym id, e.g. Conv2d-ResNet-R5-v0 (tensorgym/Matmul-v0 with --shape)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--landscape", nargs="?", const=THIS_CPU, metavar="CPU|PATH",
                        help="walk a landscape: a CPU folder of the shipped ones, a landscape file, or (no value, "
                             "after ENV_ID) this CPU's")
    source.add_argument("--db", metavar="PATH", help="walk this database's records of the layer (replay backend)")
    p.add_argument("--shape", help="shape of tensorgym/Conv2d-v0 or tensorgym/Matmul-v0, e.g. M=512,N=768,K=3072")
    p.add_argument("--episodes", type=int, default=100, help="episodes (default: 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the run: each episode's reset seed and the "
                                                       "policy's draws derive from it (default: 0)")
    p.add_argument("--greedy", type=fraction, default=0.0,
                   help="share of greedy steps of the behaviour policy (default: 0, a uniformly random walk)")
    p.add_argument("--steps", type=int, default=None, help="episode length (default: the id's, 64)")
    p.add_argument("--observation", choices=("layer", "common"), default=None,
                   help="observation layout of the env (default: layer)")
    p.add_argument("--target", default=None, choices=("llvm", "native", *RUNNABLE_PROFILES),
                   help="the CPU whose records (--db) or shipped landscape (--landscape without a value) are "
                        "walked (default: this CPU)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="datasets' root (default: $MINARI_DATASETS_PATH or ~/.minari/datasets)")
    p.add_argument("--dataset-id", default=None, metavar="ID",
                   help="Minari id (default: tensorgym/<layer>-<source>/<policy>-v0)")
    p.add_argument("--author", default=None, help="Minari's author field")
    p.add_argument("--author-email", default=None, help="Minari's author_email field")
    p.add_argument("--code-permalink", default=None, help="Minari's code_permalink field")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_minari)


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


def cmd_minari(args: argparse.Namespace) -> int:
    env_kwargs = dict(parse_shape(args.shape))
    for name in ("observation", "target"):
        if getattr(args, name) is not None:
            env_kwargs[name] = getattr(args, name)
    common = dict(episodes=args.episodes, seed=args.seed, greedy=args.greedy, steps=args.steps, out=args.out,
                  dataset_id=args.dataset_id, env_kwargs=env_kwargs, author=args.author,
                  author_email=args.author_email, code_permalink=args.code_permalink, progress=not args.quiet)
    if args.db is not None:
        written = export_database_dataset(args.env_id, db=args.db, **common)
    else:
        written = export_landscape_dataset(args.env_id, landscape=args.landscape or None, **common)
    print(written.summary())
    return 0
