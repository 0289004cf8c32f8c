"""What every tensorgym environment shares: a workload, a space, and an evaluator.

Subclasses declare their ``space_name`` and their Gymnasium spaces, and
implement ``reset``/``step``; this base resolves the target, opens the
database, takes (lazily) a measurer, and closes what it opened.

**Gymnasium's conventions** (shared with the network env):

* episodes are cut by Gymnasium's ``TimeLimit``: the registered ids carry
  ``max_episode_steps`` (:data:`DEFAULT_MAX_STEPS`), so ``gym.make`` adds it,
  and the env under it has no step limit of its own; an env built directly
  (no ``TimeLimit`` around it) truncates itself after ``max_steps`` steps
  (64 by default here; the network env only when given ``max_steps``);
* ``metadata["autoreset_mode"]`` is ``NEXT_STEP``, what ``SyncVectorEnv`` does;
* envs given no ``measurer=`` share one per target and process
  (:func:`acquire_shared_measurer`), so the envs of
  ``gym.make_vec(id, num_envs=4, vectorization_mode="sync")`` time their
  kernels one at a time through one measurer; ``vectorization_mode="async"``
  is refused (:class:`ParallelTimingError`) for envs that measure, since
  kernels timed at once in several processes would share the cores;
* ``env.spec`` describes the env with data only (:func:`portable_spec`): the
  database by its path, no measurer, so Gymnasium may deep-copy it (every
  wrapper's ``spec`` does, and ``gym.make(env.spec)``, which ``check_env``
  calls) without touching the live resources.
"""

from __future__ import annotations

import atexit
import dataclasses
import math
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

from tensorgym.catalog import make_space
from tensorgym.config import Config
from tensorgym.checks import choice, integer
from tensorgym.database import Database, database_path, default_path
from tensorgym.errors import InvalidArgumentError, InvalidTypeError, TensorgymError
from tensorgym.evaluator import Evaluator
from tensorgym.measure.measurer import Measurer
from tensorgym.record import Status
from tensorgym.spaces.base import Space
from tensorgym.target import Target, resolve_target
from tensorgym.workloads import Workload

SpaceT = TypeVar("SpaceT", bound=Space)

DEFAULT_MAX_STEPS = 64  # steps per episode: the registered ids' max_episode_steps, a directly built env's max_steps
# Every tensorgym env's metadata: what SyncVectorEnv does by default (reset on the step after an episode ends).
METADATA: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4, "autoreset_mode": AutoresetMode.NEXT_STEP}


class NoWorkingStart(TensorgymError, RuntimeError):
    """An episode could not start: every start config drawn failed to run."""


class ParallelTimingError(InvalidArgumentError):
    """An env that measures kernels was asked to run beside others in parallel processes."""


