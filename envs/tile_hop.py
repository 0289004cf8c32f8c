"""Tile-hop environment: walk the ``tiles`` space one coordinate step at a time (seed 000).

**State.** A config of the :class:`~tensorgym.spaces.TilesSpace` and its
measured throughput. ``reset`` starts from a random valid config (drawn with
the env's seeded RNG, or ``options={"config": ...}``) and measures it.

**Actions.** ``Discrete(2 * m)`` over the space's ``m`` coordinates: action
``2 * i`` moves coordinate ``i`` to the next larger value of its sorted
choice list, ``2 * i + 1`` to the next smaller. ``info["action_mask"]`` and
:meth:`action_masks` mark the moves that stay inside the space. An action
outside ``Discrete(2 * m)`` raises ``ValueError``.

**Reward** (the same meaning on every layer, since it is a ratio):

* a move to a kernel that runs correctly: ``log2(new GFLOP/s / old GFLOP/s)``
  (+1 for a 2x speed-up, -1 for a 2x slow-down); the state moves there;
* a masked action: :data:`INVALID_ACTION_PENALTY` (-1); the state is unchanged;
* a move to a kernel that fails to build, crashes, times out or computes a
  wrong result: :data:`FAILED_KERNEL_PENALTY` (-1); the state is unchanged.

Over an episode the rewards of accepted moves add up to ``log2(final / start)``.

**Observation.** ``Box(0, 1)`` of the normalised config encoding (one value
per coordinate), the normalised analytical features of the config
(:mod:`tensorgym.spaces.tiles.features`), and two throughputs on a log scale,
``log10(1 + GFLOP/s) / 3`` clipped to [0, 1]: the current state's and the
best seen in this episode.

**Episode end.** Never terminates (tuning has no goal state); truncated after
``max_steps`` steps.

**Replay.** With ``backend="replay"`` nothing is compiled: starts are drawn
from the database's correct records, and moves to configs the database does
not hold are masked (and penalised like any masked action).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError
from tensorgym.evaluator import NotMeasured
from tensorgym.record import Record
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.workloads import Workload

from .base import NoWorkingStart, TuningEnv, check_reset_options

INVALID_ACTION_PENALTY = -1.0
FAILED_KERNEL_PENALTY = -1.0
MAX_START_ATTEMPTS = 16


def gflops_scale(gflops: float | None) -> float:
    """Throughput on a [0, 1] log scale: 0 -> 0, ~1000 GFLOP/s -> 1."""
    if not gflops or gflops <= 0:
        return 0.0
    return float(min(1.0, math.log10(1.0 + gflops) / 3.0))


class TileHopEnv(TuningEnv[TilesSpace]):
    """Hop through the multi-level tiling space of one workload; rewards are measured speed-ups."""

    space_name = "tiles"

    def __init__(self, workload: Workload, **kwargs: Any):
        super().__init__(workload, **kwargs)
        space = self.search_space
        self.n_coordinates = len(space.coordinates)
        self.action_space = spaces.Discrete(2 * self.n_coordinates)
        size = space.encoding_size + len(space.feature_names) + 2
        self.observation_space = spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32)
        self._config: Config | None = None
        self._record: Record | None = None
        self._best: Record | None = None
        self._steps = 0

    # -- gymnasium API ---------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = check_reset_options(options, ("config",))
        if "config" in options:
            record = self.evaluator.evaluate([self.search_space.parse(options["config"])])[0]
            if not record.ok:
                raise InvalidArgumentError(f"start config fails ({record.status}): {record.error[:300]}")
        else:
            record = self._random_start()
        self._config, self._record, self._best = record.config, record, record
        self._steps = 0
        return self._observation(), self._info(record, "ok")

    def step(self, action):
        if self._config is None:
            raise ResetNeeded("call reset() before step()")
        if not self.action_space.contains(action):
            raise InvalidArgumentError(f"action {action!r} is outside the action space "
                                       f"Discrete({self.action_space.n}); actions are integers in "
                                       f"[0, {self.action_space.n - 1}]")
        self._steps += 1
        target = self._move(int(action))
        if target is not None and self.backend == "replay" and self.evaluator.lookup(target) is None:
            target = None
        if target is None:
            reward, status, tried = INVALID_ACTION_PENALTY, "masked", None
        else:
            tried = self.evaluator.evaluate([target])[0]
            status = tried.status.value
            if tried.ok:
                reward = math.log2(tried.gflops / self._record.gflops)
                self._config, self._record = tried.config, tried
                if tried.gflops > self._best.gflops:
                    self._best = tried
            else:
                reward = FAILED_KERNEL_PENALTY
        truncated = self._steps >= self.max_steps
        return self._observation(), float(reward), False, truncated, self._info(tried, status)

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the actions that stay inside the space (for MaskablePPO)."""
        if self._config is None:
            raise ResetNeeded("call reset() before action_masks()")
        mask = self._legal_moves()
        if self.backend == "replay":
            for action in np.flatnonzero(mask):
                mask[action] = self.evaluator.lookup(self._move(int(action))) is not None
        return mask

    def _move(self, action: int) -> Config | None:
        """The config ``action`` moves the state to (None: it leaves the space)."""
        coordinate, down = divmod(action, 2)
        return self.search_space.hop(self._config, coordinate, -1 if down else 1)

    def _legal_moves(self) -> np.ndarray:
        """The actions whose move stays in the space (before the replay backend's filter)."""
        return self.search_space.hop_mask(self._config)

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._record is None:
            return None
        unit = self.workload.throughput_unit
        return (f"{self.workload.label} step {self._steps}/{self.max_steps}: {self._record.gflops:.1f} {unit} "
                f"(best {self._best.gflops:.1f})  {self.search_space.describe(self._config)}")

    # -- helpers -----------------------------------------------------------------
    def _random_start(self) -> Record:
        """Measure random configs until one runs correctly (replay: draw a recorded one)."""
        if self.backend == "replay":
            recorded = self.recorded_configs()
            if not recorded:
                raise NotMeasured(f"backend='replay' needs measured configs of {self.workload.label} in "
                                   f"{self.database.path}; it holds none (tune with backend='tvm' first)")
            return self.evaluator.lookup(recorded[int(self.np_random.integers(len(recorded)))])
        failures = []
        for _ in range(MAX_START_ATTEMPTS):
            record = self.evaluator.evaluate([self.search_space.sample(self.np_random)])[0]
            if record.ok:
                return record
            failures.append(record.status.value)
        raise NoWorkingStart(f"{MAX_START_ATTEMPTS} random start configs of {self.workload.label} all failed "
                           f"({', '.join(failures)}); see the records in {self.database.path}")

    def _observation(self) -> np.ndarray:
        space = self.search_space
        obs = np.concatenate([
            space.encode(self._config), space.normalised_features(self._config),
            np.array([gflops_scale(self._record.gflops), gflops_scale(self._best.gflops)], dtype=np.float32),
        ]).astype(np.float32)
        return np.clip(obs, 0.0, 1.0)

    def _info(self, tried: Record | None, status: str) -> dict[str, Any]:
        return {
            "status": status,  # of this step's kernel: ok, masked, build_error, runtime_error, timeout, wrong_result
            "gflops": self._record.gflops,  # of the current state (GOP/s for int8 workloads: see "unit")
            "unit": self.workload.throughput_unit,
            "latency_s": self._record.latency_s,
            "latency_cv": self._record.latency_cv,
            "timing": self._record.timing,  # "full", or "short": one sample of a kernel far slower than the best
            "busy": self._record.busy,  # timed while other processes took the cores
            "config": self._config.to_json(),
            "tried_gflops": tried.gflops if tried is not None else None,
            "best_gflops": self._best.gflops,
            "best_config": self._best.config.to_json(),
            "measurements": self.evaluator.measured,
            "action_mask": self.action_masks(),
        }
