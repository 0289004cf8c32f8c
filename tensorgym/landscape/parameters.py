"""A landscape's configs as the scalar tuning parameters other tuners search: exactly the knobs it varies.

Kernel Tuner, the T4 format and most autotuners describe a config as named scalar parameters whose
Cartesian product (less restrictions) is the search space. A landscape's config is a tiles config
(one factorisation per loop, e.g. ``"f": [32, 1, 4, 1]``) or a microkernel config, flattened by
:func:`flat_configuration` into one integer per knob level (``f.0``,
``f.1``, ...). Most of those levels do not vary in a benchmark space (it keeps one value), and the
outermost level of each loop is implied by the others (the loop's extent divided by their product).
Handing them all to another tuner makes its space look vastly larger than the landscape (R5's 24
levels span millions of combinations for 4,096 configs) and its strategies search combinations
that do not exist.

:func:`free_parameters` keeps the knobs the landscape varies, and drops a varying knob whenever the
others still tell every config apart (an implied level; level 0 is tried first), so each config is
one combination of the parameters and each parameter is needed. :func:`parameter_values` gives a
config's values of them; :class:`ParameterIndex` maps values back to the landscape's row.
"""

from __future__ import annotations

from typing import Any

from ..config import Config
from .file import Landscape, LandscapeError

ABSENT = -1  # the value of a knob level a config does not have (knobs of varying length)


def flat_configuration(config: Config) -> dict[str, int]:
    """A config as scalar parameters: ``knob.level`` for each level of a list knob, ``knob`` for the others."""
    out: dict[str, int] = {}
    for knob, value in config.items():
        if isinstance(value, tuple):
            out.update({f"{knob}.{level}": v for level, v in enumerate(value)})
        else:
            out[knob] = value
    return out


def config_from_flat(parameters: dict[str, int]) -> Config:
    """The inverse of :func:`flat_configuration`."""
    lists: dict[str, dict[int, int]] = {}
    values: dict[str, Any] = {}
    for name, value in parameters.items():
        knob, dot, level = name.rpartition(".")
        if dot and level.isdigit():
            lists.setdefault(knob, {})[int(level)] = value
        else:
            values[name] = value
    for knob, levels in lists.items():
        values[knob] = [levels[i] for i in range(len(levels))]
    return Config(values)


def free_parameters(landscape: Landscape) -> dict[str, list[int]]:
    """The landscape's tuning parameters (see the module docs): name -> its values, sorted, in the order of the
    config's knobs."""
    flats = [flat_configuration(c) for c in landscape.configs]
    names = list(dict.fromkeys(name for flat in flats for name in flat))
    values = {name: sorted({flat.get(name, ABSENT) for flat in flats}) for name in names}
    varying = [name for name in names if len(values[name]) > 1]
    rows = [tuple(flat.get(name, ABSENT) for name in varying) for flat in flats]
    if len(set(rows)) != len(rows):
        raise LandscapeError(f"{landscape!r} holds a config twice: its configs cannot be told apart by their knobs")
    # Drop implied knobs: outermost levels first, then the rest in order, while every config stays distinct.
    kept = list(varying)
    for name in sorted(varying, key=lambda n: (not n.endswith(".0"), varying.index(n))):
        trial = [n for n in kept if n != name]
        columns = [varying.index(n) for n in trial]
        if len({tuple(row[i] for i in columns) for row in rows}) == len(rows):
            kept = trial
    return {name: values[name] for name in kept}


def parameter_values(config: Config, parameters: dict[str, list[int]]) -> dict[str, int]:
    """``config``'s value of each of ``parameters`` (:func:`free_parameters`)."""
    flat = flat_configuration(config)
    return {name: flat.get(name, ABSENT) for name in parameters}


class ParameterIndex:
    """The landscape row of each combination of its :func:`free_parameters`."""

    def __init__(self, landscape: Landscape) -> None:
        self.parameters = free_parameters(landscape)
        self._rows = {tuple(parameter_values(c, self.parameters).values()): row
                      for row, c in enumerate(landscape.configs)}

    def row(self, values: dict[str, Any]) -> int | None:
        """The row of the config with these parameter values (None: no config of the landscape has them)."""
        return self._rows.get(tuple(int(values[name]) for name in self.parameters))
