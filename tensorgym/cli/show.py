"""``tensorgym show [PATH]``: the best record per workload and space in a database."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tensorgym.database import Database, database_path, default_path
from tensorgym.errors import InvalidArgumentError
from tensorgym.text import format_table


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("show", help="best record per workload in a database")
    p.add_argument("path", nargs="?", default=None,
                   help=f"database file (default: $TENSORGYM_DB or {default_path()})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = Path(database_path(args.path)) if args.path is not None else default_path()
    if not path.exists():
        raise InvalidArgumentError(f"{path} does not exist")
    with Database(path, readonly=True) as db:  # reads only: works on read-only media too
        rows = []
        for s in db.summaries():
            best = s.best
            rows.append((s.label, s.space, f"{s.ok}/{s.records}",
                         f"{best.gflops:.1f}" if best else "-", f"{best.latency_s * 1e3:.3f}" if best else "-",
                         f"{best.latency_cv * 100:.1f}" if best else "-",
                         json.dumps(best.config.to_json(), separators=(",", ":")) if best else ""))
    if not rows:
        print(f"{path} holds no records")
        return 0
    print(format_table(rows, ("workload", "space", "ok/records", "best GFLOP/s (int8: GOP/s)", "latency ms", "cv %",
                              "best config")))
    return 0
