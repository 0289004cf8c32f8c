"""Argument checks shared by the public entry points.

Each function returns the value in its canonical Python form (NumPy integer
and float scalars become ``int`` and ``float``, so what is checked can be
stored in JSON) or raises an :class:`~tensorgym.errors.InvalidTypeError` /
:class:`~tensorgym.errors.InvalidArgumentError` that names the argument and
says what it accepts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, InvalidTypeError


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_integer(value: Any) -> bool:
    """An int or NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_number(value: Any) -> bool:
    """An int, float or NumPy int/float scalar, not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def integer(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an ``int`` in [minimum, maximum]."""
    if not is_integer(value):
        raise InvalidTypeError(f"{name} must be an integer, got {type(value).__name__} {_short(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidArgumentError(f"{name} must be <= {maximum}, got {value}")
    return value


def number(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
           positive: bool = False) -> float:
    """``value`` as a finite ``float`` in [minimum, maximum] (``positive``: > 0)."""
    if not is_number(value):
        raise InvalidTypeError(f"{name} must be a number, got {type(value).__name__} {_short(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise InvalidArgumentError(f"{name} must be a finite number, got {value}")
    if positive and value <= 0:
        raise InvalidArgumentError(f"{name} must be > 0, got {value:g}")
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum:g}, got {value:g}")
    if maximum is not None and value > maximum:
        raise InvalidArgumentError(f"{name} must be <= {maximum:g}, got {value:g}")
    return value


def choice(name: str, value: Any, choices: tuple) -> Any:
    """``value`` if it is one of ``choices``."""
    try:
        ok = not isinstance(value, (bool, np.bool_)) and value in choices
    except (TypeError, ValueError):  # unhashable, or an array compared with a string
        ok = False
    if not ok:
        raise InvalidArgumentError(f"{name} must be one of {', '.join(map(repr, choices))}; got {_short(value)}")
    return value


def generator(name: str, value: Any) -> np.random.Generator:
    """A NumPy random Generator (what every sampler of tensorgym draws from)."""
    if not isinstance(value, np.random.Generator):
        raise InvalidTypeError(f"{name} must be a numpy.random.Generator (np.random.default_rng(seed)), got "
                               f"{type(value).__name__}")
    return value
