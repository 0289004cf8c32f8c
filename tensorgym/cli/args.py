"""Argument types shared by the subcommands (and the benchmarks' command lines)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from tensorgym.database import default_path
from tensorgym.errors import InvalidArgumentError


def float_list(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers, got {text!r}")
    return values


def finite_float(text: str) -> float:
    """A finite number (``nan`` and ``inf`` are refused: a limit of NaN seconds is no limit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1]."""
    value = finite_float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {text!r}")
    return value


def output_file(option: str, text: str) -> Path:
    """A file the command will write: a non-empty path that is not a directory."""
    if not text.strip():
        raise InvalidArgumentError(f"{option} is an empty path; name a file")
    path = Path(text).expanduser()
    if path.is_dir():
        raise InvalidArgumentError(f"{option} {path} is a directory; name a file")
    return path


def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def seed_list(text: str) -> int | tuple[int, ...]:
    values = int_list(text)
    if "," in text:
        return values
    if len(values) != 1 or values[0] < 1:
        raise argparse.ArgumentTypeError(f"--seeds is a count (3) or a list (0,1,2), got {text!r}")
    return values[0]


def add_board_arguments(parser: argparse.ArgumentParser, out: str, trial_points: tuple[int, ...] | None,
                        time_points: tuple[float, ...] | None) -> None:
    """The arguments of a comparison's board (``compare``, ``compare-network``, the benchmarks that run them):
    ``--seeds``, the output directory (default ``out``) and the points its table reads (None: 25, 50 and 100 % of
    the budget, of the shortest run)."""
    def shown(points: tuple[float, ...] | None, whole: str) -> str:
        return ",".join(f"{p:g}" for p in points) if points is not None else f"25/50/100 %% of {whole}"

    parser.add_argument("--seeds", type=seed_list, default=3, help="number of seeds, or a list like 0,1,2 (default: 3)")
    parser.add_argument("--out", default=out, help=f"output directory: tables, results, plots; also what a re-run "
                                                   f"resumes from (default: {out})")
    parser.add_argument("--trial-points", type=int_list, default=trial_points,
                        help=f"trial counts the table reads (default: {shown(trial_points, 'the budget')})")
    parser.add_argument("--time-points", type=float_list, default=time_points,
                        help=f"seconds of tuning clock the table reads "
                             f"(default: {shown(time_points, 'the shortest run')})")


def add_run_arguments(parser: argparse.ArgumentParser, db: str | None = None) -> None:
    """What every command that tunes and times the vendors takes (``tune``, ``compare``, their network forms, the
    benchmarks that run them): the database (default ``db``, or the default database), ``--no-vendor``, ``-q``."""
    parser.add_argument("--db", default=db, help=f"SQLite database every run measures into; re-running resumes "
                                                 f"(default: {db or f'$TENSORGYM_DB or {default_path()}'})")
    parser.add_argument("--no-vendor", action="store_true",
                        help="skip timing the vendor libraries (a network's: PyTorch on its layers)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def add_ray_argument(parser: argparse.ArgumentParser) -> None:
    """``--ray auto|HOST:PORT``: spread the command's measuring runs over a Ray cluster (tensorgym.cluster)."""
    parser.add_argument("--ray", metavar="auto|HOST:PORT", default=None,
                        help="spread the runs over a Ray cluster's measuring nodes (one run per node at a time; "
                             "nodes declare --resources '{\"tensorgym_measure\": 1}'), every record still in "
                             "--db; needs pip install 'tensorgym[ray]'")


def add_rpc_argument(parser: argparse.ArgumentParser) -> None:
    """``--rpc HOST:PORT/KEY``: time kernels on the device a ``tensorgym rpc-server`` serves at that tracker."""
    parser.add_argument("--rpc", metavar="HOST:PORT/KEY", default=None,
                        help="check and time kernels on the remote device served under KEY at the TVM RPC tracker "
                             "HOST:PORT (`tensorgym rpc-server` there); builds stay on this machine")


def rpc_target(text: str | None):
    """The remote :class:`~tensorgym.target.Target` of ``--rpc HOST:PORT/KEY``, or None without it."""
    if text is None:
        return None
    from tensorgym.measure.rpc import remote_target
    from tensorgym.target import RemoteDevice

    device = RemoteDevice.parse(text)
    return remote_target(f"{device.tracker_host}:{device.tracker_port}", device.key)
