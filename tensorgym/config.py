"""The configuration value every layer shares: a point of a search space.

A :class:`Config` is canonical, hashable and JSON-serialisable, so the
database keys measurements by it and agents put configs in sets. It knows
nothing of any space: a space decides whether a config belongs to it
(:meth:`tensorgym.spaces.Space.check`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .errors import TensorgymError

ConfigValue = int | tuple[int, ...]


class ConfigError(TensorgymError, ValueError):
    """A config is malformed (not knob -> int or list of ints), or does not belong to a space."""


class Config(Mapping[str, ConfigValue]):
    """An immutable point of a search space: knob name -> int or tuple of ints.

    Two configs with the same knobs and values are equal and hash alike,
    whatever the order they were built in. ``config.key`` is the canonical
    JSON text used by the database. NumPy integers are accepted and stored as
    Python ints; booleans become 0/1.
    """

    __slots__ = ("_items", "_hash")

    def __init__(self, values: Mapping[str, Any]):
        if not isinstance(values, Mapping):
            raise ConfigError(f"a config is a mapping of knob name -> int or list of ints, got "
                              f"{type(values).__name__} {_short(values)}")
        for name in values:
            if not isinstance(name, str):
                raise ConfigError(f"knob names are strings, got {name!r}")
        self._items: tuple[tuple[str, ConfigValue], ...] = tuple(
            (name, _freeze(name, values[name])) for name in sorted(values))
        self._hash = hash(self._items)

    def __getitem__(self, name: str) -> ConfigValue:
        for key, value in self._items:
            if key == name:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._items == other._items
        return NotImplemented

    def __repr__(self) -> str:
        return f"Config({self.key})"

    def __reduce__(self):
        return (Config, (dict(self._items),))

    def replace(self, **changes: Any) -> "Config":
        """A copy with some knobs changed (hot path of neighbour generation: unchanged values are not re-checked)."""
        items = dict(self._items)
        for name, value in changes.items():
            items[name] = _freeze(name, value)
        new = Config.__new__(Config)
        new._items = tuple(sorted(items.items()))
        new._hash = hash(new._items)
        return new

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self._items}

    @property
    def key(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, data: "str | Mapping[str, Any]") -> "Config":
        """A config from its JSON text or from a decoded JSON object."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise ConfigError(f"config is not valid JSON: {exc}") from None
        if not isinstance(data, Mapping):
            raise ConfigError(f"a config is a JSON object of knob -> value, got {type(data).__name__}")
        return cls(data)

    @classmethod
    def coerce(cls, value: "Config | Mapping[str, Any] | str") -> "Config":
        """A Config from a Config, a mapping or JSON text (what public entry points accept)."""
        if isinstance(value, Config):
            return value
        if isinstance(value, bytes):
            try:
                value = value.decode()
            except UnicodeDecodeError:
                raise ConfigError(f"config bytes are not UTF-8 JSON text: {_short(value)}") from None
        if isinstance(value, str):
            return cls.from_json(value)
        return cls(value)


def _freeze(name: str, value: Any) -> ConfigValue:
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (list, tuple, np.ndarray)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value
    ):
        return tuple(int(v) for v in value)
    raise ConfigError(f"knob {name!r}: values are ints or lists of ints, got {_short(value)}")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
