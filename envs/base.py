"""What every tensorgym environment shares: a workload, a space, and an evaluator.

Subclasses declare their ``space_name`` and their Gymnasium spaces, and
implement ``reset``/``step``; this base resolves the target, opens the
database, starts (lazily) a measurer, and closes what it opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

import gymnasium as gym

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


class NoWorkingStart(TensorgymError, RuntimeError):
    """An episode could not start: every start config drawn failed to run."""


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


def tuning_env(env: gym.Env) -> "TuningEnv":
    """The tensorgym env under any Gymnasium wrappers (raises ``TypeError`` for other envs)."""
    base = env.unwrapped if isinstance(env, gym.Env) else env
    if not isinstance(base, TuningEnv):
        raise InvalidTypeError(f"expected a tensorgym environment (gym.make('Conv2d-ResNet-R5-v0') and the like), "
                               f"got {type(base).__name__}")
    return base


class TuningEnv(gym.Env, Generic[SpaceT]):
    """Base of tensorgym environments over one workload and one search space.

    Args:
        workload: the operator instance to tune.
        target: ``"llvm"`` (the local CPU, default), ``"cuda"`` (this machine's GPU; the ``tiles`` space
            is then Ansor's GPU sketch) or a :class:`~tensorgym.target.Target`.
        db: a :class:`~tensorgym.database.Database`, a path to its SQLite file (default:
            :func:`tensorgym.database.default_path`, ``$TENSORGYM_DB`` or
            ``~/.cache/tensorgym/records.db``), or ``":memory:"`` for a temporary one;
            measurements are stored there and reused. A replaying env opens it read-only.
        measurer: a shared :class:`~tensorgym.measure.Measurer`; by default the env
            starts its own on first use and stops it in :meth:`close`.
        backend: ``"tvm"`` (compile and time new configs) or ``"replay"`` (answer only from
            the database, compile nothing; moves to configs it does not hold are masked).
        max_steps: steps per episode before truncation.
        render_mode: ``None`` or ``"ansi"``.
        evaluator: answer measurements with this record source instead of the env's own (a
            Tuner's budgeted view, say: the ``rl`` agent runs its policy through one). The env
            then works in the evaluator's space (no space options), and ``db`` defaults to the
            evaluator's database.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    space_name: str = ""

    def __init__(self, workload: Workload, *, target: Target | str | None = None,
                 db: Database | str | Path | None = None, measurer: Measurer | None = None,
                 max_steps: int = 64, render_mode: str | None = None, backend: str = "tvm",
                 evaluator: Evaluator | None = None, **space_options: Any):
        if not isinstance(workload, Workload):
            raise InvalidTypeError(f"workload must be a tensorgym Workload, got {type(workload).__name__}")
        max_steps = integer("max_steps", max_steps, minimum=1)
        choice("backend", backend, ("tvm", "replay"))
        choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        if measurer is not None and not isinstance(measurer, Measurer):
            raise InvalidTypeError(f"measurer must be a tensorgym Measurer (or None: the env starts its own), got "
                                   f"{type(measurer).__name__} {measurer!r:.40}")
        if backend == "replay" and measurer is not None:
            raise InvalidArgumentError("backend='replay' measures nothing: do not pass a measurer")
        if db is not None and not isinstance(db, Database):
            db = database_path(db)  # refused before anything is built
        self.workload = workload
        if evaluator is not None:
            self._check_evaluator(evaluator, workload, space_options)
            self.target = evaluator.space.target
            self.search_space: SpaceT = evaluator.space
            if db is None:
                db = getattr(evaluator, "database", None)
        else:
            self.target = resolve_target(target)
            self.search_space = make_space(self.space_name, workload, self.target, **space_options)
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.backend = backend
        self._owns_db = not isinstance(db, Database)
        # A replaying env only reads: its database opens read-only (it may be on read-only media).
        self.database = db if isinstance(db, Database) else Database(db if db is not None else default_path(),
                                                                      readonly=backend == "replay")
        self._owns_measurer = measurer is None and evaluator is None
        self._measurer = measurer
        self._evaluator: Evaluator | None = evaluator

    def _check_evaluator(self, evaluator: Evaluator, workload: Workload, space_options: dict[str, Any]) -> None:
        space = getattr(evaluator, "space", None)
        if not isinstance(space, Space) or space.name != self.space_name or space.workload != workload:
            raise InvalidArgumentError(f"evaluator must answer configs of the {self.space_name!r} space of "
                                       f"{workload.label}; got one over {space!r}")
        if space_options:
            raise InvalidArgumentError(f"the env takes its space from the evaluator; drop the space options "
                                       f"{sorted(space_options)}")

    @property
    def evaluator(self) -> Evaluator:
        """The record source of this env (created on first use: no process starts before)."""
        if self._evaluator is None:
            if self._measurer is None and self.backend == "tvm":
                self._measurer = Measurer(self.target)
            self._evaluator = Evaluator(self.search_space, self.database, self._measurer)
        return self._evaluator

    def recorded_configs(self) -> list[Config]:
        """Configs of this env's space whose kernels ran correctly, from the database (oldest first)."""
        space = self.search_space
        return [r.config for r in self.database.records(self.workload.key, self.target.fingerprint, space.name,
                                                         Status.OK)]

    def close(self) -> None:
        if self._owns_measurer and self._measurer is not None:
            self._measurer.close()
            self._measurer = None
            self._evaluator = None
        if self._owns_db and self.database is not None:
            self.database.close()
            self._owns_db = False
        super().close()
