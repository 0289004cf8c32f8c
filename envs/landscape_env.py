"""The tile-hop env over a landscape (``backend="landscape"``): a measured benchmark space, stepped at array speed.

A landscape (:mod:`tensorgym.landscape`) is every config of a bounded sub-space of one layer's
``tiles`` space, measured once on one CPU and shipped as data. With ``backend="landscape"`` the
tile-hop env walks it the way the replay backend walks a database's records, except that every
config of the space is there::

    gym.make("Conv2d-ResNet-R5-v0", backend="landscape")                  # this CPU's shipped landscape
    gym.make("Conv2d-ResNet-R5-v0", backend="landscape", landscape="amd-epyc-zen4-avx512-2c")  # a CPU, named
    gym.make("Conv2d-ResNet-R5-v0", backend="landscape", landscape="R5-tiles.json.gz")          # a file

**Which landscape** (``landscape=``): None, the one shipped for this machine's CPU (``target=``'s,
if given); a CPU folder name, the one shipped for that CPU; a path to a landscape file; or a
:class:`~tensorgym.landscape.Landscape`. On a CPU with no landscape of its own, None takes the one
another CPU has: its timings are another machine's, so it is a benchmark of search methods, not a
prediction of this machine, and the env warns so in one line
(:class:`~tensorgym.landscape.AnotherCPULandscape`, whichever way the landscape was named).
Instead of ``landscape=``,
``evaluator=`` may give a :class:`~tensorgym.landscape.LandscapeEvaluator` built with other
``noise`` or ``clock`` options.

**The env.** Actions, rewards, observations and episode ends are the tile-hop env's
(:mod:`.tile_hop`), over the landscape's bounded space (``landscape.space()``): moves that leave it
are masked (its ``hop_mask`` keeps hops inside the bounds; in a partial landscape, moves to configs
it lacks too), moves to configs whose kernels failed are penalised and leave the state where it
was. Episodes start on a random correct config with a correct neighbour, or on
``reset(options={"config": ...})``.

**Noise.** Each visited config's throughput is the evaluator's draw for it, a re-measurement drawn
from its recorded samples (:class:`~tensorgym.landscape.LandscapeEvaluator`), so agents meet the
noise they would meet live; a config's draw is fixed until the draws are seeded again, as a
database answers a measured config with the same record. ``reset(seed=s)`` seeds the draws from
``s`` (a stream of its own, not the start config's), so an episode is reproducible per seed;
``reset()`` keeps them; :meth:`~.base.TuningEnv.reseed` seeds them without starting an episode.
An env seeded by no one draws from fresh entropy.

**Nothing is run.** The env compiles and times nothing, opens no database file (its context holds
the landscape's CPU and an in-memory database, opened only if someone asks for ``env.database``),
starts no measurer and never imports TVM; Gymnasium's ``vectorization_mode="async"`` is allowed.

**Speed.** What a step needs is computed once per landscape and observation layout, and shared by
the envs of a process (:class:`LandscapeWalk`): the hop table in the env's actions, the action
masks, and each config's observation without its two throughputs. Each seed of the draws
computes every config's throughput, its scaled value and its record once. A step is then a few
list lookups, one small array copy and a dict: ``bench/bench_landscape_env.py`` measures it.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.error import ResetNeeded

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.landscape import Landscape, LandscapeError, LandscapeEvaluator, find_landscape, warn_if_another_cpu
from tensorgym.landscape.shipped import SUFFIX
from tensorgym.record import Record
from tensorgym.spaces.tiles import HopGraph
from tensorgym.target import Target, resolve_target
from tensorgym.workloads import Workload

from .base import NoWorkingStart, check_reset_options
from .tile_hop import FAILED_KERNEL_PENALTY, INVALID_ACTION_PENALTY, HopRules, HopState, TileHopEnv

LandscapeArgument = Landscape | str | os.PathLike | None
# Mixed into the seed of reset(seed=s) for the evaluator's draws: the start config and the draws are two streams.
DRAW_STREAM = 0x1A5D5CA9E
MAX_CACHED_LANDSCAPES = 16  # landscapes whose walks a process keeps (a few MB each)


# -- which landscape ------------------------------------------------------------------------------------------
def env_landscape(workload: Workload, landscape: LandscapeArgument = None,
                  target: Target | str | None = None, space: str = "tiles") -> Landscape:
    """The ``space`` landscape of ``workload`` that ``landscape=`` names (see the module docs); raises a one-line
    :class:`~tensorgym.landscape.LandscapeError` (``LandscapeNotFound`` when none is shipped)."""
    if isinstance(landscape, Landscape):
        land = landscape
    elif landscape is None:
        land = load_landscape(find_landscape(workload, space, target=resolve_target(target)))
    elif isinstance(landscape, (str, os.PathLike)):
        text = os.fspath(landscape)
        if isinstance(landscape, os.PathLike) or text.endswith(SUFFIX) or os.sep in text or Path(text).is_file():
            land = load_landscape(text)
        else:  # a CPU folder: that CPU's shipped landscape of the layer
            land = load_landscape(find_landscape(workload, space, cpu=text))
    else:
        raise InvalidTypeError(f"landscape must be a CPU folder name, a landscape file or a Landscape, got "
                               f"{type(landscape).__name__}")
    check_landscape(land, workload, space)
    warn_if_another_cpu(land.cpu_folder, resolve_target(target))
    return land


def check_landscape(land: Landscape, workload: Workload, space: str = "tiles") -> None:
    """Refuse a landscape of another space or layer than the env's (one line)."""
    if land.space_name != space:
        raise LandscapeError(f"{land!r} is of the {land.space_name} space; this landscape env walks {space} "
                             f"landscapes (make the env with space={land.space_name!r})")
    if land.workload_key != workload.key:
        raise LandscapeError(f"{land!r} is a landscape of {land.workload_label}, not of {workload.label}")


