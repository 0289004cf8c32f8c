"""What every tensorgym environment shares: a workload, a space, and an evaluator.

Subclasses declare their ``space_name`` and their Gymnasium spaces, and
implement ``reset``/``step``; this base takes the target, database and
measurer from a :class:`~tensorgym.context.TuningContext`: the one given
(``context=``, left open when the env closes), or one it builds from
``target=``, ``db=``, ``measurer=`` (:func:`env_context`) and closes.

**Gymnasium's conventions** (shared with the network env):

* episodes are cut by Gymnasium's ``TimeLimit``: the registered ids carry
  ``max_episode_steps`` (:data:`DEFAULT_MAX_STEPS`), so ``gym.make`` adds it,
  and the env under it has no step limit of its own; an env built directly
  (no ``TimeLimit`` around it) truncates itself after ``max_steps`` steps
  (64 by default here; the network env only when given ``max_steps``);
* ``metadata["autoreset_mode"]`` is ``NEXT_STEP``, what ``SyncVectorEnv`` does;
* envs given neither ``context=`` nor ``measurer=`` measure with the
  process's measurer of their target (:meth:`TuningContext.shared
  <tensorgym.context.TuningContext.shared>`), so the envs of
  ``gym.make_vec(id, num_envs=4, vectorization_mode="sync")`` time their
  kernels one at a time through one measurer; ``vectorization_mode="async"``
  is refused (:class:`ParallelTimingError`) for envs that measure, since
  kernels timed at once in several processes would share the cores;
* ``env.spec`` describes the env with data only (:func:`portable_spec`): the
  database by its path, no measurer or context, so Gymnasium may deep-copy it (every
  wrapper's ``spec`` does, and ``gym.make(env.spec)``, which ``check_env``
  calls) without touching the live resources.

**Backends** (:data:`BACKENDS`): ``"tvm"`` compiles and times new configs, ``"replay"`` answers from a
database's records, ``"landscape"`` from a landscape file (:mod:`tensorgym.landscape`: an exhaustively
measured benchmark space, shipped with tensorgym). The tile-hop env and the microkernel construction env have
landscapes (:mod:`.landscape_env`, :mod:`.landscape_microkernel_env`); the others refuse that backend
(:class:`UnsupportedBackend`).
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode

from tensorgym.catalog import make_space
from tensorgym.config import Config
from tensorgym.checks import choice, integer
from tensorgym.context import TuningContext
from tensorgym.database import Database, database_path
from tensorgym.errors import InvalidArgumentError, InvalidTypeError, TensorgymError
from tensorgym.evaluator import Evaluator
from tensorgym.landscape import LandscapeEvaluator
from tensorgym.measure.measurer import Measurer
from tensorgym.record import Status
from tensorgym.spaces.base import Space
from tensorgym.target import Target, resolve_target
from tensorgym.workloads import Workload

SpaceT = TypeVar("SpaceT", bound=Space)

BACKENDS = ("tvm", "replay", "landscape")
DEFAULT_MAX_STEPS = 64  # steps per episode: the registered ids' max_episode_steps, a directly built env's max_steps
# Every tensorgym env's metadata: what SyncVectorEnv does by default (reset on the step after an episode ends).
METADATA: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4, "autoreset_mode": AutoresetMode.NEXT_STEP}


class NoWorkingStart(TensorgymError, RuntimeError):
    """An episode could not start: every start config drawn failed to run."""


class ParallelTimingError(InvalidArgumentError):
    """An env that measures kernels was asked to run beside others in parallel processes."""


class UnsupportedBackend(InvalidArgumentError):
    """An env was asked for a backend it does not have (the landscape backend outside the tiles and microkernel
    spaces)."""


def refuse_landscape(space_name: str, backend: Any, given: Mapping[str, Any]) -> None:
    """Refuse ``backend="landscape"`` for an env of ``space_name`` that has no landscapes, and ``landscape=``
    given with another backend (one line each)."""
    if backend == "landscape":
        raise UnsupportedBackend(f"backend='landscape' is the tiles and microkernel envs' (space='tiles' or "
                                 f"'microkernel'): no landscapes of the {space_name} space exist yet; use "
                                 f"backend='tvm' or 'replay'")
    if given.get("landscape") is not None:
        raise InvalidArgumentError("landscape= names the landscape of backend='landscape'; give that backend too")


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


def unwrapped_as(env: gym.Env, cls: type, what: str):
    """The env of class ``cls`` under any Gymnasium wrappers (raises ``TypeError``, naming ``what`` is expected,
    for other envs)."""
    base = env.unwrapped if isinstance(env, gym.Env) else env
    if not isinstance(base, cls):
        raise InvalidTypeError(f"expected {what}, got {type(base).__name__}")
    return base


def tuning_env(env: gym.Env) -> "TuningEnv":
    """The tensorgym env under any Gymnasium wrappers (raises ``TypeError`` for other envs)."""
    return unwrapped_as(env, TuningEnv, "a tensorgym environment (gym.make('Conv2d-ResNet-R5-v0') and the like)")


# -- the context an env builds from its keyword arguments ---------------------------------------------
def env_context(target: Target | str | None, db: Database | str | Path | None, measurer: Measurer | None, *,
                readonly: bool = False) -> TuningContext:
    """The context of an env given ``target=``, ``db=``, ``measurer=`` instead of ``context=``: with a measurer,
    a context of its own around it; without one, a context over ``db`` that measures with the process's
    measurer of the target (:meth:`TuningContext.shared`), so that the envs of one ``gym.make_vec(...,
    vectorization_mode="sync")`` time their kernels one at a time through one measurer. The env closes it."""
    if measurer is not None:
        return TuningContext.local(target, db, measurer=measurer, readonly=readonly)
    return TuningContext.shared(target, db, readonly=readonly)


def target_of(kwargs: Mapping[str, Any]) -> Target | str | None:
    """The target an env's keyword arguments ask for: their context's, or ``target=`` (None: this CPU)."""
    context = kwargs.get("context")
    return context.target if isinstance(context, TuningContext) else kwargs.get("target")


def check_context(context: Any, **given: Any) -> None:
    """Refuse a ``context=`` that is not a :class:`TuningContext`, or one given beside ``target=``, ``db=`` or
    ``measurer=`` (the context holds them)."""
    if context is None:
        return
    if not isinstance(context, TuningContext):
        raise InvalidTypeError(f"context must be a tensorgym TuningContext (TuningContext.local(...)), "
                               f"got {type(context).__name__}")
    both = sorted(name for name, value in given.items() if value is not None)
    if both:
        raise InvalidArgumentError(f"give context= or {', '.join(f'{name}=' for name in both)}, not both: the "
                                   f"context holds the target, database and measurer")


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
    """``spec`` with its kwargs made of data: a :class:`~tensorgym.context.TuningContext` by its target and
    database path, a :class:`~tensorgym.database.Database` by its path, no measurer or evaluator (an env
    made from the spec measures with the process's measurer of its target).

    ``gym.make`` records the keyword arguments it was given in ``env.spec``, and Gymnasium deep-copies
    specs (every wrapper's ``spec`` property does, ``make_vec`` copies the spec it is given): a copy of an
    open SQLite connection or of a measurer's processes cannot be made, or would close them when it is
    collected. A spec of data can be copied, printed and made again (``gym.make(env.spec)``); the env
    itself keeps the objects it was given.
    """
    if spec is None:
        return None
    kwargs = dict(spec.kwargs)
    context = kwargs.pop("context", None)
    if isinstance(context, TuningContext):
        kwargs.setdefault("target", context.target)
        kwargs.setdefault("db", context.db_path)  # the records an env made again reads
    evaluator = kwargs.pop("evaluator", None)
    if evaluator is not None and kwargs.get("db") is None:
        kwargs["db"] = getattr(evaluator, "database", None)  # the records an env made again reads
    if isinstance(kwargs.get("db"), Database):
        kwargs["db"] = kwargs["db"].path  # ":memory:" stays ":memory:": a new, empty database
    if kwargs.get("db") is None:
        kwargs.pop("db", None)
    if isinstance(kwargs.get("measurer"), Measurer):
        del kwargs["measurer"]
    if isinstance(evaluator, LandscapeEvaluator):  # a landscape's env made again answers from the same landscape
        kwargs.setdefault("landscape", evaluator.landscape)
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
        context: the :class:`~tensorgym.context.TuningContext` (target, database, measurer) to work with;
            it stays open when the env closes. Instead of it, ``target``, ``db`` and ``measurer``:
        target: ``"llvm"`` (the local CPU, default), ``"cuda"`` (this machine's GPU; the ``tiles`` space
            is then Ansor's GPU sketch) or a :class:`~tensorgym.target.Target`.
        db: a :class:`~tensorgym.database.Database`, a path to its SQLite file (default:
            :func:`tensorgym.database.default_path`, ``$TENSORGYM_DB`` or
            ``~/.cache/tensorgym/records.db``), or ``":memory:"`` for a temporary one;
            measurements are stored there and reused. A replaying env opens it read-only.
        measurer: a :class:`~tensorgym.measure.Measurer` to measure with (it stays open when the env
            closes); by default the env measures with the process's measurer of its target, started by the
            first env that measures (:meth:`TuningContext.shared <tensorgym.context.TuningContext.shared>`),
            and gives its use back in :meth:`close`.
        backend: ``"tvm"`` (compile and time new configs), ``"replay"`` (answer only from
            the database, compile nothing; moves to configs it does not hold are masked) or ``"landscape"``
            (answer from a landscape file; the tile-hop env only, see :mod:`.landscape_env`).
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
    # Whether the env answers backend="landscape" (the tile-hop env's LandscapeHopEnv sets it); the others refuse it.
    landscape_backend: bool = False
    # Set by every subclass's __init__, from its space: the observation is a Box of floats in [0, 1],
    # the action one integer (one Discrete space, masked by action_masks()).
    observation_space: spaces.Box
    action_space: spaces.Discrete

    def __init__(self, workload: Workload, *, context: TuningContext | None = None,
                 target: Target | str | None = None, db: Database | str | Path | None = None,
                 measurer: Measurer | None = None, max_steps: int | None = DEFAULT_MAX_STEPS,
                 render_mode: str | None = None, backend: str = "tvm", evaluator: Evaluator | None = None,
                 **space_options: Any):
        if not isinstance(workload, Workload):
            raise InvalidTypeError(f"workload must be a tensorgym Workload, got {type(workload).__name__}")
        max_steps = check_max_steps(max_steps)
        choice("backend", backend, BACKENDS)
        if not self.landscape_backend:
            refuse_landscape(self.space_name, backend, space_options)
        choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        check_context(context, target=target, db=db, measurer=measurer)
        if backend == "landscape" and evaluator is None:
            raise InvalidArgumentError("backend='landscape' answers from a landscape: build the env with "
                                       "gym.make(id, backend='landscape') or make_env(..., backend='landscape')")
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
            if context is not None and context.target.fingerprint != self.target.fingerprint:
                raise InvalidArgumentError(f"the evaluator answers for {self.target.label}, the context's target is "
                                           f"{context.target.label}")
            self.search_space: SpaceT = evaluator.space
            if db is None:
                db = evaluator.database
        else:
            self.target = context.target if context is not None else resolve_target(target)
            self.search_space = make_space(self.space_name, workload, self.target, **space_options)
        # math.inf, not None, when the env has no limit of its own: subclasses compare steps with it.
        self.max_steps: int | float = max_steps if max_steps is not None else math.inf
        self.render_mode = render_mode
        self.backend = backend
        # The env measures through its context, unless an evaluator given without a measurer does the measuring.
        self._measures = backend == "tvm" and (evaluator is None or measurer is not None)
        self._owns_context = context is None
        self._evaluator: Evaluator | None = evaluator
        if backend == "landscape":
            # Answers come from the landscape file: a context of the landscape's CPU whose database (in memory) is
            # opened only if someone asks for it, and which starts no measurer. Nothing is written to disk.
            self.context = TuningContext.local(self.target, ":memory:")
            return
        # A replaying env only reads: its database opens read-only (it may be on read-only media).
        self.context: TuningContext = context if context is not None else env_context(
            self.target, db, measurer, readonly=backend == "replay")
        try:
            _ = self.context.database  # opened now: a database that cannot be used is refused here
        except BaseException:
            self.close()
            raise

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
    def database(self) -> Database:
        """The database of the env's context."""
        return self.context.database

    @property
    def measurer(self) -> Measurer | None:
        """The measurer of the env's context (a shared one is taken on first use); None with the replay backend
        or a given evaluator (unless a measurer was given with it)."""
        return self.context.measurer if self._measures else None

    @property
    def evaluator(self) -> Evaluator:
        """The record source of this env (created on first use: no process starts before)."""
        if self._evaluator is None:
            self._evaluator = self.context.evaluator(self.search_space, replay=not self._measures)
        return self._evaluator

    def recorded_configs(self) -> list[Config]:
        """Configs of this env's space whose kernels ran correctly, from the database (oldest first)."""
        space = self.search_space
        return [r.config for r in self.database.records(self.workload.key, self.target.fingerprint, space.name,
                                                         Status.OK)]

    def reseed(self, seed: int) -> None:
        """Seed the env's randomness as ``reset(seed=seed)`` does, without starting an episode (an env that holds
        several, like the rl trainer's layer-sampled env, seeds each without resetting it)."""
        self._np_random, self._np_random_seed = seeding.np_random(integer("seed", seed, minimum=0))

    def close(self) -> None:
        """Close the context the env built (an env given ``context=`` leaves it open); closing twice is allowed."""
        if self._owns_context:
            self._owns_context = False
            self.context.close()
        super().close()
