"""What every search space offers.

A *space* is the set of valid schedules of one workload on one target. Its
points are :class:`~tensorgym.config.Config` values. A space is the search
geometry agents see: sampling, moves, encodings, features. Turning a config
into a kernel and running it is its :class:`~.builder.KernelBuilder`'s job
(:meth:`Space.builder`), which is what the measurer receives; only the builder
needs TVM, and it runs in build and run workers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ..checks import generator, integer
from ..config import Config, ConfigError
from ..target import Target
from ..workloads import Workload
from .builder import KernelBuilder

MAX_SAMPLES = 1 << 16  # configs one sample_many call may ask for
MAX_HOPS = 4  # coordinate moves one neighbours() call may combine (the neighbourhood grows as C(m, hops) 2^hops)


class SpaceError(ConfigError):
    """A config does not belong to the space (wrong knobs, values or constraints)."""


class Space(ABC):
    """The valid schedules of one workload on one target.

    Subclasses declare ``name``, implement the abstract methods and name their
    :class:`~.builder.KernelBuilder` in ``builder_class``. They must be picklable: build
    and run workers receive the space's builder (which holds the space) and a config.

    Every method that takes a config raises :class:`SpaceError` (a ``ValueError``)
    saying what is wrong when the config is not a :class:`Config` of this space
    (:meth:`parse` makes one from a dict or JSON text); samplers take a
    ``numpy.random.Generator`` and raise ``InvalidTypeError`` for anything else.
    """

    name: str = ""
    supported_dtypes: tuple[str, ...] = ("float32",)  # the workload dtypes the space can schedule
    # Whether the space's kernels accumulate on tensor cores, which truncate their sums (and run float32 as
    # tf32): their correctness check is the timing protocol's rtol (see Workload.tolerance).
    tensor_cores: bool = False
    feature_names: tuple[str, ...] = ()  # what :meth:`features` returns, in order
    generic_feature_names: tuple[str, ...] = ()  # what :meth:`generic_features` returns, in order
    # What builds and runs the space's kernels (None: a space of geometry only, which nothing can measure).
    builder_class: ClassVar[type[KernelBuilder] | None] = None

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
        """Valid configs that differ from ``config`` by exactly ``hops`` (1 to :data:`MAX_HOPS`) coordinate moves."""

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

    def builder(self) -> KernelBuilder:
        """The :class:`~.builder.KernelBuilder` of this space's kernels: what the measurer builds and runs with."""
        if self.builder_class is None:
            raise SpaceError(f"the {self.name!r} space builds no kernels: it has no builder_class")
        return self.builder_class(self)

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
        self.check(config)
        return 0

    def restricted(self, candidate: int) -> "Space":
        """The space of one candidate's configs: the same ``name``, and its configs are configs of this
        space, so their records are shared (a space without candidates is its own only candidate)."""
        if not isinstance(candidate, (int, np.integer)) or isinstance(candidate, bool) or candidate != 0:
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
        """Up to ``n`` (at most :data:`MAX_SAMPLES`) distinct random configs not in ``exclude``
        (fewer if the space runs dry: after 1000 draws in a row that found nothing new)."""
        generator("rng", rng)
        n = integer("n", n, minimum=0, maximum=MAX_SAMPLES)
        seen = set(exclude or ())
        out: list[Config] = []
        tries = since_new = 0
        limit = max_tries if max_tries is not None else 50 * n + 100
        while len(out) < n and tries < limit and since_new < 1000:
            tries += 1
            since_new += 1
            config = self.sample(rng)
            if config not in seen:
                seen.add(config)
                out.append(config)
                since_new = 0
        return out

    def describe(self, config: Config) -> str:
        self.check(config)
        return config.key

    def info(self, config: Config) -> dict[str, Any]:
        """Extra facts about a config for ``info`` dicts (e.g. layout assumptions)."""
        self.check(config)
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.workload.label}, {self.target.label})"