def landscape_evaluator(env_name: str, workload: Workload, space: str, *, landscape: LandscapeArgument,
                        evaluator: LandscapeEvaluator | None, target: Target | str | None, backend: str,
                        kwargs: dict[str, Any], ignored: tuple[str, ...] = ()) -> LandscapeEvaluator:
    """The evaluator a landscape env answers from, after refusing in one line what such an env cannot take (a
    database, a measurer, another backend, both a landscape and an evaluator); drops the measuring keywords the
    env's live parent would take (``kwargs`` is changed in place)."""
    given = sorted(name for name in ("context", "db", "measurer") if kwargs.get(name) is not None)
    if given:
        raise InvalidArgumentError(f"backend='landscape' answers from the landscape file: it takes no "
                                   f"{', '.join(f'{name}=' for name in given)}")
    if backend != "landscape":
        raise InvalidArgumentError(f"a {env_name} answers from a landscape, not with backend={backend!r}")
    for name in ("context", "db", "measurer", *ignored):
        kwargs.pop(name, None)
    if evaluator is not None:
        if not isinstance(evaluator, LandscapeEvaluator):
            raise InvalidTypeError(f"backend='landscape' takes a LandscapeEvaluator as evaluator=, got "
                                   f"{type(evaluator).__name__}")
        if landscape is not None:
            raise InvalidArgumentError("give landscape= or evaluator= (which holds a landscape), not both")
        check_landscape(evaluator.landscape, workload, space)
        return evaluator
    if not isinstance(workload, Workload):
        raise InvalidTypeError(f"workload must be a tensorgym Workload, got {type(workload).__name__}")
    return LandscapeEvaluator(env_landscape(workload, landscape, target, space))


