"""Argument types shared by the subcommands (and the benchmarks' command lines)."""

from __future__ import annotations

import argparse


def float_list(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


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
