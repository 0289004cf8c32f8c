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

**Observation layouts.** ``observation="layer"`` (the default) is the layout above: its sizes
depend on the layer (a 1x1 conv has no ``ry``/``rx`` coordinates). With
``observation="common"`` every layer of every operator shares one observation and
action space, so one policy can be trained on, and used for, many layers:
actions and encodings have a fixed slot per (loop, tile level) of every
operator tensorgym knows (:data:`COMMON_SLOTS`; slots the layer lacks are
always masked and read 0), and the observation ends with the layer's shape
(:data:`SHAPE_FEATURES`: log2 of every loop extent, the conv stride, the
operator).

**Episode end.** Never terminates (tuning has no goal state); truncated after
``max_steps`` steps.

**Replay.** With ``backend="replay"`` nothing is compiled: the env moves only
between configs the database holds (its records when the env first resets),
through a precomputed :class:`~tensorgym.spaces.tiles.HopGraph`, so a step
costs microseconds. Moves to configs the database does not hold are masked
(and penalised like any masked action); moves to recorded configs whose
kernels failed are allowed and penalised, as with the ``tvm`` backend. A *dead end* is a recorded config
from which no move reaches a recorded config that ran correctly: episodes
start only on recorded correct configs that are not dead ends, an explicit
start config that is one is refused, and an episode that reaches one anyway is
truncated at once (hops are reversible, so a state reached by a move always
has the move back; this guards against explicitly given starts).

**Landscapes.** With ``backend="landscape"`` (``gym.make``, :func:`~.registration.make_env`) the env is a
:class:`~.landscape_env.LandscapeHopEnv`:
it walks every config of a landscape (an exhaustively measured benchmark sub-space, shipped as
data) like replay walks its records, and each visited config's throughput is the landscape
evaluator's seeded draw from its recorded samples (see :mod:`.landscape_env`).

**Rules without measuring.** :class:`HopRules` holds what the env does that
needs no measurement: the action and observation layout, the config an action
leads to, the action mask, the observation of a state (:class:`HopState`) and
how a measured move changes it. The env measures and delegates the rest to
it; the ``rl`` agent uses the same rules to propose moves through the
Tuner's loop, so a policy sees the same observations whoever measures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError
from tensorgym.evaluator import NotMeasured
from tensorgym.record import Record
from tensorgym.spaces.base import Space
from tensorgym.spaces.tiles import HopGraph, TilesSpace
from tensorgym.workloads import Workload

from .base import NoWorkingStart, TuningEnv, UnsupportedBackend, check_reset_options

INVALID_ACTION_PENALTY = -1.0
FAILED_KERNEL_PENALTY = -1.0
MAX_START_ATTEMPTS = 16
OBSERVATIONS = ("layer", "common")

# The loops of every operator, in a fixed order: (op, loop, kind). Each spatial loop has 3 hop
# coordinates (tile levels 1-3), each reduction loop 1 (level 1); see TilesSpace.
COMMON_LOOPS = (
    ("conv2d", "n", "spatial"), ("conv2d", "f", "spatial"), ("conv2d", "y", "spatial"), ("conv2d", "x", "spatial"),
    ("conv2d", "rc", "reduction"), ("conv2d", "ry", "reduction"), ("conv2d", "rx", "reduction"),
    ("matmul", "i", "spatial"), ("matmul", "j", "spatial"), ("matmul", "k", "reduction"),
)
# The slots of the common layout: (op, knob, level); ``unroll`` and ``cache_write`` are shared by every op.
COMMON_SLOTS: tuple[tuple[str, str, int], ...] = tuple(
    (op, loop, level) for op, loop, kind in COMMON_LOOPS for level in range(1, 4 if kind == "spatial" else 2)
) + (("*", "unroll", -1), ("*", "cache_write", -1))
# The shape part of the common observation: log2(extent) / LOG2_EXTENT_SCALE per loop, log2(stride) / 2, op one-hot.
SHAPE_FEATURES = tuple(f"log2_{op}.{loop}" for op, loop, _ in COMMON_LOOPS) + ("log2_stride", "op_conv2d",
                                                                                 "op_matmul")
