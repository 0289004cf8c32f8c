"""What every search space offers, and the configuration value type.

A *space* is the set of valid schedules of one workload on one target. Its
points are :class:`Config` values: canonical, hashable and JSON-serialisable,
so that the database can key measurements by them and agents can put them in
sets. A space turns a config into a TVM ``IRModule`` with :meth:`Space.apply`;
that call (and only that call) needs TVM, and it runs in build workers.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..target import Target
from ..workloads import Workload

ConfigValue = int | tuple[int, ...]


class SpaceError(ValueError):
    """A config does not belong to the space (wrong knobs, values or constraints)."""


class Config(Mapping[str, ConfigValue]):
    """An immutable point of a search space: knob name -> int or tuple of ints.

    Two configs with the same knobs and values are equal and hash alike,
    whatever the order they were built in. ``config.key`` is the canonical
    JSON text used by the database.
    """

    __slots__ = ("_items", "_hash")

    def __init__(self, values: Mapping[str, Any]):
        items = []
        for name in sorted(values):
            items.append((str(name), _freeze(name, values[name])))
        self._items: tuple[tuple[str, ConfigValue], ...] = tuple(items)
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
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise SpaceError(f"config is not valid JSON: {exc}") from None
        if not isinstance(data, Mapping):
            raise SpaceError(f"a config is a JSON object of knob -> value, got {type(data).__name__}")
        return cls(data)


def _freeze(name: str, value: Any) -> ConfigValue:
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (list, tuple, np.ndarray)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
    ):
        return tuple(int(v) for v in value)
    raise SpaceError(f"knob {name!r}: values are ints or lists of ints, got {value!r}")


class Space(ABC):
    """The valid schedules of one workload on one target.

    Subclasses declare ``name`` and implement the abstract methods. They must be
    picklable: build workers receive ``(space, config)`` and call :meth:`apply`.
    """

    name: str = ""
    feature_names: tuple[str, ...] = ()  # what :meth:`features` returns, in order

    def __init__(self, workload: Workload, target: Target):
        self.workload = workload
        self.target = target

    # -- the contract -----------------------------------------------------
    @abstractmethod
    def sample(self, rng: np.random.Generator) -> Config:
        """A random valid config."""

    @abstractmethod
    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        """Valid configs that differ from ``config`` by exactly ``hops`` coordinate moves."""

    @abstractmethod
    def encode(self, config: Config) -> np.ndarray:
        """A fixed-length float vector in [0, 1] that identifies the config."""

    @property
    @abstractmethod
    def encoding_size(self) -> int:
        """Length of :meth:`encode`'s vector."""

    @abstractmethod
    def check(self, config: Config) -> None:
        """Raise :class:`SpaceError` saying what is wrong, if ``config`` is not in the space."""

    @abstractmethod
    def apply(self, config: Config):
        """The scheduled ``tvm.IRModule`` (needs TVM; runs in build workers)."""

    def features(self, config: Config) -> np.ndarray:
        """Raw analytical features of a config (cost models); empty if the space defines none."""
        return np.zeros(0)

    def normalised_features(self, config: Config) -> np.ndarray:
        """:meth:`features` mapped into [0, 1] (observations)."""
        return np.zeros(0, dtype=np.float32)

    # -- shared behaviour -------------------------------------------------
    def is_valid(self, config: Config) -> bool:
        try:
            self.check(config)
        except SpaceError:
            return False
        return True

    def parse(self, config: "Config | Mapping[str, Any] | str") -> Config:
        """Turn user input (a Config, dict or JSON text) into a checked Config."""
        if not isinstance(config, Config):
            config = Config.from_json(config) if isinstance(config, str) else Config(config)
        self.check(config)
        return config

    def sample_many(self, rng: np.random.Generator, n: int, exclude: "set[Config] | None" = None,
                    max_tries: int | None = None) -> list[Config]:
        """Up to ``n`` distinct random configs not in ``exclude`` (fewer if the space runs dry)."""
        seen = set(exclude or ())
        out: list[Config] = []
        tries = 0
        limit = max_tries if max_tries is not None else 50 * n + 100
        while len(out) < n and tries < limit:
            tries += 1
            config = self.sample(rng)
            if config not in seen:
                seen.add(config)
                out.append(config)
        return out

    def kernel_arguments(self, config: Config, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The arrays the compiled kernel takes: inputs then an output buffer.

        Spaces whose kernels expect pre-packed layouts override this and
        :meth:`canonical_output`; the runner calls them, outside the timed region.
        """
        return [*inputs, np.zeros(self.workload.output_shape, dtype=self.workload.dtype)]

    def canonical_output(self, config: Config, arguments: Sequence[np.ndarray]) -> np.ndarray:
        """The workload's output, in its canonical layout, from the kernel's arguments."""
        return arguments[-1]

    def describe(self, config: Config) -> str:
        return config.key

    def info(self, config: Config) -> dict[str, Any]:
        """Extra facts about a config for ``info`` dicts (e.g. layout assumptions)."""
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.workload.label}, {self.target.label})"
