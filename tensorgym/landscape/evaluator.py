"""The ``landscape`` backend: an :class:`~tensorgym.evaluator.Evaluator` that answers from a landscape file.

:class:`LandscapeEvaluator` answers every config of a landscape's space from the file: it compiles
nothing, times nothing and never imports TVM, so an agent's run of 512 trials takes milliseconds of
evaluation. What it returns is made to be what the live pipeline would have returned:

* **Noise.** A landscape is one measurement of each config; measuring again gives another
  latency. Each seed of the evaluator (:meth:`LandscapeEvaluator.seed`) draws one such
  "re-measurement" of every config from its recorded samples, with a seeded
  ``numpy.random.Generator``: by default (``noise="bootstrap"``) the median of as many samples as the
  protocol took, drawn with replacement from the recorded ones, which has the spread of the live
  median; ``noise="sample"`` draws one recorded sample (wider); ``noise="none"`` keeps the recorded
  median. The draw of a config is fixed for a seed, whatever order configs are asked in and however
  often, just as a database answers a config it holds with the same record every time.
  GFLOP/s are recomputed from the drawn latency.
* **Clock.** The tuning loop (:class:`~tensorgym.tuner.Tuner`) charges each trial its record's
  ``wall_s``. Live, a batch is built in parallel by one builder process per core, then its kernels
  are checked and timed one at a time, and each record's ``wall_s`` is its share of the build phase
  plus its own run. With ``clock="batch"`` (the default) the evaluator accounts each
  :meth:`~LandscapeEvaluator.evaluate` call the same way from the recorded build and run seconds: the
  batch's builds are scheduled on ``build_workers`` workers in order, each on the first free one (as
  the builder pool does), and every record gets ``makespan / batch size + run_s``. So an env that
  steps one config at a time pays whole builds, and a GA batch of 16 pays a share, as they would live
  (a record's recorded ``wall_s`` is its share of the batch it was measured in, 16 configs when
  :mod:`.measuring` measured it, whatever batch an agent asks for now). Each build also costs
  ``build_overhead_s`` beyond the compile time its builder reported (sending the task, writing and
  collecting the library): by default the overhead that makes the recorded walls come out on
  average, ``cores * mean(wall_s - run_s) - mean(build_s)`` (at least 0; exact for measuring batches
  that kept every builder busy). ``clock="recorded"`` charges the recorded ``wall_s`` instead.
  The agent's own computing time is the Tuner's to add (it times everything outside evaluation).
* **Status**, build, run seconds, samples, CV and timing mode are the recorded ones; a failed
  config fails again.

A config outside the landscape raises :class:`~tensorgym.landscape.file.NotInLandscape` (a
:class:`~tensorgym.evaluator.NotMeasured`), naming whether it is in the full space but outside the
benchmark sub-space. :attr:`LandscapeEvaluator.scores` gives the recorded GFLOP/s of every config as
one array, for tabular agents that want the whole table at once.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ..checks import choice, integer, number
from ..config import Config
from ..errors import InvalidTypeError, TensorgymError
from ..evaluator import Evaluator
from ..record import Record
from ..spaces.base import Space
from .file import Landscape, LandscapeError, NotInLandscape

Noise = Literal["bootstrap", "sample", "none"]
Clock = Literal["batch", "recorded"]
NOISES = ("bootstrap", "sample", "none")
CLOCKS = ("batch", "recorded")


class LandscapeEvaluator(Evaluator):
    """Records of a landscape's configs, drawn from the file (see the module docs).

    Args:
        landscape: a :class:`Landscape` or the path of its file.
        seed: an int, a ``numpy.random.Generator`` or None (fresh entropy); :meth:`seed` draws again.
        space: the space agents search (default: the landscape's own, rebuilt from its metadata). It must be
            the landscape's space: the same name, workload and options.
        noise: ``"bootstrap"`` (default), ``"sample"`` or ``"none"``.
        clock: ``"batch"`` (default) or ``"recorded"``.
        build_workers: builder processes of the simulated pipeline (default: the landscape's cores, as the
            measurer has one builder per core).
        build_overhead_s: seconds each simulated build costs beyond its recorded compile time (default:
            estimated from the landscape, see the module docs).
    """

    database = None  # answers come from the file

    simulated = True  # answers from the landscape's measurements: first answers are simulated measurements

    def __init__(self, landscape: Landscape | str | os.PathLike, *, seed: int | np.random.Generator | None = None,
                 space: Space | None = None, noise: Noise = "bootstrap", clock: Clock = "batch",
                 build_workers: int | None = None, build_overhead_s: float | None = None):
        self.landscape = landscape if isinstance(landscape, Landscape) else Landscape.load(landscape)
        self.noise = choice("noise", noise, NOISES)
        self.clock = choice("clock", clock, CLOCKS)
        self.build_workers = integer("build_workers", self.landscape.metadata.cores if build_workers is None
                                     else build_workers, minimum=1)
        self.space = self._checked_space(space)
        self.build_overhead_s = (estimated_build_overhead(self.landscape)
                                 if build_overhead_s is None else number("build_overhead_s", build_overhead_s,
                                                                         minimum=0.0))
        self.measured = 0
        self.reused = 0
        self.seconds = 0.0  # real seconds spent answering (what a simulated run costs beside the agent's compute)
        land = self.landscape
        self._index = {config: i for i, config in enumerate(land.configs)}
        self._flops = float(land.workload.flops)
        # Per-row constants, as plain Python values: a record is built from them without NumPy scalars.
        self._configs = land.configs
        self._status = land.status
        self._cv = [None if np.isnan(v) else v for v in land.latency_cv.tolist()]
        self._samples = land.samples
        self._number = land.number.tolist()
        self._build = (land.build_s + self.build_overhead_s).tolist()  # what each build holds a worker for
        self._compile = land.build_s.tolist()
        self._run = land.run_s.tolist()
        self._recorded_wall = land.wall_s.tolist()
        self._timing = land.timing
        self._contention = [None if np.isnan(v) else v for v in land.contention.tolist()]
        self._error = land.error
        self._key, self._fingerprint, self._space_name = land.workload_key, land.fingerprint, land.space_name
        # Samples as a padded matrix (rows x MAX_SAMPLES) for drawing many rows at once.
        width = max([len(s) for s in land.samples] + [1])
        self._matrix = np.full((len(land), width), np.nan)
        self._stored = np.array([len(s) for s in land.samples], dtype=np.int64)
        for i, s in enumerate(land.samples):
            self._matrix[i, :len(s)] = s
        self._latency: list[float | None] = []  # this seed's draws, per row
        self._gflops: list[float | None] = []
        self._records: list[Record | None] = []  # each row's record, made once per seed
        self.seed(seed)

    def _checked_space(self, space: Space | None) -> Space:
        land = self.landscape
        if space is None:
            return land.space()
        if not isinstance(space, Space):
            raise InvalidTypeError(f"space must be a tensorgym Space, got {type(space).__name__}")
        options, wanted = _normal(getattr(space, "options", {})), _normal(land.metadata.space_options)
        if (space.name, space.workload.key, options) != (land.space_name, land.workload_key, wanted):
            raise LandscapeError(f"the {space.name} space of {space.workload.label} ({options or 'no options'}) is "
                                 f"not the landscape's ({land.space_name} of {land.workload_label}, "
                                 f"{wanted or 'no options'})")
        return space

    # -- drawing -------------------------------------------------------------------------
    def seed(self, seed: int | np.random.Generator | None = None) -> None:
        """Draw every config's latency again, from ``seed`` (an int, a Generator, or None: fresh entropy)."""
        if not isinstance(seed, np.random.Generator) and seed is not None:
            seed = integer("seed", seed, minimum=0)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        land = self.landscape
        latency = np.where(land.ok, land.latency_s, np.nan)
        rows = np.flatnonzero(land.ok & (self._stored > 0))
        if self.noise == "sample" and rows.size:
            picks = (rng.random(rows.size) * self._stored[rows]).astype(np.int64)
            latency[rows] = self._matrix[rows, picks]
        elif self.noise == "bootstrap" and rows.size:
            # The live median is of sample_count samples: resample that many from what is stored.
            draws = np.maximum(land.sample_count[rows], 1)
            for m in np.unique(draws):
                group = rows[draws == m]
                picks = (rng.random((group.size, int(m))) * self._stored[group, None]).astype(np.int64)
                latency[group] = np.median(self._matrix[group[:, None], picks], axis=1)
        self._latency = [None if np.isnan(v) else v for v in latency.tolist()]
        self._gflops = [None if v is None else self._flops / v / 1e9 for v in self._latency]
        self._records = [None] * len(self._latency)

    @property
    def scores(self) -> np.ndarray:
        """The recorded GFLOP/s of every config (its median latency's; 0.0: failed), in the landscape's order,
        read-only: the whole table at once, for tabular agents and for fractions of the true optimum."""
        return self.landscape.scores

    @property
    def drawn_scores(self) -> np.ndarray:
        """This seed's GFLOP/s of every config, in the landscape's order (0.0: failed)."""
        return np.array([g or 0.0 for g in self._gflops])

    @property
    def configs(self) -> tuple[Config, ...]:
        """Every config the evaluator answers, in the landscape's order (the rows of :attr:`scores`)."""
        return self._configs

    def index_of(self, config: Config) -> int:
        """The row of ``config`` in :attr:`scores`; raises :class:`NotInLandscape`."""
        return self._row(config)

    def _row(self, config: Config) -> int:
        try:
            row = self._index.get(config)
        except TypeError:  # unhashable: not a Config
            row = None
        return row if row is not None else self._refuse(config)

    # -- the Evaluator interface -------------------------------------------------------------
    def lookup(self, config: Config) -> Record | None:
        """The record ``evaluate([config])`` gives (this seed's draw), or None for a config outside the landscape."""
        row = self._index.get(config) if isinstance(config, Config) else None
        if row is None:
            return None
        return self._record(row, self._walls([row])[0])

    def evaluate(self, configs: Sequence[Config]) -> list[Record]:
        """One record per config, in order; a config outside the landscape raises :class:`NotInLandscape`."""
        start = time.perf_counter()
        rows = [self._row(config) for config in configs]
        walls = self._walls(rows)
        self.reused += len(rows)
        records = [self._record(row, wall) for row, wall in zip(rows, walls)]
        self.seconds += time.perf_counter() - start
        return records

    def _record(self, row: int, wall: float) -> Record:
        """Row ``row``'s record of this seed, charged ``wall`` seconds.

        Records are immutable, so each row's is made once per seed (charged as a batch of one, or as
        recorded) and shared; one charged otherwise is a copy with another ``wall_s``. Evaluation is
        the inner loop of every simulated run, and building a 20-field dataclass costs more than the
        rest of it together.
        """
        record = self._records[row]
        if record is None:
            record = self._records[row] = Record(
                workload=self._key, target=self._fingerprint, space=self._space_name, config=self._configs[row],
                status=self._status[row], latency_s=self._latency[row], latency_cv=self._cv[row],
                samples=self._samples[row], number=self._number[row], gflops=self._gflops[row],
                build_s=self._compile[row], run_s=self._run[row], wall_s=self._walls([row])[0], error=self._error[row],
                timing=self._timing[row], contention=self._contention[row])
        if record.wall_s == wall:
            return record
        copy = object.__new__(Record)  # dataclasses.replace() without re-running __init__ (a third of the time)
        copy.__dict__.update(record.__dict__)
        copy.__dict__["wall_s"] = wall
        return copy

    def _walls(self, rows: list[int]) -> list[float]:
        """Each row's ``wall_s`` for a batch of ``rows`` (see the module docs; repeats are built once)."""
        if self.clock == "recorded":
            return [self._recorded_wall[r] for r in rows]
        if len(rows) == 1:
            return [self._build[rows[0]] + self._run[rows[0]]]
        distinct = list(dict.fromkeys(rows))
        builds = [self._build[r] for r in distinct]
        if len(builds) <= self.build_workers:
            makespan = max(builds, default=0.0)
        else:
            free = [0.0] * self.build_workers  # when each worker is free, as a heap
            for seconds in builds:
                heapq.heappush(free, heapq.heappop(free) + seconds)
            makespan = max(free)
        share = makespan / max(1, len(distinct))
        return [share + self._run[r] for r in rows]

    def _refuse(self, config: object) -> int:
        if not isinstance(config, Config):
            where = f"not a Config but a {type(config).__name__}"
        elif self.space.is_valid(config):
            where = "not measured in this partial landscape"
        elif self._in_full_space(config):
            where = "in the full space but outside the landscape's bounded space"
        else:
            where = "not a config of the space"
        raise NotInLandscape(f"{getattr(config, 'key', config)!s:.160} is {where} ({self.landscape.workload_label}, "
                             f"{len(self.landscape)} configs): the landscape backend answers its configs only")

    def _in_full_space(self, config: Config) -> bool:
        from ..catalog import make_space

        try:
            full = getattr(self.space, "full_space", None)  # a benchmark space that knows its full space (no cache)
            if callable(full):
                return full().is_valid(config)
            return make_space(self.space.name, self.space.workload, self.space.target).is_valid(config)
        except TensorgymError:
            return False


def estimated_build_overhead(landscape: Landscape) -> float:
    """The per-build overhead that makes batches like the measuring ones (one builder per core of the landscape's
    CPU) cost what they cost (see the module docs)."""
    if not len(landscape):
        return 0.0
    shares = np.maximum(landscape.wall_s - landscape.run_s, 0.0)
    return max(0.0, float(landscape.metadata.cores * shares.mean() - landscape.build_s.mean()))


def _normal(options: dict) -> dict:
    """Space options as JSON would give them back (tuples as lists), for comparison."""
    import json

    return json.loads(json.dumps(options or {}, sort_keys=True))