LOG2_EXTENT_SCALE = 12.0  # extents up to 4096 map into [0, 1]
COMMON_OPS = ("conv2d", "matmul")


def gflops_scale(gflops: float | None) -> float:
    """Throughput on a [0, 1] log scale: 0 -> 0, ~1000 GFLOP/s -> 1."""
    if not gflops or gflops <= 0:
        return 0.0
    return float(min(1.0, math.log10(1.0 + gflops) / 3.0))


def shape_features(workload: Workload) -> np.ndarray:
    """The layer's shape as the common layout observes it (:data:`SHAPE_FEATURES`), in [0, 1]."""
    extents = {(workload.op, lp.name): lp.extent for lp in workload.loops}
    out = [math.log2(extents.get((op, loop), 1)) / LOG2_EXTENT_SCALE for op, loop, _ in COMMON_LOOPS]
    out.append(math.log2(getattr(workload, "stride", 1)) / 2.0)
    out += [float(workload.op == op) for op in COMMON_OPS]
    return np.clip(np.array(out, dtype=np.float32), 0.0, 1.0)


@dataclass(frozen=True)
class HopState:
    """Where a tile-hop episode stands: the current state's record (its config is the state) and the best
    record of the episode; ``node`` is the state's node in the replay hop graph (-1: no graph)."""

    record: Record
    best: Record
    node: int = -1

    @property
    def config(self) -> Config:
        return self.record.config


