"""``tensorgym list``: every registered environment id, its shape, GFLOP count, spaces and dtypes; the network envs."""

from __future__ import annotations

import argparse

from tensorgym.catalog import ENVS, space_class
from tensorgym.errors import UnknownNameError
from tensorgym.networks import NETWORKS
from tensorgym.suites import SUITES, env_id
from tensorgym.text import format_table
from tensorgym.workloads import SUPPORTED_DTYPES


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("list", help="list the registered environments")
    p.add_argument("--suite", help="only this suite (e.g. ResNet-50, BERT)")
    p.set_defaults(func=run)


def space_dtypes() -> dict[str, tuple[str, ...]]:
    """Every space with an environment -> the workload dtypes it schedules."""
    return {name: space_class(name).supported_dtypes for name in ENVS}


def run(args: argparse.Namespace) -> int:
    support = space_dtypes()
    rows = []
    for suite in SUITES.values():
        if args.suite and args.suite.lower() not in (suite.name.lower(), suite.env_prefix.lower()):
            continue
        for wl in suite.layers:
            spaces = list(support)  # every space takes conv2d and matmul layers
            dtypes = [d for d in SUPPORTED_DTYPES if any(d in support[name] for name in spaces)]
            rows.append((env_id(suite, wl), suite.name, wl.describe(), f"{wl.gflop:.4g}", " ".join(spaces),
                         " ".join(dtypes)))
    if not rows:
        raise UnknownNameError(f"no suite matches {args.suite!r}; suites: {', '.join(SUITES)}")
    print(format_table(rows, ("env id", "suite", "shape", "GFLOP", "spaces", "dtypes")))
    print("\nSpaces by dtype: " + "; ".join(f"{name}: {', '.join(dtypes)}" for name, dtypes in support.items())
          + " (gym.make(ID, space=..., dtype=...); on the command line --space and --dtype)")
    print("\nCustom shapes: gym.make('tensorgym/Conv2d-v0', C=.., H=.., F=.., R=..) or "
          "gym.make('tensorgym/Matmul-v0', M=.., N=.., K=..); on the command line "
          "`tensorgym tune tensorgym/Matmul-v0 --shape M=..,N=..,K=..`")
    if not args.suite:
        networks = [(net.env_id, net.name, f"{len(net.live_tasks)} of {len(net.tasks)}",
                     ", ".join(f"{t.workload.name} x{t.weight:g}" for t in net.tasks), f"{net.gflop:.4g}")
                    for net in NETWORKS.values()]
        print()
        print(format_table(networks, ("network env id", "network", "layers tuned", "layer x count",
                                      "GFLOP (weighted)")))
        print("\nNetworks of your own: gym.make('tensorgym/Network-v0', network=...) or `tensorgym tune-network "
              "FILE.json` (layers and counts)")
    return 0
