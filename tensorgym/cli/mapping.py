"""``tensorgym mapping ENV_ID --dtype int8``: the mapping candidates of a layer, why some were pruned, and how fast
each one's best measured kernel is."""

from __future__ import annotations

import argparse
from pathlib import Path

from tensorgym.database import Database, default_path
from tensorgym.envs.registration import workload_of
from tensorgym.record import Status
from tensorgym.spaces.mapping import MappingSpace
from tensorgym.target import RUNNABLE_PROFILES, Target, TargetError, constructed_cpu, resolve_target
from tensorgym.text import format_table
from tensorgym.workloads import SUPPORTED_DTYPES

from .shapes import parse_shape


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("mapping", help="list a layer's mapping candidates (intrinsic, fused loops, packing, "
                                              "resources, kept or pruned) and their best measured kernels")
    p.add_argument("env_id", help="e.g. Conv2d-ResNet18-C4-v0 (see `tensorgym list`)")
    p.add_argument("--shape", help="shape of tensorgym/Conv2d-v0 or tensorgym/Matmul-v0, e.g. M=512,N=768,K=3072")
    p.add_argument("--dtype", default="float32", choices=SUPPORTED_DTYPES, help="data type (default: float32)")
    p.add_argument("--prepacked", action="store_true", help="the space with pre-packed weights")
    p.add_argument("--target", default="llvm", choices=("llvm", "native", *RUNNABLE_PROFILES),
                   help="llvm (this CPU, after $TENSORGYM_CPU; default), native, or a CPU profile: this CPU "
                        "restricted to it, or, for one this CPU cannot act as (sapphirerapids without AMX), a "
                        "constructed CPU whose candidates are listed without measurements")
    p.add_argument("--db", default=None, help=f"database whose measurements to show (default: $TENSORGYM_DB or "
                                              f"{default_path()})")
    p.add_argument("--all", action="store_true", help="also list the pruned and masked candidates one by one "
                                                      "(default: kept ones, then a count per rule)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    workload = workload_of(args.env_id, parse_shape(args.shape)).with_dtype(args.dtype)
    target = _target(args.target)
    space = MappingSpace(workload, target, prepacked=args.prepacked)
    best = _measured(space, Path(args.db) if args.db is not None else default_path())
    unit = workload.throughput_unit
    print(f"{workload.label}: {workload.describe()}; {len(space.candidates)} mapping candidates, "
          f"{len(space.kept)} kept ({'pre-packed weights' if space.prepacked else 'packing in the kernel'}) "
          f"on {target.label} ({target.isa_level}, {target.vector_registers} vector registers)")
    rows = []
    skipped: dict[str, int] = {}
    for row in space.table:
        if row["fate"] != "kept" and not args.all:
            skipped[row["rule"]] = skipped.get(row["rule"], 0) + 1
            continue
        res = row["resources"]
        measured = best.get(row["candidate"])
        rows.append((row["candidate"], row["label"], row["fused"], row["packing"],
                     f"{100 * res.utilisation:.0f}%", f"{res.packed_activation_bytes / 1024:.0f}",
                     f"{res.packed_weight_bytes / 1024:.0f}", f"{res.panel_bytes / 1024:.0f}",
                     row["fate"] if row["fate"] == "kept" else f"{row['fate']} ({row['rule']}): {row['reason']}",
                     f"{measured[0]:.1f} ({measured[1]})" if measured else "-"))
    print(format_table(rows, ("#", "intrinsic and mapping", "fused loops (axis:extent <- loops)", "packing",
                              "util", "act KiB", "wt KiB", "panel KiB", "kept / pruned (rule): why",
                              f"best {unit} (measured)")))
    if skipped:
        print("\nnot kept: " + ", ".join(f"{n} by rule {rule!r}" for rule, n in skipped.items())
              + " (--all lists them with their reasons)")
    if not best and target.cpu_model.endswith("(constructed)"):
        print(f"\n{target.label} is a constructed CPU: this machine cannot run its kernels (candidates only)")
    elif not best:
        where = f" --target {args.target}" if args.target != "llvm" else ""
        print(f"\nno measurements of this layer in the mapping space yet (tune it: tensorgym tune {args.env_id} "
              f"--space mapping --dtype {args.dtype}{where})")
    return 0


def _target(name: str) -> Target:
    """The target whose candidates are listed: as ``tune --target`` resolves it, or a constructed CPU for a
    profile this machine cannot act as (candidates and pruning are symbolic; nothing is compiled here)."""
    try:
        return resolve_target(name)
    except TargetError:
        if name not in RUNNABLE_PROFILES:
            raise
        return constructed_cpu(name)


def _measured(space: MappingSpace, path: Path) -> dict[int, tuple[float, int]]:
    """Candidate -> (best throughput, configs measured correctly) from the database (empty if none)."""
    if not path.exists():
        return {}
    with Database(path) as db:
        records = db.records(space.workload.key, space.target.fingerprint, space.name, Status.OK)
    return space.best_by_candidate(records)