def check_reset_options(options: Any, known: tuple[str, ...]) -> dict[str, Any]:
    """``reset``'s ``options`` as a dict (None: no options); unknown keys are refused."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise InvalidTypeError(f"reset options are a dict (e.g. {{'config': ...}}), got {type(options).__name__}")
    unknown = sorted(map(str, set(options) - set(known)))
    if unknown:
        raise InvalidArgumentError(f"unknown reset option(s) {', '.join(unknown)}; this env takes "
                                   f"{', '.join(known) or 'none'}")
    return dict(options)


def check_max_steps(max_steps: Any) -> int | None:
    """``max_steps`` as a positive ``int`` (NumPy integers too: ``TimeLimit`` takes only ``int``), or None."""
    return None if max_steps is None else integer("max_steps", max_steps, minimum=1)


def tuning_env(env: gym.Env) -> "TuningEnv":
    """The tensorgym env under any Gymnasium wrappers (raises ``TypeError`` for other envs)."""
    base = env.unwrapped if isinstance(env, gym.Env) else env
    if not isinstance(base, TuningEnv):
        raise InvalidTypeError(f"expected a tensorgym environment (gym.make('Conv2d-ResNet-R5-v0') and the like), "
                               f"got {type(base).__name__}")
    return base


# -- one measurer per target and process ------------------------------------------------------------
class SharedMeasurers:
    """The measurers that the envs of this process given no ``measurer=`` share: one per target, started by
    its first user, closed when the last one gives it back (or at exit).

    Why: each :class:`~tensorgym.measure.Measurer` owns a builder pool and a runner, and times kernels on
    the cores while its builders wait. One measurer per env (the envs of ``gym.make_vec``, the layers of a
    comparison) would multiply the processes, and measurers driven from several threads would time
    kernels over each other; through one measurer, kernels are timed one at a time.

    Args:
        factory: starts the measurer of a target (default :class:`~tensorgym.measure.Measurer`; tests put
            a synthetic one here).
    """

    def __init__(self, factory: Callable[[Target], Measurer] = Measurer):
        self.factory = factory
        self._lock = threading.Lock()
        self._entries: dict[Any, list] = {}  # target key -> [measurer, users]
        self._pid = os.getpid()

    @staticmethod
    def _key(target: Target) -> Any:
        try:
            hash(target)
            return target
        except TypeError:  # a target with an unhashable field: its description names it as well
            return repr(target)

    def _check_process(self) -> None:
        # A forked child inherits the table, but the worker processes and pipes are the parent's: the
        # child starts its own measurers, and must not close the parent's.
        if self._pid != os.getpid():
            self._entries = {}
            self._pid = os.getpid()

    def acquire(self, target: Target) -> Measurer:
        """The shared measurer of ``target`` (started if no env holds it); one more user."""
        with self._lock:
            self._check_process()
            key = self._key(target)
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = [self.factory(target), 0]
            entry[1] += 1
            return entry[0]

    def release(self, measurer: Measurer) -> None:
        """One user is done with ``measurer``; the last one closes it."""
        with self._lock:
            self._check_process()
            for key, entry in list(self._entries.items()):
                if entry[0] is measurer:
                    entry[1] -= 1
                    if entry[1] <= 0:
                        del self._entries[key]
                        measurer.close()
                    return

    def users(self, measurer: Measurer) -> int:
        """How many envs hold ``measurer`` (0: it is not one of the shared ones, or no longer)."""
        with self._lock:
            self._check_process()
            return next((entry[1] for entry in self._entries.values() if entry[0] is measurer), 0)

    def close_all(self) -> None:
        """Close every shared measurer (at exit: envs never closed still count as users)."""
        with self._lock:
            self._check_process()
            entries, self._entries = list(self._entries.values()), {}
        for measurer, _ in entries:
            try:
                measurer.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown: nothing is left to report to
                pass


SHARED_MEASURERS = SharedMeasurers()
atexit.register(SHARED_MEASURERS.close_all)


def acquire_shared_measurer(target: Target) -> Measurer:
    """The measurer of ``target`` that the envs of this process given no ``measurer=`` share (started by its
    first user); give it back with :func:`release_shared_measurer`."""
    return SHARED_MEASURERS.acquire(target)


def release_shared_measurer(measurer: Measurer) -> None:
    """One user of a shared measurer is done with it; the last one closes it."""
    SHARED_MEASURERS.release(measurer)


def _in_async_vector_env() -> bool:
    """Whether this env is being built for Gymnasium's ``AsyncVectorEnv``: by its constructor (which builds a
    first env in the calling process for the spaces) or in one of its worker processes."""
    from gymnasium.vector import AsyncVectorEnv

    init = AsyncVectorEnv.__init__.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is init:
            return True
        frame = frame.f_back
    return multiprocessing.current_process().name.startswith(f"Worker<{AsyncVectorEnv.__name__}>")


def refuse_parallel_timing(backend: str) -> None:
    """Raise :class:`ParallelTimingError` when an env that measures (``backend="tvm"``) is built for
    ``AsyncVectorEnv``: its envs would time kernels at once in several processes, on the same cores."""
    if backend == "tvm" and _in_async_vector_env():
        raise ParallelTimingError(
            "vectorization_mode='async' runs every env in its own process, where their kernel timings would "
            "overlap on the cores; use vectorization_mode='sync' (its envs share one measurer) or "
            "backend='replay'")


# -- specs that hold data -----------------------------------------------------------------------------
def portable_spec(spec: EnvSpec | None) -> EnvSpec | None:
    """``spec`` with its kwargs made of data: a :class:`~tensorgym.database.Database` by its path, no
    measurer or evaluator (an env made from the spec takes the shared measurer of its target).

    ``gym.make`` records the keyword arguments it was given in ``env.spec``, and Gymnasium deep-copies
    specs (every wrapper's ``spec`` property does, ``make_vec`` copies the spec it is given): a copy of an
    open SQLite connection or of a measurer's processes cannot be made, or would close them when it is
    collected. A spec of data can be copied, printed and made again (``gym.make(env.spec)``); the env
    itself keeps the objects it was given.
    """
    if spec is None:
        return None
    kwargs = dict(spec.kwargs)
    evaluator = kwargs.pop("evaluator", None)
    if evaluator is not None and kwargs.get("db") is None:
        kwargs["db"] = getattr(evaluator, "database", None)  # the records an env made again reads
    if isinstance(kwargs.get("db"), Database):
        kwargs["db"] = kwargs["db"].path  # ":memory:" stays ":memory:": a new, empty database
    if kwargs.get("db") is None:
        kwargs.pop("db", None)
    if isinstance(kwargs.get("measurer"), Measurer):
        del kwargs["measurer"]
    return dataclasses.replace(spec, kwargs=kwargs)


class DataSpec:
    """Keeps ``env.spec`` (set by ``gym.make``) as :func:`portable_spec` makes it."""

    _spec: EnvSpec | None = None

    @property
    def spec(self) -> EnvSpec | None:
        return self._spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        self._spec = portable_spec(value)


class TuningEnv(DataSpec, gym.Env[np.ndarray, np.int64], Generic[SpaceT]):
    """Base of tensorgym environments over one workload and one search space.

    Args:
        workload: the operator instance to tune.
        target: ``"llvm"`` (the local CPU, default), ``"cuda"`` (this machine's GPU; the ``tiles`` space
            is then Ansor's GPU sketch) or a :class:`~tensorgym.target.Target`.
        db: a :class:`~tensorgym.database.Database`, a path to its SQLite file (default:
            :func:`tensorgym.database.default_path`, ``$TENSORGYM_DB`` or
            ``~/.cache/tensorgym/records.db``), or ``":memory:"`` for a temporary one;
            measurements are stored there and reused. A replaying env opens it read-only.
        measurer: a :class:`~tensorgym.measure.Measurer` to measure with (it stays open when the env
            closes); by default the env takes the one that the envs of this process share for its
            target (:func:`acquire_shared_measurer`) on first use, and gives it back in :meth:`close`.
        backend: ``"tvm"`` (compile and time new configs) or ``"replay"`` (answer only from
            the database, compile nothing; moves to configs it does not hold are masked).
        max_steps: steps after which the env truncates an episode itself, for an env built directly
            (:func:`tensorgym.make_env`, the class); ``None``: never, as in the envs of ``gym.make``, where
            Gymnasium's ``TimeLimit`` cuts episodes (the id's ``max_episode_steps``, or ``max_steps=``
            given to ``gym.make``). :attr:`max_steps` is then ``math.inf``.
        render_mode: ``None`` or ``"ansi"``.
        evaluator: answer measurements with this :class:`~tensorgym.evaluator.Evaluator` instead of the
            env's own (a replaying or synthetic one, say). The env then works in the evaluator's space
            (no space options), and ``db`` defaults to the evaluator's database.
    """

    metadata = dict(METADATA)  # a class's own copy: vector envs and wrappers may edit theirs
    space_name: str = ""
    # Set by every subclass's __init__, from its space: the observation is a Box of floats in [0, 1],
    # the action one integer (one Discrete space, masked by action_masks()).
    observation_space: spaces.Box
    action_space: spaces.Discrete

    def __init__(self, workload: Workload, *, target: Target | str | None = None,
                 db: Database | str | Path | None = None, measurer: Measurer | None = None,
                 max_steps: int | None = DEFAULT_MAX_STEPS, render_mode: str | None = None, backend: str = "tvm",
                 evaluator: Evaluator | None = None, **space_options: Any):
        if not isinstance(workload, Workload):
            raise InvalidTypeError(f"workload must be a tensorgym Workload, got {type(workload).__name__}")
        max_steps = check_max_steps(max_steps)
        choice("backend", backend, ("tvm", "replay"))
        choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        if measurer is not None and not isinstance(measurer, Measurer):
            raise InvalidTypeError(f"measurer must be a tensorgym Measurer (or None: the target's shared one), "
                                   f"got {type(measurer).__name__} {measurer!r:.40}")
        if backend == "replay" and measurer is not None:
            raise InvalidArgumentError("backend='replay' measures nothing: do not pass a measurer")
        refuse_parallel_timing(backend)
        if db is not None and not isinstance(db, Database):
            db = database_path(db)  # refused before anything is built
        self.workload = workload
        if evaluator is not None:
            self._check_evaluator(evaluator, workload, space_options)
            self.target = evaluator.space.target
            self.search_space: SpaceT = evaluator.space
            if db is None:
                db = evaluator.database
        else:
            self.target = resolve_target(target)
            self.search_space = make_space(self.space_name, workload, self.target, **space_options)
        # math.inf, not None, when the env has no limit of its own: subclasses compare steps with it.
        self.max_steps: int | float = max_steps if max_steps is not None else math.inf
        self.render_mode = render_mode
        self.backend = backend
        self._owns_db = not isinstance(db, Database)
        # A replaying env only reads: its database opens read-only (it may be on read-only media).
        self.database = db if isinstance(db, Database) else Database(db if db is not None else default_path(),
                                                                      readonly=backend == "replay")
        self._measurer = measurer
        self._shares_measurer = False  # holds a user's count of the shared measurer (released in close)
        self._evaluator: Evaluator | None = evaluator

    def _check_evaluator(self, evaluator: Evaluator, workload: Workload, space_options: dict[str, Any]) -> None:
        if not isinstance(evaluator, Evaluator):
            raise InvalidTypeError(f"evaluator must be a tensorgym Evaluator, got {type(evaluator).__name__}")
        space = evaluator.space
        if not isinstance(space, Space) or space.name != self.space_name or space.workload != workload:
            raise InvalidArgumentError(f"evaluator must answer configs of the {self.space_name!r} space of "
                                       f"{workload.label}; got one over {space!r}")
        if space_options:
            raise InvalidArgumentError(f"the env takes its space from the evaluator; drop the space options "
                                       f"{sorted(space_options)}")

    @property
    def measurer(self) -> Measurer | None:
        """The measurer (the given one, or the shared one of the target, taken on first use); None with the
        replay backend or a given evaluator."""
        if self._measurer is None and self.backend == "tvm" and self._evaluator is None:
            self._measurer = acquire_shared_measurer(self.target)
            self._shares_measurer = True
        return self._measurer

    @property
    def evaluator(self) -> Evaluator:
        """The record source of this env (created on first use: no process starts before)."""
        if self._evaluator is None:
            self._evaluator = Evaluator(self.search_space, self.database, self.measurer)
        return self._evaluator

    def recorded_configs(self) -> list[Config]:
        """Configs of this env's space whose kernels ran correctly, from the database (oldest first)."""
        space = self.search_space
        return [r.config for r in self.database.records(self.workload.key, self.target.fingerprint, space.name,
                                                         Status.OK)]

    def close(self) -> None:
        if self._shares_measurer:
            release_shared_measurer(self._measurer)
            self._shares_measurer = False
            self._measurer = None
            self._evaluator = None
        if self._owns_db and self.database is not None:
            self.database.close()
            self._owns_db = False
        super().close()
