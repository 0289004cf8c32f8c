"""What every search space offers.

A *space* is the set of valid schedules of one workload on one target. Its
points are :class:`~tensorgym.config.Config` values. A space turns a config
into a TVM ``IRModule`` with :meth:`Space.apply`; that call (and only that
call) needs TVM, and it runs in build workers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..config import Config, ConfigError
from ..target import Target
from ..workloads import Workload


class SpaceError(ConfigError):
    """A config does not belong to the space (wrong knobs, values or constraints)."""


class Space(ABC):
    """The valid schedules of one workload on one target.

    Subclasses declare ``name`` and implement the abstract methods. They must be
    picklable: build workers receive ``(space, config)`` and call :meth:`apply`.
    """

    name: str = ""
    feature_names: tuple[str, ...] = ()  # what :meth:`features` returns, in order
    generic_feature_names: tuple[str, ...] = ()  # what :meth:`generic_features` returns, in order

    def __init__(self, workload: Workload, target: Target):
        self.workload = workload
        self.target = target

    @classmethod
    def for_target(cls, target: Target) -> "type[Space]":
        """The class implementing this space on ``target``: itself, unless the space has one per target kind
        (the ``tiles`` space of a CUDA target is a GPU sketch)."""
        return cls

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

    def configs(self) -> list[Config]:
        """Every config of the space, for exhaustive search; only small spaces can list themselves."""
        raise SpaceError(f"the {self.name!r} space of {self.workload.label} is too large to list; "
                         f"search it with an agent that samples it")

    # -- features (cost models, observations) ------------------------------------
    def features(self, config: Config) -> np.ndarray:
        """Raw analytical features of a config, in :attr:`feature_names` order (empty: none defined)."""
        return np.zeros(0)

    def scaled_features(self, config: Config) -> np.ndarray:
        """The analytical features on the scale cost models learn from (e.g. logs of unbounded ratios)."""
        return np.asarray(self.features(config), dtype=np.float64)

    def normalised_features(self, config: Config) -> np.ndarray:
        """The analytical features mapped into [0, 1] (observations)."""
        return np.zeros(0, dtype=np.float32)

    def generic_features(self, config: Config) -> np.ndarray:
        """Machine-independent schedule features (Ansor's kind), in :attr:`generic_feature_names` order."""
        raise SpaceError(f"the {self.name!r} space defines no generic schedule features")

    # -- mapping candidates (task schedulers) --------------------------------------
    @property
    def candidates(self) -> tuple[str, ...]:
        """Names of the space's mapping candidates (seed 002): disjoint parts of the space a task
        scheduler can give measurements to separately. A space without them has one, ``"all"``."""
        return ("all",)

    def candidate_of(self, config: Config) -> int:
        """The index (into :attr:`candidates`) of the candidate ``config`` belongs to."""
        return 0

    def restricted(self, candidate: int) -> "Space":
        """The space of one candidate's configs: the same ``name``, and its configs are configs of this
        space, so their records are shared (a space without candidates is its own only candidate)."""
        if candidate != 0:
            raise SpaceError(f"the {self.name!r} space has one candidate (0), not {candidate!r}")
        return self

    # -- shared behaviour -------------------------------------------------
    def is_valid(self, config: Config) -> bool:
        try:
            self.check(config)
        except SpaceError:
            return False
        return True

    def parse(self, config: "Config | Mapping[str, Any] | str") -> Config:
        """Turn user input (a Config, dict or JSON text) into a checked Config; raises :class:`SpaceError`."""
        try:
            config = Config.coerce(config)
        except SpaceError:
            raise
        except ConfigError as exc:
            raise SpaceError(str(exc)) from None
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
        return [*inputs, np.zeros(self.workload.output_shape, dtype=self.workload.out_dtype)]

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
