"""What every tensorgym environment shares: a workload, a space, and an evaluator.

Subclasses declare their ``space_name`` and their Gymnasium spaces, and
implement ``reset``/``step``; this base resolves the target, opens the
database, starts (lazily) a measurer, and closes what it opened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Generic, TypeVar

import gymnasium as gym

from tensorgym.catalog import make_space
from tensorgym.config import Config
from tensorgym.database import Database, default_path
from tensorgym.errors import InvalidTypeError
from tensorgym.evaluator import Evaluator
from tensorgym.measure.measurer import Measurer
from tensorgym.record import Status
from tensorgym.spaces.base import Space
from tensorgym.target import Target, resolve_target
from tensorgym.workloads import Workload

SpaceT = TypeVar("SpaceT", bound=Space)


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
        db: a :class:`~tensorgym.database.Database` or a path to its SQLite file
            (default: :func:`tensorgym.database.default_path`, ``$TENSORGYM_DB`` or
            ``~/.cache/tensorgym/records.db``); measurements are stored there and reused.
        measurer: a shared :class:`~tensorgym.measure.Measurer`; by default the env
            starts its own on first use and stops it in :meth:`close`.
        backend: ``"tvm"`` (compile and time new configs) or ``"replay"`` (answer only from
            the database, compile nothing; moves to configs it does not hold are masked).
        max_steps: steps per episode before truncation.
        render_mode: ``None`` or ``"ansi"``.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    space_name: str = ""

    def __init__(self, workload: Workload, *, target: Target | str | None = None,
                 db: Database | str | Path | None = None, measurer: Measurer | None = None,
                 max_steps: int = 64, render_mode: str | None = None, backend: str = "tvm",
                 **space_options: Any):
        if not isinstance(workload, Workload):
            raise TypeError(f"workload must be a tensorgym Workload, got {type(workload).__name__}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        if backend not in ("tvm", "replay"):
            raise ValueError(f"backend must be 'tvm' or 'replay', got {backend!r}")
        if backend == "replay" and measurer is not None:
            raise ValueError("backend='replay' measures nothing: do not pass a measurer")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.workload = workload
        self.target = resolve_target(target)
        self.search_space: SpaceT = make_space(self.space_name, workload, self.target, **space_options)
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.backend = backend
        self._owns_db = not isinstance(db, Database)
        self.database = db if isinstance(db, Database) else Database(db if db is not None else default_path())
        self._owns_measurer = measurer is None
        self._measurer = measurer
        self._evaluator: Evaluator | None = None

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
