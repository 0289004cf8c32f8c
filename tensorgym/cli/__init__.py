"""The ``tensorgym`` command line: one module per subcommand.

  tensorgym list [--suite NAME]                 every registered environment, its shape and GFLOP count
  tensorgym info [--target x86-64-v3] [--json]  this CPU's fingerprint, ISA, vector width, FMA peak, and which
                                                spaces, dtypes and intrinsics run here (and why the others don't)
  tensorgym tune ENV_ID [--agent random] [--budget N] [--db PATH] [--shape M=..,N=..,K=..] [--space S] [--dtype D]
                                                tune one env; re-running with the same --db resumes
  tensorgym compare ENV_ID [ENV_ID ...] --agents random,ga,dgd --budget N --seeds S
                                                every agent on every env, one run: table, CSV/JSON, PNG
  tensorgym tune-network NETWORK [--scheduler dual-task] [--space tiles] [--budget N] [--db PATH] ...
                                                tune a network's layers under one budget; resumes from --db
  tensorgym compare-network NETWORK --schedulers round-robin,gradient,dual-task --budget N --seeds S
                                                several task schedulers on one network: table, CSV/JSON, PNG
  tensorgym show [PATH]                         the best record per workload in a database
  tensorgym microkernels calibrate [--quick]    measure this machine's microkernel catalogue (once)
  tensorgym microkernels show                   the kept microkernels and their share of the measured peak
  tensorgym rpc-server --tracker HOST:PORT --key KEY
                                                serve this machine's CPU to remote tuning runs (TVM RPC)
  tensorgym mapping ENV_ID [--dtype int8]       a layer's mapping candidates (intrinsic, fused loops, packing,
                                                resources, kept or pruned and why) and their best measurements
  tensorgym dataset build|export|stats|minari   a measurement dataset across many layers (seed 004), for pandas; Minari
  tensorgym landscape measure|export|check ENV_ID --db PATH
                                                measure every config of a layer's benchmark space (resumable),
                                                export it as a shipped landscape (and T4), check it live
  tensorgym train --algo maskable-ppo --envs "Conv2d-ResNet-R*" --backend replay --db data.db --out DIR
                                                a stable-baselines3 policy (then: tune --agent rl --policy DIR/best.zip)
  tensorgym oneshot train --db data.db --out model.pt
                                                seed 004's predictor (then: tune --agent one-shot --model model.pt)

Every error a user can cause (a :class:`~tensorgym.errors.TensorgymError`, a file
that cannot be read or written, a database error) is printed as one line on
stderr and the command exits with code 2; ``-v`` adds the traceback. Argument
values argparse refuses (``--budget x``, ``--time-budget nan``) are usage errors,
exit code 2 too.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
import traceback
import warnings
from collections.abc import Sequence

from tensorgym.errors import TensorgymError

from . import (
    compare, compare_network, dataset, info, landscape, list_envs, mapping, microkernels, oneshot, rpc_server, show,
    train, tune, tune_network,
)

COMMANDS = (list_envs, info, tune, compare, tune_network, compare_network, show, microkernels, mapping, dataset,
            landscape, train, oneshot, rpc_server)

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tensorgym", description="Tune tensor kernels as Gymnasium environments.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details; tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        with warnings.catch_warnings():
            _notes_on_one_line()
            return args.func(args)
    except Exception as exc:  # noqa: BLE001 - sorted below: the user's errors become one line
        if not is_user_error(exc):
            raise
        if args.verbose:
            traceback.print_exc()
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted: every finished measurement is in the database; run the same command again to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED


def _notes_on_one_line() -> None:
    """Inside ``warnings.catch_warnings()``: a run on another CPU's landscape says so in one ``note:`` line."""
    from tensorgym.landscape.shipped import AnotherCPULandscape

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, AnotherCPULandscape):
            print(f"note: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.simplefilter("once", AnotherCPULandscape)
    warnings.showwarning = show


def is_user_error(exc: BaseException) -> bool:
    """A TensorgymError, a file that cannot be read or written, or a database error (SQLite's, or
    SQLAlchemy's under a study storage): what a user fixes, not a bug to report with a traceback."""
    if isinstance(exc, (TensorgymError, OSError, sqlite3.Error)):
        return True
    return any(cls.__module__.startswith("sqlalchemy.") for cls in type(exc).__mro__)


def one_line(exc: BaseException) -> str:
    """The exception's message on one line (OSErrors name the file)."""
    if isinstance(exc, OSError) and not isinstance(exc, TensorgymError) and exc.strerror:
        text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
