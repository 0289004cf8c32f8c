"""Argument types shared by the subcommands (and the benchmarks' command lines)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

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