class HopRules:
    """The tile-hop env's rules over one space, as functions of a :class:`HopState` (no measuring, no episode).

    Args:
        space: the space the hops walk (a tiles space, or another space of hop coordinates: ``cutlass``).
        observation: the observation layout, ``"layer"`` or ``"common"`` (see the module docs).

    Attributes:
        action_space, observation_space: the env's Gymnasium spaces (a policy fits them or not).
        graph, moves: under replay (:meth:`use_records`), the hop graph of the recorded configs and its table
            in these rules' actions (``moves[node, action]``: the node reached, -1: none).
    """

    def __init__(self, space: Space, observation: str = "layer"):
        if observation not in OBSERVATIONS:
            raise InvalidArgumentError(f"observation must be one of {OBSERVATIONS}, got {observation!r}")
        workload = space.workload
        if observation == "common" and workload.op not in COMMON_OPS:
            raise InvalidArgumentError(f"the common layout knows the operators {COMMON_OPS}, not {workload.op!r}")
        self.space = space
        self.space_name = space.name
        self.observation = observation
        n_features = len(space.feature_names)
        if observation == "common":
            slot_of = {slot: i for i, slot in enumerate(COMMON_SLOTS)}
            positions = [slot_of[(workload.op if c.level >= 0 else "*", c.knob, c.level)] for c in space.coordinates]
            self._encoding_slots = np.array(positions, dtype=np.int64)
            self._base_action = np.full(2 * len(COMMON_SLOTS), -1, dtype=np.int64)
            for coordinate, slot in enumerate(positions):
                self._base_action[2 * slot: 2 * slot + 2] = (2 * coordinate, 2 * coordinate + 1)
            self._shape = shape_features(workload)
            size = len(COMMON_SLOTS) + n_features + 2 + len(SHAPE_FEATURES)
        else:
            self._encoding_slots = None
            self._base_action = np.arange(2 * len(space.coordinates), dtype=np.int64)
            self._shape = np.zeros(0, dtype=np.float32)
            size = space.encoding_size + n_features + 2
        self._has_base = self._base_action >= 0
        self.action_space = spaces.Discrete(len(self._base_action))
        self.observation_space = spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32)
        self.graph: HopGraph | None = None
        self.moves: np.ndarray | None = None
        self._static: dict[int, np.ndarray] = {}  # replay: the config part of each node's observation

    # -- replay ------------------------------------------------------------------
    def use_records(self, records: list[Record]) -> HopGraph:
        """Walk only between these records (replay): the hop graph over them, its table in these rules' actions."""
        return self.use_graph(HopGraph(self.space, records))

    def use_graph(self, graph: HopGraph) -> HopGraph:
        """Walk only between the nodes of ``graph`` (a hop graph of this space, built once and shared)."""
        self.graph = graph
        self.moves = self.actions_table(graph)
        self._static = {}
        return graph

    def actions_table(self, graph: HopGraph) -> np.ndarray:
        """``graph``'s table in these rules' actions: ``[node, action]`` -> the node reached (-1: none)."""
        table = graph.table[:, np.maximum(self._base_action, 0)]
        return np.where(self._has_base, table, -1)

    # -- states --------------------------------------------------------------------
    def state(self, record: Record) -> HopState:
        """An episode's first state, at ``record``'s config (under replay a recorded one)."""
        return HopState(record, record, self.graph.index[record.config] if self.graph is not None else -1)

    def after(self, state: HopState, tried: Record | None) -> tuple[HopState, float]:
        """The state after a move whose kernel measured ``tried`` (None: a masked move), and the move's reward:
        a correct kernel moves the state there; a masked move or a failed kernel leaves it where it was."""
        if tried is None:
            return state, INVALID_ACTION_PENALTY
        if not tried.ok:
            return state, FAILED_KERNEL_PENALTY
        reward = math.log2(tried.gflops / state.record.gflops)
        best = tried if tried.gflops > state.best.gflops else state.best
        node = self.graph.index[tried.config] if self.graph is not None else -1
        return HopState(tried, best, node), reward

    def truncated(self, state: HopState, steps: int, max_steps: int) -> bool:
        """Whether an episode ends after ``steps`` steps at ``state`` (its length, or a replay dead end)."""
        return steps >= max_steps or (self.graph is not None and not self.graph.movable[state.node])

    # -- moves -------------------------------------------------------------------
    def move(self, config: Config, action: int) -> Config | None:
        """The config ``action`` moves ``config`` to (None: it leaves the space)."""
        base = self._base_action[action]
        if base < 0:
            return None
        coordinate, down = divmod(int(base), 2)
        return self.space.hop(config, coordinate, -1 if down else 1)

    def legal_moves(self, config: Config) -> np.ndarray:
        """The actions whose move from ``config`` stays in the space (before replay's filter)."""
        mask = np.zeros(len(self._base_action), dtype=bool)
        mask[self._has_base] = self.space.hop_mask(config)[self._base_action[self._has_base]]
        return mask

    def mask(self, state: HopState) -> np.ndarray:
        """The allowed actions at ``state``: moves that stay in the space (replay: that reach a record)."""
        if self.moves is not None:
            return self.moves[state.node] >= 0
        return self.legal_moves(state.config)

    def target(self, state: HopState, action: int) -> Config | None:
        """The config ``action`` moves ``state`` to, if allowed (replay: the recorded one), else None."""
        if self.moves is not None:
            node = self.moves[state.node, action]
            return self.graph.records[node].config if node >= 0 else None
        return self.move(state.config, action)

    # -- observations ----------------------------------------------------------------
    def static_observation(self, config: Config) -> np.ndarray:
        """The config-dependent part of the observation (encoding, features), clipped to [0, 1]."""
        space = self.space
        encoding = space.encode(config)
        if self._encoding_slots is not None:
            slots = np.zeros(len(COMMON_SLOTS), dtype=np.float32)
            slots[self._encoding_slots] = encoding
            encoding = slots
        return np.clip(np.concatenate([encoding, space.normalised_features(config)]).astype(np.float32), 0.0, 1.0)

    @property
    def shape_features(self) -> np.ndarray:
        """The layer's shape features that end every observation (none in the ``layer`` layout)."""
        return self._shape

    def observe(self, state: HopState) -> np.ndarray:
        """The observation of ``state``: its config, its throughput and the episode's best."""
        if self.graph is not None:  # replay revisits few configs often: their static part is cached per node
            static = self._static.get(state.node)
            if static is None:
                static = self._static[state.node] = self.static_observation(state.config)
        else:
            static = self.static_observation(state.config)
        scales = np.array([gflops_scale(state.record.gflops), gflops_scale(state.best.gflops)], dtype=np.float32)
        return np.concatenate([static, scales, self._shape])


