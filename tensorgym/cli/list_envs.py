"""``tensorgym list``: every registered environment id, its shape and GFLOP count."""

from __future__ import annotations

import argparse

from tensorgym.errors import UnknownNameError
from tensorgym.suites import SUITES, env_id
from tensorgym.text import format_table


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("list", help="list the registered environments")
    p.add_argument("--suite", help="only this suite (e.g. ResNet-50, BERT)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = []
    for suite in SUITES.values():
        if args.suite and args.suite.lower() not in (suite.name.lower(), suite.env_prefix.lower()):
            continue
        for wl in suite.layers:
            rows.append((env_id(suite, wl), suite.name, wl.describe(), f"{wl.gflop:.4g}"))
    if not rows:
        raise UnknownNameError(f"no suite matches {args.suite!r}; suites: {', '.join(SUITES)}")
    print(format_table(rows, ("env id", "suite", "shape", "GFLOP")))
    print("\nCustom shapes: gym.make('tensorgym/Conv2d-v0', C=.., H=.., F=.., R=..) or "
          "gym.make('tensorgym/Matmul-v0', M=.., N=.., K=..); on the command line "
          "`tensorgym tune tensorgym/Matmul-v0 --shape M=..,N=..,K=..`")
    return 0
