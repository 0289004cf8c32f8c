"""Optuna over the ``tiles`` space: TPE by default, Gaussian-process or CMA-ES samplers where they fit.

**Parametrisation.** Optuna sees one integer parameter per hop coordinate of
the :class:`~tensorgym.spaces.TilesSpace` (``f.1``, ``f.2``, ``f.3``,
``rc.1``, ..., ``unroll``, ``cache_write``): the index of the coordinate's
value in its sorted choice list, i.e. for a tile level the index of a divisor
of the loop extent. Integers, not categoricals, because neighbouring
divisors behave alike (a tile of 8 is more like 16 than like 1), which TPE's
Parzen estimators, the GP's kernel and CMA-ES's Gaussian all exploit; a
categorical over a loop's whole factorisation list (120 entries for a
128-extent loop) would leave TPE no structure to learn in 128 trials.

Independent per-level divisors need not multiply to a divisor of the extent,
so the chosen levels are **repaired**, innermost first: each level takes the
divisor of the still-unassigned extent nearest (in log scale, ties to the
smaller) to the requested one, the innermost level at most the space's
``max_innermost``; level 0 takes what is left. A valid request is left
unchanged, so every config of the space is reachable and the map from
parameters to configs is onto. Optuna learns from the parameters it asked;
the repaired config is what is measured.

**Duplicates.** Several parameter vectors repair to the same config, and
samplers repeat themselves late in a run. A config this run already measured
is answered from the run's history (``history.seen``): the
trial is told the known value and costs no measurement and no budget. After
``max_duplicates`` duplicates in a row, the agent proposes a random config the
run has not measured (``history.sample``) through ``study.enqueue_trial``, so a
converged sampler cannot loop forever; when no unmeasured config is left the
search ends early.

**Limits.** On a GPU the tiles space also bounds threads, shared memory and registers
per block; a repaired config beyond them is told 0 GFLOP/s without being built, and
costs no budget (it counts towards the duplicates in a row, above).

**Failures.** A kernel that fails to build, crashes, times out or computes a
wrong result is told the value 0 GFLOP/s (the study maximises GFLOP/s), so
samplers learn to avoid its region; a FAIL state would hide it from TPE and
invite the same proposal again. Trials asked but not measured because the
budget ran out are told FAIL.

**Storage and resume.** The study is kept in an Optuna RDB storage in SQLite,
by default ``<tensorgym db path>.optuna.db`` beside the tensorgym database
(its own file: tensorgym's tables are not touched), named after (workload,
space, target, agent, sampler, seed) and opened with ``load_if_exists=True``.
Optuna creates a new storage's tables in several transactions, so processes
starting together would collide; the storage and the study are created
under an exclusive file lock (``<storage file>.lock``, left beside it), which
:func:`open_storage` (and so :meth:`OptunaAgent.resolve_storage`) takes itself.
Where the lock cannot exclude another process (a file system whose ``flock``
is local to each machine), a creation that collides with another one (a
table or the alembic version row already made) is retried: Optuna's creation
skips what exists, so the retry completes the storage.
Errors of the storage are raised as :class:`~tensorgym.database.DatabaseError`.
A re-run replays the study's trials, in order, through the loop (the
tensorgym database answers them without compiling, and the Tuner charges
them their original wall time), tells trials left RUNNING by an interrupted
run, and asks for more until the budget is spent. An in-memory tensorgym
database gets an in-memory study.

**Determinism.** The sampler is seeded from the agent's ``rng``, and every
ask/tell happens in one process in a fixed order, so a seed gives the same
proposals (measured values aside). Replayed runs continue with a freshly
seeded sampler: the measurements already made are reused, the proposals after
them may differ from an uninterrupted run's.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import random
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tensorgym.checks import integer
from tensorgym.config import Config
from tensorgym.database import DatabaseError
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.factors import divisors
from tensorgym.record import Record
from tensorgym.spaces.base import MAX_SAMPLES, Space
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.strategy import GeneratorStrategy, Search, SearchHistory

from .base import SearchAgent

log = logging.getLogger(__name__)

SAMPLERS = ("tpe", "gp", "cmaes", "random")


def _optuna():
    try:
        import optuna
    except ImportError:  # pragma: no cover - optuna is a dependency
        raise ImportError("the optuna agent needs Optuna: pip install optuna") from None
    return optuna


def _is_optuna_storage(value: Any) -> bool:
    try:
        return isinstance(value, _optuna().storages.BaseStorage)
    except ImportError:  # pragma: no cover
        return False


CREATE_ATTEMPTS = 8  # tries of a storage creation that collided with another process's
_held = threading.local()  # the lock files this thread holds (the lock is re-entrant within a thread)
_jitter = random.Random()  # the retries' back-off: its own generator, no global random state touched


@contextlib.contextmanager
def creation_lock(url: Any) -> Iterator[None]:
    """Hold an exclusive lock on ``<file>.lock`` beside an ``sqlite:///<file>`` storage (nothing for
    other storages): processes opening a new study storage at once then create it one at a time.

    Re-entrant within a thread (a second ``flock`` of the file by the same process would wait
    for itself); other threads and processes wait."""
    if not isinstance(url, str) or not url.startswith("sqlite:///"):
        yield
        return
    path = Path(url.removeprefix("sqlite:///"))
    held = _held.__dict__.setdefault("paths", set())
    key = str(path.absolute())
    if key in held:
        yield
        return
    try:
        handle = open(f"{path}.lock", "a")  # noqa: SIM115 - held for the block
    except OSError as exc:
        raise DatabaseError(f"cannot create the Optuna study storage beside {path}: {exc.strerror}: "
                            f"{exc.filename}") from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_storage(url: str, *, lock: bool = True):
    """The Optuna RDB storage at ``url``, created if new, safely when other processes open it at once.

    Optuna makes a new storage's tables, its version row and its alembic version row in
    separate transactions; two processes doing it together fail with ``table ... already
    exists`` or ``UNIQUE constraint failed: alembic_version.version_num``. The creation runs
    under :func:`creation_lock` (``lock=False``: without it, as where the file system's locks
    do not reach the other process), and a creation that collided anyway is retried, up to
    :data:`CREATE_ATTEMPTS` times: the retry finds what the other process made and skips it.
    """
    optuna = _optuna()
    from sqlalchemy.exc import IntegrityError, OperationalError

    with creation_lock(url) if lock else contextlib.nullcontext():
        for attempt in range(CREATE_ATTEMPTS):
            try:
                return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
            except (IntegrityError, OperationalError) as exc:
                if attempt == CREATE_ATTEMPTS - 1 or not _creation_collided(exc):
                    raise
                log.debug("the Optuna storage %s: creation collided with another process's (%s); retrying",
                          url, str(exc).splitlines()[0][:200])
                time.sleep(_jitter.uniform(0.01, 0.05) * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def _creation_collided(exc: Exception) -> bool:
    """A storage creation failed because another process created the same thing at the same time."""
    from sqlalchemy.exc import IntegrityError

    if isinstance(exc, IntegrityError):  # the version rows: a unique or primary key, or their check
        return True
    text = str(getattr(exc, "orig", None) or exc).lower()
    return "already exists" in text or "database is locked" in text


@contextlib.contextmanager
def storage_errors(url: Any) -> Iterator[None]:
    """Turn the storage's database errors (SQLAlchemy's, Optuna's) into a tensorgym DatabaseError."""
    optuna = _optuna()
    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # pragma: no cover - optuna's RDB storage needs it
        SQLAlchemyError = ()  # noqa: N806
    try:
        yield
    except (SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
        cause = getattr(exc, "orig", None) or exc
        raise DatabaseError(f"the Optuna study storage {url} failed: {type(cause).__name__}: "
                            f"{str(cause).splitlines()[0][:300]}") from exc


class TilesParametrisation:
    """Optuna parameters <-> configs of a :class:`TilesSpace` (see the module docs)."""

    def __init__(self, space: Space):
        if not isinstance(space, TilesSpace):
            raise TypeError(f"the optuna agent works in the tiles space, got {type(space).__name__}")
        self.space = space
        self.coordinates = space.coordinates

    def distributions(self) -> dict[str, Any]:
        optuna = _optuna()
        return {c.label: optuna.distributions.IntDistribution(0, len(c.choices) - 1) for c in self.coordinates}

    @property
    def signature(self) -> dict[str, int]:
        """Parameter name -> number of values; a stored study must have the same."""
        return {c.label: len(c.choices) for c in self.coordinates}

    def config(self, params: Mapping[str, int]) -> Config:
        """The (repaired) config of a parameter vector."""
        space = self.space
        requested: dict[str, list[int]] = {lp.name: [1] * space.levels[lp.name] for lp in space.loops}
        values: dict[str, Any] = {}
        for coord in self.coordinates:
            index = min(max(int(params[coord.label]), 0), len(coord.choices) - 1)
            if coord.level < 0:
                values[coord.knob] = coord.choices[index]
            else:
                requested[coord.knob][coord.level] = coord.choices[index]
        for lp in space.loops:
            if space.bounds is not None:  # a benchmark space: the nearest of the tilings it keeps
                values[lp.name] = space.tiling.nearest_tiling(lp.name, requested[lp.name])
            else:
                values[lp.name] = self._repair(lp.extent, requested[lp.name])
        return Config(values)

    def params(self, config: Config) -> dict[str, int]:
        """The parameter vector that maps to ``config`` unchanged."""
        self.space.check(config)
        return {c.label: self.space.coordinate_index(config, c) for c in self.coordinates}

    def _repair(self, extent: int, levels: list[int]) -> tuple[int, ...]:
        tiles = [1] * len(levels)
        left = extent
        for level in range(len(levels) - 1, 0, -1):
            options = divisors(left)
            if level == len(levels) - 1:
                options = tuple(d for d in options if d <= self.space.max_innermost)
            want = math.log(levels[level])
            tiles[level] = min(options, key=lambda d: (abs(math.log(d) - want), d))
            left //= tiles[level]
        tiles[0] = left
        return tuple(tiles)


class OptunaAgent(SearchAgent, GeneratorStrategy):
    """Black-box optimisation of the tiles space with an Optuna sampler.

    Args:
        sampler: ``"tpe"`` (default; Optuna's multivariate TPE), ``"gp"``
            (Gaussian-process Bayesian optimisation; needs PyTorch and SciPy,
            and takes seconds per proposal late in a run), ``"cmaes"`` (the
            ``cmaes`` package, a tensorgym dependency) or
            ``"random"``.
        storage: where the study lives: ``"auto"`` (beside the tensorgym
            database, see the module docs), ``None`` (in memory: no resume),
            an SQLAlchemy URL such as ``"sqlite:///study.db"``, or an Optuna
            storage object.
        batch_size: configs proposed before they are measured together (built
            in parallel, timed one by one). 1 lets every proposal see every
            earlier result; larger batches use TPE's constant liar.
        n_startup_trials: random trials before the model-based sampler starts.
        max_duplicates: already-measured proposals in a row after which a
            random unmeasured config is proposed instead.
    """

    name = "optuna"
    spaces = ("tiles",)

    def __init__(self, sampler: str = "tpe", storage: Any = "auto", batch_size: int = 2, n_startup_trials: int = 10,
                 max_duplicates: int = 32):
        if not isinstance(sampler, str) or sampler not in SAMPLERS:
            raise InvalidArgumentError(f"unknown Optuna sampler {sampler!r}; use one of {SAMPLERS}")
        if sampler == "cmaes":
            try:
                import cmaes  # noqa: F401
            except ImportError:
                raise InvalidArgumentError("sampler='cmaes' needs the cmaes package: pip install cmaes "
                                           "(or use sampler='tpe' or 'gp')") from None
        if not (storage is None or isinstance(storage, str) or _is_optuna_storage(storage)):
            raise InvalidTypeError(f"storage is 'auto', None, an SQLAlchemy URL or an Optuna storage, got "
                                   f"{type(storage).__name__}")
        if isinstance(storage, str) and storage != "auto" and "://" not in storage:
            raise InvalidArgumentError(f"storage {storage!r} is not an SQLAlchemy URL (e.g. 'sqlite:///study.db'); "
                                       "or use 'auto' (beside the tensorgym database) or None (in memory)")
        batch_size = integer("batch_size", batch_size, minimum=1, maximum=MAX_SAMPLES)
        n_startup_trials = integer("n_startup_trials", n_startup_trials, minimum=0)
        max_duplicates = integer("max_duplicates", max_duplicates, minimum=1)
        self.sampler = sampler
        self.storage = storage
        self.batch_size = batch_size
        self.n_startup_trials = n_startup_trials
        self.max_duplicates = max_duplicates

    # -- study plumbing ----------------------------------------------------------
    def make_sampler(self, seed: int):
        optuna = _optuna()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if self.sampler == "tpe":
                return optuna.samplers.TPESampler(seed=seed, n_startup_trials=self.n_startup_trials,
                                                  constant_liar=self.batch_size > 1)
            if self.sampler == "gp":
                return optuna.samplers.GPSampler(seed=seed, n_startup_trials=self.n_startup_trials)
            if self.sampler == "cmaes":
                return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=self.n_startup_trials,
                                                    warn_independent_sampling=False)
            return optuna.samplers.RandomSampler(seed=seed)

    def storage_url(self) -> Any:
        """The storage this run uses: a URL, an Optuna storage object, or None (in memory)."""
        if self.storage != "auto":
            return self.storage
        path = getattr(self.database, "path", None)
        if not path or path == ":memory:":
            return None
        return f"sqlite:///{path}.optuna.db"

    def resolve_storage(self):
        """The Optuna storage for this run (None: in memory), an RDB storage made by :func:`open_storage`
        (safe when other processes create it at the same moment)."""
        url = self.storage_url()
        if not isinstance(url, str):
            return url
        return open_storage(url)

    def study_name(self, seed_label: str) -> str:
        space = self.space
        return (f"tensorgym/{self.name}/{self.sampler}/{space.workload.key}/{space.name}/"
                f"{space.target.fingerprint}/seed={seed_label}")

    # -- search --------------------------------------------------------------------
    def search(self, history: SearchHistory, rng: np.random.Generator) -> Search:
        optuna = _optuna()
        params = TilesParametrisation(history.space)
        distributions = params.distributions()
        sampler_seed = int(rng.integers(2**31 - 1))
        url = self.storage_url()
        name = self.study_name(str(self.seed))  # a re-run with this seed resumes the study
        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # one INFO line per trial otherwise
        storage = None
        try:
            # Optuna makes a new SQLite storage's tables (and its alembic version row) outside one
            # transaction: processes starting together would collide, so creation is serialised.
            with creation_lock(url), storage_errors(url):
                storage = self.resolve_storage()
                study = optuna.create_study(study_name=name, storage=storage,
                                            sampler=self.make_sampler(sampler_seed), direction="maximize",
                                            load_if_exists=True)
                stored = study.user_attrs.get("parameters")
                if stored is None:
                    study.set_user_attr("parameters", params.signature)
            if stored is not None and stored != params.signature:
                raise InvalidArgumentError(f"the Optuna study {name!r} in {url} was made with other parameters "
                                           f"({stored}); delete it or pass another storage= to the optuna agent")
            with storage_errors(url):
                stats = {"duplicates": 0, "fallbacks": 0}
                stats["replayed"] = yield from self._replay(study, params, history)
                yield from self._optimise(study, params, distributions, history, rng, stats)
        finally:
            optuna.logging.set_verbosity(verbosity)
            if storage is not None and storage is not self.storage:
                storage.engine.dispose()  # ours: release the SQLite file
        url = getattr(storage, "url", storage)
        return {"sampler": self.sampler, "study": name, "storage": str(url) if url else "memory", **stats}

    def _replay(self, study, params: TilesParametrisation, history: SearchHistory) -> Search:
        """Feed the trials of an earlier run of this study back through the loop; returns how many."""
        optuna = _optuna()
        states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.RUNNING)
        earlier = [t for t in study.get_trials(deepcopy=False, states=states) if set(t.params) == set(params.signature)]
        if not earlier:
            return 0
        earlier.sort(key=lambda t: t.number)
        configs = [params.config(t.params) for t in earlier]
        records = {r.config: r for r in (yield configs)}
        for trial, config in zip(earlier, configs):
            if trial.state == optuna.trial.TrialState.RUNNING:  # left behind by an interrupted run
                self._tell(study, trial.number, records.get(config) or history.seen(config))
        log.info("resumed Optuna study %s: %d earlier trials replayed", study.study_name, len(earlier))
        return len(earlier)

    def _optimise(self, study, params: TilesParametrisation, distributions: dict, history: SearchHistory,
                  rng: np.random.Generator, stats: dict[str, int]) -> Search:
        in_a_row = 0  # duplicate proposals since the last new config
        while not self.finishing:
            want = self.batch_size if self.asked is None else min(self.batch_size, self.asked)
            batch: dict[Config, None] = {}  # new configs, in proposal order
            asked: list[tuple[int, Config]] = []
            while len(batch) < want:
                if in_a_row >= self.max_duplicates:
                    fresh = [c for c in history.sample(rng, want) if c not in batch]
                    if not fresh:
                        break  # every config of the space has been measured
                    study.enqueue_trial(params.params(fresh[0]))
                    stats["fallbacks"] += 1
                    in_a_row = 0
                trial = study.ask(distributions)
                config = params.config(trial.params)
                if not history.space.is_valid(config):  # beyond a GPU's limits: nothing to build, learn it is bad
                    study.tell(trial, 0.0)
                    stats["outside_limits"] = stats.get("outside_limits", 0) + 1
                    in_a_row += 1
                    continue
                known = history.seen(config)
                if known is not None:
                    self._tell(study, trial, known)
                    stats["duplicates"] += 1
                    in_a_row += 1
                    continue
                if config in batch:
                    stats["duplicates"] += 1
                    in_a_row += 1
                else:
                    batch[config] = None
                    in_a_row = 0
                asked.append((trial, config))
            if not batch:
                return
            records = {r.config: r for r in (yield list(batch))}
            for trial, config in asked:
                self._tell(study, trial, records.get(config))

    @staticmethod
    def _tell(study, trial: Any, record: Record | None) -> None:
        """Tell ``trial`` (an asked Trial, or the number of a stored one) what its config measured."""
        optuna = _optuna()
        if record is None:  # asked, but the budget ran out before it was measured
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        if isinstance(trial, optuna.trial.Trial):
            trial.set_user_attr("status", record.status.value)
        study.tell(trial, record.score)