class TileHopEnv(TuningEnv[TilesSpace]):
    """Hop through the multi-level tiling space of one workload; rewards are measured speed-ups.

    Keyword arguments other than :class:`~tensorgym.envs.base.TuningEnv`'s: ``observation``
    (``"layer"`` or ``"common"``, see the module docs), then the space's options.
    """

    space_name = "tiles"
    graph_replay = True  # replay walks the precomputed hop graph of the recorded configs (tile hops only)

    def __init__(self, workload: Workload, *, observation: str = "layer", **kwargs: Any):
        if kwargs.get("backend") == "landscape" and not self.landscape_backend and self.space_name == "tiles":
            raise UnsupportedBackend("the tile-hop env answers landscapes as a LandscapeHopEnv: build it with "
                                     "make_env(..., backend='landscape') or gym.make(id, backend='landscape')")
        # HopRules checks these too; checked here first so that a bad argument opens no database.
        if observation not in OBSERVATIONS:
            raise InvalidArgumentError(f"observation must be one of {OBSERVATIONS}, got {observation!r}")
        if observation == "common" and workload.op not in COMMON_OPS:
            raise InvalidArgumentError(f"the common layout knows the operators {COMMON_OPS}, not {workload.op!r}")
        super().__init__(workload, **kwargs)
        self._evaluator_given = self._evaluator is not None
        self.rules = HopRules(self.search_space, observation)
        self.observation = observation
        self.n_coordinates = len(self.search_space.coordinates)
        self.action_space = self.rules.action_space
        self.observation_space = self.rules.observation_space
        self._state: HopState | None = None
        self._steps = 0

    # The episode's state, as the env's subclasses and tests read it.
    @property
    def _config(self) -> Config | None:
        return self._state.config if self._state is not None else None

    @property
    def _record(self) -> Record | None:
        return self._state.record if self._state is not None else None

    @property
    def _best(self) -> Record | None:
        return self._state.best if self._state is not None else None

    @property
    def _node(self) -> int:
        return self._state.node if self._state is not None else -1

    @property
    def _graph(self) -> HopGraph | None:
        """Replay: the hop graph over the recorded configs (built on the first reset)."""
        return self.rules.graph

    @property
    def _moves(self) -> np.ndarray | None:
        return self.rules.moves

    # -- gymnasium API ---------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = check_reset_options(options, ("config",))
        if self.backend == "replay" and self.graph_replay:
            self._replay_graph()
        if "config" in options:
            config = self.search_space.parse(options["config"])
            record = self._replay_start(config) if self._graph is not None else self.evaluator.evaluate([config])[0]
            if not record.ok:
                raise InvalidArgumentError(f"start config fails ({record.status}): {record.error[:300]}")
        else:
            record = self._random_start()
        if self._graph is not None and self._evaluator_given:
            record = self.evaluator.evaluate([record.config])[0]  # a given record source counts it
        self._state = self.rules.state(record)
        self._steps = 0
        return self._observation(), self._info(record, "ok")

    def step(self, action):
        if self._state is None:
            raise ResetNeeded("call reset() before step()")
        if not self.action_space.contains(action):
            raise InvalidArgumentError(f"action {action!r} is outside the action space "
                                       f"Discrete({self.action_space.n}); actions are integers in "
                                       f"[0, {self.action_space.n - 1}]")
        self._steps += 1
        tried = self._replay_move(int(action)) if self._graph is not None else self._measured_move(int(action))
        self._state, reward = self.rules.after(self._state, tried)
        status = "masked" if tried is None else tried.status.value
        truncated = self.rules.truncated(self._state, self._steps, self.max_steps)
        return self._observation(), float(reward), False, truncated, self._info(tried, status)

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the actions that stay inside the space (replay: that reach a recorded config)."""
        if self._state is None:
            raise ResetNeeded("call reset() before action_masks()")
        if self._moves is not None:
            return self.rules.mask(self._state)
        mask = self._legal_moves()
        if self.backend == "replay":  # an env without the hop graph: moves to recorded configs only
            for action in np.flatnonzero(mask):
                mask[action] = self.evaluator.lookup(self._move(int(action))) is not None
        return mask

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._state is None:
            return None
        unit = self.workload.throughput_unit
        limit = f"/{self.max_steps}" if self.max_steps != float("inf") else ""
        return (f"{self.workload.label} step {self._steps}{limit}: {self._record.gflops:.1f} {unit} "
                f"(best {self._best.gflops:.1f})  {self.search_space.describe(self._config)}")

    # -- moves -------------------------------------------------------------------
    def _move(self, action: int) -> Config | None:
        """The config ``action`` moves the state to (None: it leaves the space). Subclasses with other
        actions (the mapping env's candidate switches) override this and :meth:`_legal_moves`."""
        return self.rules.move(self._config, action)

    def _legal_moves(self) -> np.ndarray:
        """The actions whose move stays in the space (before the replay backend's filter)."""
        return self.rules.legal_moves(self._config)

    def _measured_move(self, action: int) -> Record | None:
        """The record of the config ``action`` moves to (measured if new; replay without the hop graph: only
        if recorded), or None if it leaves the space."""
        target = self._move(action)
        if target is None or (self.backend == "replay" and self.evaluator.lookup(target) is None):
            return None
        return self.evaluator.evaluate([target])[0]

    def _replay_move(self, action: int) -> Record | None:
        """The recorded record ``action`` moves to, or None if it leaves the space or the records."""
        node = self._moves[self._node, action]
        if node < 0:
            return None
        record = self._graph.records[node]
        if self._evaluator_given:
            record = self.evaluator.evaluate([record.config])[0]  # a given record source counts it
        return record

    def _replay_graph(self) -> HopGraph:
        """The hop graph over the database's records of this env (built on the first reset)."""
        if self._graph is None:
            space = self.search_space
            self.rules.use_records(self.database.records(self.workload.key, self.target.fingerprint, space.name))
        return self._graph

    # -- helpers -----------------------------------------------------------------
    def _replay_start(self, config: Config) -> Record:
        node = self._graph.node(config)
        if node is None:
            raise NotMeasured(f"backend='replay' starts only from recorded configs; {self.database.path} holds no "
                              f"record of {config.key} for {self.workload.label}")
        if self._graph.ok[node] and not self._graph.movable[node]:
            raise InvalidArgumentError(f"start config {config.key} is a dead end in replay: no move reaches another "
                                       f"recorded config that runs correctly")
        return self._graph.records[node]

    def _random_start(self) -> Record:
        """Measure random configs until one runs correctly (replay: draw a recorded one that is not a dead end)."""
        if self.backend == "replay" and self._graph is None:  # an env without the hop graph: any recorded config
            recorded = self.recorded_configs()
            if not recorded:
                raise NotMeasured(f"backend='replay' needs measured configs of {self.workload.label} in "
                                  f"{self.database.path}; it holds none (tune with backend='tvm' first)")
            return self.evaluator.lookup(recorded[int(self.np_random.integers(len(recorded)))])
        if self.backend == "replay":
            starts = self._graph.starts
            if not len(starts):
                raise NoWorkingStart(
                    f"backend='replay' needs recorded configs of {self.workload.label} in {self.database.path} with "
                    f"a recorded 1-hop neighbour; it holds {len(self._graph)} record(s) and none qualifies (build "
                    f"the data with hop walks, `tensorgym dataset build --hop-share 0.5`, or tune with the tvm "
                    f"backend)")
            return self._graph.records[int(starts[int(self.np_random.integers(len(starts)))])]
        failures = []
        for _ in range(MAX_START_ATTEMPTS):
            record = self.evaluator.evaluate([self.search_space.sample(self.np_random)])[0]
            if record.ok:
                return record
            failures.append(record.status.value)
        raise NoWorkingStart(f"{MAX_START_ATTEMPTS} random start configs of {self.workload.label} all failed "
                           f"({', '.join(failures)}); see the records in {self.database.path}")

    def _observation(self) -> np.ndarray:
        return self.rules.observe(self._state)

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

