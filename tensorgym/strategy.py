"""Search strategies: ``ask(n) -> configs``, ``tell(records)``; one loop measures between the two.

A :class:`SearchStrategy` proposes configs and learns from their records; it
never measures, never counts a budget and never owns a loop or a thread. The
loop that drives it (the :class:`tensorgym.tuner.Tuner`, for a layer's run
or a network's rounds, or a user stepping by hand) asks, measures through
the Evaluator, and tells. This is
the shape of Optuna's ask/tell and of MetaSchedule's
``generate_measure_candidates`` / ``notify_runner_results``, so a network
scheduler can interleave many strategies, an RL policy can propose through
the same loop, and a user's strategy runs beside the bundled ones.

A run of a strategy:

1. ``start(space, rng, seed, database=None)``: the space it searches, the
   seeded generator all its randomness comes from (the seed itself and the
   run's database, for strategies that keep state of their own beside it,
   such as an Optuna study), and a fresh :class:`SearchHistory`;
2. ``ask(n)``: up to about ``n`` configs to measure next (``n`` is what the
   budget leaves, a hint: the loop measures a prefix of a longer batch, and a
   strategy that proposes in fixed batches may ignore it); ``[]`` means the
   search has nothing more to propose;
3. ``tell(records)``: the records of the configs of the last ask that were
   measured, in the order asked (a prefix when the budget cut the batch;
   configs this run measured before are answered again, for free). The
   records are in :attr:`SearchStrategy.history` before ``tell`` is called;
4. ``summary()``: facts for the run's result (``TuningResult.extra``).

Writing a search as a loop is often clearer than as a state machine:
:class:`GeneratorStrategy` lets a subclass write ``records = yield batch``
where a loop would measure, and turns that generator into ask/tell (no
thread: the generator runs only inside ``ask``).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping, Sequence
from typing import Any

import numpy as np

from .config import Config
from .errors import InvalidArgumentError, InvalidTypeError
from .record import Record
from .spaces.base import Space

# What a generator search yields (a batch to measure), is sent (the batch's records) and returns (its summary).
Search = Generator[list[Config], list[Record], "dict[str, Any] | None"]


class SearchHistory:
    """What a strategy knows of its own run: every record told to it, in order, and the best so far."""

    def __init__(self, space: Space):
        self.space = space
        self.records: list[Record] = []
        self._by_config: dict[Config, Record] = {}
        self.best: Record | None = None

    def add(self, records: Sequence[Record]) -> None:
        for record in records:
            if record.config in self._by_config:
                continue  # a config this run measured before, answered again
            self._by_config[record.config] = record
            self.records.append(record)
            if record.ok and (self.best is None or record.gflops > self.best.gflops):
                self.best = record

    def __len__(self) -> int:
        return len(self.records)

    def seen(self, config: "Config | Mapping[str, Any] | str") -> Record | None:
        """The record of ``config`` if this run measured it."""
        return self._by_config.get(self.space.parse(config) if not isinstance(config, Config) else config)

    def sample(self, rng: np.random.Generator, n: int = 1) -> list[Config]:
        """Up to ``n`` distinct random configs this run has not measured."""
        return self.space.sample_many(rng, n, exclude=set(self._by_config))

    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        return self.space.neighbours(config, hops)


class SearchStrategy(ABC):
    """A search as ask/tell (see the module docs).

    Attributes:
        name: the name it is listed under (``tensorgym.catalog.AGENTS``).
        spaces: the spaces it searches (``None``: any).
        space: the space of the current run (after :meth:`start`).
        history: the current run's records (after :meth:`start`).
    """

    name: str = ""
    spaces: tuple[str, ...] | None = None

    space: Space
    history: SearchHistory

    def spawn(self) -> "SearchStrategy":
        """A fresh copy for one more run (its options, none of its run state), so that runs never share state."""
        return copy.deepcopy(self)

    def start(self, space: Space, rng: np.random.Generator, seed: int = 0, database: Any = None) -> None:
        """Begin a run over ``space``; every random choice of the run is drawn from ``rng``. ``database`` is
        where the run's records go (None: none, or not a file), for strategies that store state beside it."""
        if not isinstance(space, Space):
            raise InvalidTypeError(f"a strategy searches a Space, got {type(space).__name__}")
        if self.spaces is not None and space.name not in self.spaces:
            raise InvalidArgumentError(f"{self.name or type(self).__name__} works in the {', '.join(self.spaces)} "
                                       f"space(s), not in {space.name!r}")
        self.space = space
        self.rng = rng
        self.seed = int(seed)
        self.database = database
        self.history = SearchHistory(space)

    @abstractmethod
    def ask(self, n: int | None = None) -> list[Config]:
        """Up to about ``n`` configs to measure next (``None``: no limit); ``[]``: nothing more to propose."""

    def tell(self, records: Sequence[Record]) -> None:  # noqa: B027 - a strategy that learns overrides it
        """The records of the last ask's configs that were measured (already in :attr:`history`)."""

    def summary(self) -> dict[str, Any]:
        """Facts about the run for its result (``TuningResult.extra``)."""
        return {}

    def close(self) -> None:  # noqa: B027 - strategies holding resources release them here
        """The run is over (its budget is spent, or its driver stopped it)."""