def load_landscape(path: str | os.PathLike) -> Landscape:
    """The landscape of the file ``path``, read once per process (a landscape is immutable; the envs of a
    vector env share it). A file that changed is read again."""
    resolved = Path(path).resolve()
    try:
        stat = resolved.stat()
    except OSError:
        return Landscape.load(resolved)  # raises its own one-line error
    return _load(str(resolved), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _load(path: str, mtime_ns: int, size: int) -> Landscape:
    return Landscape.load(path)


# -- what stepping needs, once per landscape and layout ----------------------------------------------------------
class LandscapeWalk:
    """The static part of a landscape env for one observation layout (see the module docs).

    Row ``i`` is the landscape's row ``i`` and the hop graph's node ``i``.

    Attributes:
        graph: the :class:`~tensorgym.spaces.tiles.HopGraph` over every config of the landscape (as recorded).
        moves: ``moves[row, action]``: the row an action leads to (-1: it leaves the space), read-only;
            ``next`` is the same table as lists (the step's lookups).
        masks: ``moves >= 0``, read-only.
        observations: each row's observation with its two throughputs at 0 (at ``scale_at`` and after), read-only.
        ok, movable: per row, as lists: the config's kernel ran correctly; it has a move to a correct config.
        status, latency_cv, timing, busy, errors: per row, as recorded (lists).
    """

    def __init__(self, landscape: Landscape, rules: HopRules, graph: HopGraph | None = None):
        self.graph = graph if graph is not None else HopGraph(rules.space, landscape.records())
        self.moves = rules.actions_table(self.graph)
        self.moves.flags.writeable = False
        self.next: list[list[int]] = self.moves.tolist()
        self.masks = self.moves >= 0
        self.masks.flags.writeable = False
        static = np.stack([rules.static_observation(c) for c in landscape.configs]) if len(landscape) else \
            np.zeros((0, rules.observation_space.shape[0] - 2 - len(rules.shape_features)), dtype=np.float32)
        self.scale_at = static.shape[1]
        shape = np.broadcast_to(rules.shape_features, (len(landscape), len(rules.shape_features)))
        self.observations = np.concatenate(
            [static, np.zeros((len(landscape), 2), dtype=np.float32), shape], axis=1).astype(np.float32)
        self.observations.flags.writeable = False
        self.ok: list[bool] = self.graph.ok.tolist()
        self.movable: list[bool] = self.graph.movable.tolist()
        self.starts = self.graph.starts
        self.status: list[str] = [s.value for s in landscape.status]
        self.latency_cv = [None if math.isnan(v) else v for v in landscape.latency_cv.tolist()]
        self.timing: list[str] = list(landscape.timing)
        self.busy = [r.busy for r in self.graph.records]
        self.errors: list[str] = list(landscape.error)


# Content key of a landscape -> its walk per observation layout, least recently used first.
_WALKS: OrderedDict[tuple, dict[str, LandscapeWalk]] = OrderedDict()


def landscape_walk(landscape: Landscape, rules: HopRules) -> LandscapeWalk:
    """The :class:`LandscapeWalk` of ``landscape`` in ``rules``' layout, built once per process.

    Keyed by what the walk depends on (the space, the configs and their statuses), not by the object: a
    landscape deep-copied with a spec (``gym.make(env.spec)``) finds the walk of the original."""
    meta = landscape.metadata
    key = (meta.space, meta.workload_key, meta.fingerprint, json.dumps(meta.space_options, sort_keys=True),
           len(landscape), hash(landscape.configs), hash(landscape.status))
    walks = _WALKS.get(key)
    if walks is None:
        walks = _WALKS[key] = {}
        while len(_WALKS) > MAX_CACHED_LANDSCAPES:
            _WALKS.popitem(last=False)
    _WALKS.move_to_end(key)
    walk = walks.get(rules.observation)
    if walk is None:
        graph = next(iter(walks.values())).graph if walks else None  # another layout's graph: the same hops
        walk = walks[rules.observation] = LandscapeWalk(landscape, rules, graph)
    return walk


# -- the env --------------------------------------------------------------------------------------------------
class LandscapeHopEnv(TileHopEnv):
    """The tile-hop env answered from a landscape (see the module docs); ``gym.make(id, backend="landscape")`` and
    ``make_env(workload, backend="landscape")`` build one.

    Keyword arguments: ``landscape`` (which landscape) or ``evaluator`` (a
    :class:`~tensorgym.landscape.LandscapeEvaluator`), ``target`` (the CPU whose shipped landscape is used,
    default this machine's), ``observation``, ``max_steps``, ``render_mode``. It takes no ``context``, ``db``,
    ``measurer`` or space options: the landscape is the space and the measurements.

    Attributes:
        landscape: the :class:`~tensorgym.landscape.Landscape` walked.
        walk: its :class:`LandscapeWalk` in this env's layout.
    """

    landscape_backend = True

    def __init__(self, workload: Workload, *, landscape: LandscapeArgument = None,
                 evaluator: LandscapeEvaluator | None = None, target: Target | str | None = None,
                 backend: str = "landscape", **kwargs: Any):
        evaluator = landscape_evaluator("LandscapeHopEnv", workload, "tiles", landscape=landscape, evaluator=evaluator,
                                        target=target, backend=backend, kwargs=kwargs)
        self._at = self._best_at = -1  # the state's row and the episode's best row (-1: no episode)
        super().__init__(workload, backend="landscape", evaluator=evaluator, **kwargs)
        self.landscape = evaluator.landscape
        self.walk = landscape_walk(self.landscape, self.rules)
        self.rules.use_graph(self.walk.graph)  # the rules' mask, target and observe answer as the env does
        walk = self.walk
        # The hot path reads these as locals of self, not through the walk.
        self._next, self._ok, self._movable = walk.next, walk.ok, walk.movable
        self._masks, self._observations, self._scale_at = walk.masks, walk.observations, walk.scale_at
        self._n_actions = int(self.action_space.n)
        self._unit = workload.throughput_unit
        self._refresh_draws()

    # -- the draws ----------------------------------------------------------------------------------------
    def reseed(self, seed: int) -> None:
        """Seed the start configs and the evaluator's draws as ``reset(seed=seed)`` does, without an episode."""
        super().reseed(seed)
        self._seed_draws(seed)

    def _seed_draws(self, seed: int) -> None:
        self.evaluator.seed(np.random.default_rng([int(seed), DRAW_STREAM]))
        self._refresh_draws()

    def _refresh_draws(self) -> None:
        """Each row's record, GFLOP/s and scaled GFLOP/s under the evaluator's current draws."""
        evaluator = self.evaluator
        self._records: list[Record] = [evaluator.lookup(c) for c in self.landscape.configs]
        self._gflops: list[float] = [r.score for r in self._records]
        self._latency: list[float | None] = [r.latency_s for r in self._records]
        gflops = np.asarray(self._gflops, dtype=np.float64)
        self._scale: list[float] = np.clip(np.log10(1.0 + gflops) / 3.0, 0.0, 1.0).astype(np.float32).tolist()

    @property
    def scores(self) -> np.ndarray:
        """This seed's GFLOP/s of every config of the landscape (0.0: failed), in the landscape's order."""
        return np.asarray(self._gflops)

    # -- the state, as rows -----------------------------------------------------------------------------
    @property
    def _state(self) -> HopState | None:
        """The tile-hop env's state, built from the rows on demand (render, tests): the env keeps rows."""
        if self._at < 0:
            return None
        return HopState(self._records[self._at], self._records[self._best_at], self._at)

    @_state.setter
    def _state(self, state: HopState | None) -> None:
        if state is None:
            self._at = self._best_at = -1
        else:
            self._at, self._best_at = state.node, self.landscape.index_of(state.best.config)

    def recorded_configs(self) -> list[Config]:
        """The landscape's configs whose kernels ran correctly."""
        return [c for c, ok in zip(self.landscape.configs, self._ok) if ok]

    # -- gymnasium API ----------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super(TileHopEnv, self).reset(seed=seed)
        options = check_reset_options(options, ("config",))
        if seed is not None:
            self._seed_draws(seed)
        if "config" in options:
            # Not the space's parse: the evaluator says whether a config it lacks is outside the bounds or the space.
            row = self.evaluator.index_of(Config.coerce(options["config"]))
            if not self._ok[row]:
                raise InvalidArgumentError(f"start config fails ({self.walk.status[row]}): {self.walk.errors[row]}")
            if not self._movable[row]:
                raise InvalidArgumentError(f"start config {self.landscape.configs[row].key} is a dead end: no move "
                                           f"reaches another config of the landscape that runs correctly")
        else:
            starts = self.walk.starts
            if not len(starts):
                raise NoWorkingStart(f"the landscape of {self.workload.label} has no correct config with a correct "
                                     f"neighbour to start from")
            row = int(starts[int(self.np_random.integers(len(starts)))])
        self._at = self._best_at = row
        self._steps = 0
        return self._observation(), self._info(row, "ok")

    def step(self, action):
        at = self._at
        if at < 0:
            raise ResetNeeded("call reset() before step()")
        if type(action) is not int or not 0 <= action < self._n_actions:
            action = self._checked_action(action)
        self._steps += 1
        to = self._next[at][action]
        if to < 0:
            reward, status = INVALID_ACTION_PENALTY, "masked"
        elif not self._ok[to]:
            reward, status = FAILED_KERNEL_PENALTY, self.walk.status[to]
        else:
            gflops = self._gflops
            reward, status = math.log2(gflops[to] / gflops[at]), "ok"
            self._at = at = to
            if gflops[to] > gflops[self._best_at]:
                self._best_at = to
        truncated = self._steps >= self.max_steps or not self._movable[at]
        return self._observation(), reward, False, truncated, self._info(to, status)

    def _checked_action(self, action: Any) -> int:
        if isinstance(action, np.integer) and 0 <= action < self._n_actions:
            return int(action)
        if not self.action_space.contains(action):
            raise InvalidArgumentError(f"action {action!r} is outside the action space Discrete({self._n_actions}); "
                                       f"actions are integers in [0, {self._n_actions - 1}]")
        return int(action)

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the actions whose move stays inside the landscape's space (a fresh array)."""
        if self._at < 0:
            raise ResetNeeded("call reset() before action_masks()")
        return self._masks[self._at].copy()

    # -- observation and info ---------------------------------------------------------------------------
    def _observation(self) -> np.ndarray:
        observation = self._observations[self._at].copy()
        k = self._scale_at
        observation[k] = self._scale[self._at]
        observation[k + 1] = self._scale[self._best_at]
        return observation

    def _info(self, tried: int, status: str) -> dict[str, Any]:
        """The tile-hop env's info, read from the rows (``tried``: the row the step's move reached, -1: none)."""
        at, best, walk, gflops = self._at, self._best_at, self.walk, self._gflops
        configs = self.landscape.configs
        return {
            "status": status,
            "gflops": gflops[at],
            "unit": self._unit,
            "latency_s": self._latency[at],
            "latency_cv": walk.latency_cv[at],
            "timing": walk.timing[at],
            "busy": walk.busy[at],
            "config": configs[at].to_json(),
            "tried_gflops": gflops[tried] if tried >= 0 and self._ok[tried] else None,
            "best_gflops": gflops[best],
            "best_config": configs[best].to_json(),
            "measurements": 0,  # nothing is measured: every answer comes from the landscape
            "action_mask": self._masks[at].copy(),
        }

    def render(self) -> str | None:
        text = super().render()
        return None if text is None else f"{text}  [landscape {self.landscape.cpu_folder}]"
