"""``tensorgym oneshot train``: fit seed 004's one-shot predictor on a measurement dataset.

  tensorgym oneshot train --db data.db --out model.pt [--hold-out "Conv2d-YOLO-Y*"] [--epochs 200]

Then ``tensorgym tune ENV_ID --agent one-shot --model model.pt --budget 32``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tensorgym.database import Database
from tensorgym.envs.registration import matching_env_ids, workload_of
from tensorgym.errors import InvalidArgumentError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("oneshot", help="train seed 004's one-shot predictor")
    sub = parser.add_subparsers(dest="oneshot_command", required=True)
    p = sub.add_parser("train", help="fit the predictor on a dataset's measurements (tiles space, this machine)")
    p.add_argument("--db", required=True, help="the dataset (`tensorgym dataset build`)")
    p.add_argument("--out", required=True, help="the predictor file to write, e.g. model.pt")
    p.add_argument("--hold-out", default="", help="layers (env ids or patterns) left out of training")
    p.add_argument("--epochs", type=int, default=200, help="training epochs (default: 200)")
    p.add_argument("--batch-size", type=int, default=512, help="batch size (default: 512)")
    p.add_argument("--target", default=None, help="train on the records of this target fingerprint (default: here)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from tensorgym.agents.oneshot.train import measurements_from_database, train_predictor

    if not Path(args.db).exists():
        raise InvalidArgumentError(f"{args.db} does not exist (build a dataset with `tensorgym dataset build`)")
    held_out = {workload_of(i).key for i in matching_env_ids(args.hold_out)} if args.hold_out.strip() else set()
    with Database(args.db) as database:
        target = None
        if args.target is not None:
            targets = database.targets()
            if args.target not in targets:
                raise InvalidArgumentError(f"{args.db} has no target {args.target!r}; it has {sorted(targets)}")
            target = targets[args.target]
        data = {wl: samples for wl, samples in measurements_from_database(database, target).items()
                if wl.key not in held_out}
    print(f"training on {sum(len(s) for s in data.values())} records of {len(data)} layers "
          f"({len(held_out)} held out)", file=sys.stderr)
    predictor = train_predictor(data, target, epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
                                progress=not args.quiet)
    predictor.save(args.out)
    info = predictor.info
    print(f"wrote {args.out}: {info.samples} samples of {info.tasks} layers, target {info.target} "
          f"({info.target_label})")
    print(f"metrics: {json.dumps(info.metrics)}")
    print(f"use it: tensorgym tune ENV_ID --agent one-shot --model {args.out} --budget 32")
    return 0