class GeneratorStrategy(SearchStrategy):
    """A strategy whose search is written as a generator (see the module docs).

    Subclasses implement :meth:`search`, which yields batches (``records = yield batch``)
    and may return a summary dict. :attr:`asked` is the ``n`` of the current ask. The
    generator runs only inside :meth:`ask` and :meth:`close`. When the driver stops (the
    budget is spent), :meth:`close` sends the last batch's records with :attr:`finishing`
    set, so the search can book them and return without proposing more (its loops test
    ``self.finishing``); a batch yielded anyway is dropped and the generator closed.
    """

    asked: int | None = None
    finishing = False

    def start(self, space: Space, rng: np.random.Generator, seed: int = 0, database: Any = None) -> None:
        super().start(space, rng, seed, database)
        self._search: Search | None = self.search(self.history, rng)
        self._primed = False
        self._told: list[Record] = []
        self._summary: dict[str, Any] = {}
        self.finishing = False

    @abstractmethod
    def search(self, history: SearchHistory, rng: np.random.Generator) -> Search:
        """The search: ``records = yield batch`` measures ``batch``; the generator's return value is its summary."""

    def ask(self, n: int | None = None) -> list[Config]:
        if self._search is None:
            return []
        self.asked = n
        try:
            if not self._primed:
                self._primed = True
                batch = next(self._search)
            else:
                told, self._told = self._told, []
                batch = self._search.send(told)
            for _ in range(_MAX_EMPTY_YIELDS):  # an empty batch measures nothing: answer it at once
                if batch:
                    return list(batch)
                batch = self._search.send([])
        except StopIteration as stop:
            self._summary = dict(stop.value or {})
            self._search = None
            return []
        self._search.close()
        self._search = None
        return []

    def tell(self, records: Sequence[Record]) -> None:
        self._told = list(records)

    def summary(self) -> dict[str, Any]:
        return dict(self._summary)

    def close(self) -> None:
        if self._search is None:
            return
        search, self._search = self._search, None
        self.finishing = True
        try:
            if self._primed:
                search.send(self._told)  # book the last records; a batch it yields anyway is not measured
        except StopIteration as stop:
            self._summary = dict(stop.value or {})
        finally:
            search.close()


_MAX_EMPTY_YIELDS = 1000


class ReplaySearch(GeneratorStrategy):
    """A strategy that replays recorded configs, in the order they were first measured (the replay backend's):
    batches of ``batch_size`` (answered from the database) until they are used up."""

    name = "replay"

    def __init__(self, configs: Sequence[Config], batch_size: int):
        self.configs = list(configs)
        self.batch_size = max(1, int(batch_size))

    def search(self, history: SearchHistory, rng) -> Search:
        for i in range(0, len(self.configs), self.batch_size):
            yield self.configs[i:i + self.batch_size]
        return {"replayed": len(self.configs)}
