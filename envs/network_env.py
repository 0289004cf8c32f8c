"""The network environment: which layer (and mapping candidate) gets the next round of measurements.

``gym.make("Network-ResNet18-v0", space="tiles")`` turns GTA's scheduling
problem (seed 002) into a Gymnasium env: the agent plays the task scheduler.
Each step gives one round of ``measure_per_round`` trials to the (task,
candidate) its action names; inside it the search of that pair (the GA with
its XGBoost cost model by default) runs one round, continuing where it
stopped (:mod:`tensorgym.tuner`); the database answers configs measured
before.

**Session and episodes.** The env tunes in one *session* (a
:class:`~tensorgym.tuner.Tuner`), which its first ``reset``
starts and warms up: one round per live task, split over all its candidates
(Ansor's and GTA's warm-up), so that every task has a latency when the agent
starts deciding. Later resets start the next episode from the tuned state
(the session goes on: nothing is warmed up or measured again);
``reset(options={"fresh": True})`` starts a new session, seeded from the
env's RNG (``reset(seed=...)``), and warms it up. The first session's seed
is ``session_seed`` (default 0), whatever the reset's seed: every env over
the same network, space and agent starts the same session, so a database
that holds one warm-up answers the next one without measuring (the envs of
``gym.make_vec``, ``check_env``'s copies). A session in which no task is
left to tune is replaced by a fresh one at the next reset. A seeded reset
also seeds the action space: a step costs a round of measurements, and
sampled actions after ``reset(seed=...)`` (``check_env``'s) then repeat the
rounds a database already holds, so ``check_env`` over a warm database
measures nothing.

An episode is truncated by Gymnasium's ``TimeLimit`` (``gym.make`` adds it:
the ids' ``max_episode_steps`` is :func:`default_episode_steps`, 4 steps per
live task), after ``max_steps`` steps when the env is built with it, or when
its trial budget (``budget``, the warm-up not counted; default: none) is
spent, and terminates when no action is left (every task dead). Since an
episode starts where the one before ended, the ids are registered
``nondeterministic``.

**Actions.** ``Discrete(max_tasks * max_candidates)``: action ``a`` gives
task ``a // max_candidates``'s candidate ``a % max_candidates`` one round.
:meth:`action_masks` (and ``info["action_mask"]``) masks padding, tasks of
weight 0, dead tasks and candidates (a round gave them nothing new) and,
with ``kappa`` set, the candidates GTA's ``probability_sample`` pruned after
the task's last round. A masked action measures nothing and costs
:data:`INVALID_ACTION_PENALTY`; an action outside the space raises ``ValueError``.

**Reward.** The relative reduction of the estimated network latency
``f = sum_i w_i * m_i`` over the step: ``(f_before - f_after) / f_before``
(0 when nothing improved; 1 when the step gave the last task without a
correct kernel its first one). Over an episode the rewards are the relative
gains of each round, whatever the layer.

**Observation.** ``Box(0, 1)`` of ``max_tasks`` rows (padded with zeros),
flattened; per task, :data:`TASK_FEATURES`:

* ``live`` (1: the agent can still tune it), ``share`` (``w_i m_i / f``),
  ``progress`` (``m_i`` now / ``m_i`` after the warm-up), ``trials`` (its
  share of the run's trials), ``flops`` (``log10(1 + FLOPs) / 12``),
  ``weight`` (``w_i / sum w``), ``improvement`` (relative gain of ``m_i``
  over its last 3 rounds);

then per candidate (``max_candidates`` of them, padded),
:data:`CANDIDATE_FEATURES`: ``alive``, ``speed`` (``m_i / m_ik``: 1 for the
task's best candidate, 0 without a kernel), ``trials`` (its share of the
task's trials), ``selectable`` (its action is not masked).

**Replay.** With ``backend="replay"`` nothing is compiled: the search of a
(task, candidate) replays the configs of that candidate the database holds,
in the order they were first measured, ``measure_per_round`` per round; a
pair whose records are used up is dead.

Not registered in :data:`tensorgym.catalog.ENVS`, which maps a search space
to its single-workload env: a network env works over any space; its ids are
registered in :mod:`.registration` (``Network-ResNet18-v0``,
``Network-ResNet50-v0``, ``Network-YOLO9000-v0``, ``Network-BERTbase-v0``,
and ``tensorgym/Network-v0`` with ``network=`` a :class:`~tensorgym.networks.Network`
or a JSON/TOML file).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded
from gymnasium.wrappers import TimeLimit

from tensorgym.candidate_sampling import probability_sample
from tensorgym.calibration import stored_or_quick_catalogue
from tensorgym.catalog import agent_class, make_agent, make_space, space_class
from tensorgym.checks import integer
from tensorgym.context import TuningContext
from tensorgym.database import Database
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.evaluator import Evaluator
from tensorgym.measure.measurer import Measurer
from tensorgym.result import RoundLog
from tensorgym.strategy import ReplaySearch
from tensorgym.tuner import Tuner, TuningCallback, default_measure_per_round
from tensorgym.networks import Network, resolve_network
from tensorgym.spaces.base import Space
from tensorgym.strategy import SearchStrategy
from tensorgym.target import Target, resolve_target

from .base import (METADATA, DataSpec, check_context, check_max_steps, check_reset_options, env_context,
                   refuse_parallel_timing, unwrapped_as)

log = logging.getLogger(__name__)

INVALID_ACTION_PENALTY = -1.0
TASK_FEATURES = ("live", "share", "progress", "trials", "flops", "weight", "improvement")
CANDIDATE_FEATURES = ("alive", "speed", "trials", "selectable")
IMPROVEMENT_WINDOW = 3  # rounds, Ansor's backward window
ENV_MEASURE_PER_ROUND = 16  # a quarter of Ansor's round: more decisions per episode
STEPS_PER_LIVE_TASK = 4  # default episode length, per task the agent can tune


def default_episode_steps(network: Network) -> int:
    """Steps per episode of a network's id (its ``max_episode_steps``): 4 per live task."""
    return STEPS_PER_LIVE_TASK * max(1, len(network.live_tasks))


def unwrap_network_env(env: gym.Env) -> "NetworkEnv":
    """The network env under any Gymnasium wrappers (raises ``TypeError`` for other envs)."""
    return unwrapped_as(env, NetworkEnv, "a tensorgym network environment (gym.make('Network-ResNet18-v0') and the "
                                         "like)")


def default_agent(space: str) -> str:
    """The search inside each task: the GA where it works (the ``tiles`` space), random search elsewhere."""
    try:
        agent_class("ga")().check_space(space)
        return "ga"
    except InvalidArgumentError:
        return "random"


class NetworkEnv(DataSpec, gym.Env[np.ndarray, np.int64]):
    """Choose which task (and candidate) of a network gets the next round (see the module docs).

    Args:
        network: a built-in network's name (``"ResNet-18"``), a JSON/TOML file, or a
            :class:`~tensorgym.networks.Network`.
        space: the search space of every task (``"tiles"``, ``"microkernel"``, ...).
        dtype: the data type of every layer (default: the network's, float32).
        context, target, db, measurer, backend: as for the single-workload envs
            (:class:`~tensorgym.envs.TuningEnv`): a :class:`~tensorgym.context.TuningContext` (left open
            when the env closes), or the target, database and measurer it is built from.
        agent: the search inside each (task, candidate) (default: :func:`default_agent`);
            agent_options: its constructor's options (``batch_size`` defaults to the round size).
        measure_per_round: trials per step (default 16).
        max_steps: steps after which the env truncates an episode itself (default None: never;
            ``gym.make`` wraps a ``TimeLimit`` around it instead). :attr:`max_steps` is then ``math.inf``.
        budget: trials per episode, the warm-up not counted (default None: no limit).
        session_seed: the seed of the first tuning session (default 0; see the module docs).
        kappa, beta: with ``kappa``, mask the candidates GTA's ``probability_sample``
            (sampling rate ``kappa``, boost ``beta``) drops after each round of a task.
        max_tasks, max_candidates: pad the observation and actions to this size (one policy
            over several networks); default: this network's.
        render_mode: ``None`` or ``"ansi"``.
        space_options: the space's own options.
    """

    metadata = dict(METADATA)  # a class's own copy: vector envs and wrappers may edit theirs
    # Set in __init__ from the network (padded to max_tasks, max_candidates).
    observation_space: spaces.Box
    action_space: spaces.Discrete

    def __init__(self, network: "str | Path | Network", *, space: str = "tiles", dtype: str | None = None,
                 context: TuningContext | None = None, target: Target | str | None = None,
                 db: Database | str | Path | None = None, measurer: Measurer | None = None, backend: str = "tvm",
                 agent: str | None = None,
                 agent_options: Mapping[str, Any] | None = None, measure_per_round: int = ENV_MEASURE_PER_ROUND,
                 max_steps: int | None = None, budget: int | None = None, kappa: float | None = None,
                 beta: float = 0.2, max_tasks: int | None = None, max_candidates: int | None = None,
                 render_mode: str | None = None, session_seed: int = 0, **space_options: Any):
        if backend not in ("tvm", "replay"):
            raise InvalidArgumentError(f"backend must be 'tvm' or 'replay', got {backend!r}")
        check_context(context, target=target, db=db, measurer=measurer)
        if backend == "replay" and measurer is not None:
            raise InvalidArgumentError("backend='replay' measures nothing: do not pass a measurer")
        if measurer is not None and not isinstance(measurer, Measurer):
            raise InvalidTypeError(f"measurer must be a tensorgym Measurer (or None: the target's shared one), "
                                   f"got {type(measurer).__name__}")
        refuse_parallel_timing(backend)
        session_seed = integer("session_seed", session_seed, minimum=0)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise InvalidArgumentError(f"render_mode must be one of {self.metadata['render_modes']} or None, "
                                       f"got {render_mode!r}")
        for name, value in (("measure_per_round", measure_per_round), ("max_steps", max_steps), ("budget", budget)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
        if kappa is not None and not 0.0 < kappa <= 1.0:
            raise InvalidArgumentError(f"kappa must be in (0, 1] or None, got {kappa!r}")
        net = resolve_network(network)
        self.network = net.with_dtype(dtype) if dtype is not None else net
        self.target = context.target if context is not None else resolve_target(target)
        self.space_name = space
        self.backend = backend
        self.agent_name = agent or default_agent(space)
        self.agent_options = dict(agent_options or {})
        if backend == "tvm":
            make_agent(self.agent_name, **self.agent_options).check_space(space)  # fails early, with a message
        # Spaces that declare their dtypes (the implementation for this target's kind: make_space builds it).
        supported = getattr(space_class(space).for_target(self.target), "supported_dtypes", None)
        unsupported = sorted({t.workload.dtype for t in self.network.tasks} - set(supported or ()))
        if supported is not None and unsupported:
            raise InvalidArgumentError(f"the {space!r} space schedules {', '.join(supported)}, not "
                                       f"{', '.join(unsupported)}; choose another --space or --dtype")
        if space == "microkernel" and "catalogue" not in space_options and backend == "tvm":
            # The microkernel space only loads a catalogue: on first use, measure the quick one (as its env does).
            space_options["catalogue"] = stored_or_quick_catalogue(self.target, space_options.get("cache_dir"))
        self.spaces: list[Space] = [make_space(space, task.workload, self.target, **space_options)
                                    for task in self.network.tasks]
        self.measure_per_round = measure_per_round
        # math.inf, not None, when the env has no limit of its own (gym.make's TimeLimit cuts episodes).
        self.max_steps: int | float = max_steps if max_steps is not None else math.inf
        self.budget = budget
        self.session_seed = session_seed
        self.kappa, self.beta = kappa, float(beta)
        self.render_mode = render_mode
        n_candidates = max(len(s.candidates) for s in self.spaces)
        self.max_tasks = max_tasks if max_tasks is not None else len(self.network.tasks)
        self.max_candidates = max_candidates if max_candidates is not None else n_candidates
        if self.max_tasks < len(self.network.tasks) or self.max_candidates < n_candidates:
            raise InvalidArgumentError(f"max_tasks={self.max_tasks}, max_candidates={self.max_candidates} cannot hold "
                                       f"{len(self.network.tasks)} tasks of up to {n_candidates} candidates")
        self.row_size = len(TASK_FEATURES) + len(CANDIDATE_FEATURES) * self.max_candidates
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self.max_tasks * self.row_size,), dtype=np.float32)
        self.action_space = spaces.Discrete(self.max_tasks * self.max_candidates)
        self._tuner: Tuner | None = None  # the session
        self._owns_context = context is None
        self.context: TuningContext = context if context is not None else env_context(self.target, db, measurer)
        try:
            _ = self.context.database  # opened now: a database that cannot be used is refused here
        except BaseException:
            self.close()
            raise
        self._sessions = 0
        self._kept: dict[int, list[int]] = {}
        self._warm: list[float | None] = []
        self._steps = 0
        self._episode_start = 0  # the session's trials when the episode began
        self._last: RoundLog | None = None

    # -- the runs (schedulers use this too) ----------------------------------------------------
    @property
    def database(self) -> Database:
        """The database of the env's context."""
        return self.context.database

    @property
    def measurer(self) -> Measurer | None:
        """The measurer of the env's context (a shared one is taken on first use); None with the replay backend."""
        return self.context.measurer if self.backend == "tvm" else None

    def tuner(self, *, budget: int | None, time_budget: float | None = None, measure_per_round: int | None = None,
              seed: int = 0, callback: TuningCallback | Sequence[TuningCallback] | None = None,
              label: str = "") -> Tuner:
        """A new run over this env's tasks, spaces, database and measurer (what task schedulers drive)."""
        if measure_per_round is None:
            measure_per_round = default_measure_per_round(budget, len(self.network.live_tasks))
        agent = self.agent_name if self.backend == "tvm" else "replay"
        return Tuner.for_network(self.network, self.spaces, self._evaluator, self._search_for(measure_per_round),
                                 budget=budget, time_budget=time_budget, measure_per_round=measure_per_round,
                                 seed=seed, callback=callback, label=label, search=agent)

    def _evaluator(self, space: Space) -> Evaluator:
        return self.context.evaluator(space, replay=self.backend == "replay")

    def _search_for(self, batch_size: int):
        if self.backend == "replay":
            def replay(task: int, candidate: int) -> SearchStrategy:
                full = self.spaces[task]
                records = self.database.records(full.workload.key, self.target.fingerprint, full.name)
                configs = [r.config for r in records if _candidate_of(full, r.config) == candidate]
                return ReplaySearch(configs, batch_size)
            return replay

        options = dict(self.agent_options)
        if "batch_size" not in options and "batch_size" in inspect.signature(agent_class(self.agent_name)).parameters:
            options["batch_size"] = batch_size

        def search(task: int, candidate: int) -> SearchStrategy:
            return make_agent(self.agent_name, **options)
        return search

    # -- gymnasium API -----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode: from the tuned state of the session, or (first reset, ``options={"fresh": True}``,
        or a session with nothing left to tune) from a new session, warmed up."""
        super().reset(seed=seed)
        if seed is not None:
            # A step costs a round of measurements: a seeded reset seeds the action space too, so that sampled
            # actions (check_env's, a random scheduler's) repeat their rounds, which a warm database answers.
            self.action_space.seed(seed)
        options = check_reset_options(options, ("fresh",))
        fresh = options.get("fresh", False)
        if not isinstance(fresh, (bool, np.bool_)):
            raise InvalidTypeError(f"reset option fresh is True or False, got {type(fresh).__name__} {fresh!r}")
        started = self._tuner is None or bool(fresh) or not self._tuner.live_tasks
        if started:
            # The first session's seed is fixed (a warm database answers its warm-up in every env alike);
            # a fresh one asked for draws its seed from the env's RNG.
            self._start_session(self.session_seed if self._tuner is None else int(self.np_random.integers(2**31)))
        self._episode_start = len(self._tuner.trials)
        # The session's budget is the episode's: what it has used so far, plus this episode's allowance.
        self._tuner.budget = None if self.budget is None else len(self._tuner.trials) + self.budget
        self._steps = 0
        self._last = None
        return self._observation(), self._info("warm-up" if started else "resumed")

    def _start_session(self, seed: int) -> None:
        """A new tuning session, warmed up: one round per live task, over all its candidates."""
        if self._tuner is not None:
            self._tuner.close()
        # A round gives each of its k candidates max(1, measure_per_round // k) trials: this covers the warm-up,
        # which no episode's budget counts.
        warmup = sum(max(self.measure_per_round, len(self.spaces[i].candidates)) for i in self.network.live_tasks)
        self._tuner = self.tuner(budget=max(1, warmup), measure_per_round=self.measure_per_round, seed=seed,
                                 label=f"env {self.network.name}")
        self._sessions += 1
        self._kept = {}
        for task in self._tuner.live_tasks:
            if self._tuner.exhausted:
                break
            entry = self._tuner.run_round(task, warmup=True)
            self._after_round(entry)
        self._warm = [t.latency_s for t in self._tuner.tasks]

    def step(self, action):
        if self._tuner is None:
            raise ResetNeeded("call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is outside the action space Discrete({self.action_space.n}); "
                             f"actions are integers in [0, {self.action_space.n - 1}]")
        self._steps += 1
        if not self.action_masks()[int(action)]:
            reward, status = INVALID_ACTION_PENALTY, "masked"
        else:
            task, candidate = divmod(int(action), self.max_candidates)
            before = self._tuner.estimate()
            self._last = self._tuner.run_round(task, [candidate])
            self._after_round(self._last)
            reward, status = relative_reduction(before, self._tuner.estimate()), "ok"
        terminated = not self._tuner.live_tasks
        truncated = not terminated and (self._steps >= self.max_steps or self._tuner.exhausted)
        return self._observation(), float(reward), terminated, truncated, self._info(status)

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the actions that give a round to a live (task, candidate) (for MaskablePPO)."""
        if self._tuner is None:
            raise ResetNeeded("call reset() before action_masks()")
        mask = np.zeros(self.action_space.n, dtype=bool)
        if self._tuner.exhausted:
            return mask
        for state in self._tuner.tasks:
            if not state.live:
                continue
            for k in self._selectable(state.index):
                mask[state.index * self.max_candidates + k] = True
        return mask

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._tuner is None:
            return None
        estimate = self._tuner.estimate()
        limit = f"/{self.max_steps}" if math.isfinite(self.max_steps) else ""
        text = (f"{self.network.name} step {self._steps}{limit}: network "
                f"{'-' if estimate is None else f'{estimate * 1e3:.3f} ms'} after {len(self._tuner.trials)} trials")
        if self._last is not None:
            state = self._tuner.tasks[self._last.task]
            text += (f"; last round {state.task.label} "
                     f"({', '.join(state.candidates[k].name for k in self._last.candidates)})")
        return text

    def close(self) -> None:
        if self._tuner is not None:
            self._tuner.close()
            self._tuner = None
        if self._owns_context:  # an env given context= leaves it open
            self._owns_context = False
            self.context.close()
        super().close()

    # -- helpers ---------------------------------------------------------------------------------------
    def _selectable(self, task: int) -> list[int]:
        live = self._tuner.tasks[task].live_candidates
        if self.kappa is None:
            return live
        kept = [k for k in self._kept.get(task, live) if k in live]
        return kept or live

    def _after_round(self, entry: RoundLog) -> None:
        if self.kappa is None:
            return
        state = self._tuner.tasks[entry.task]
        live = state.live_candidates
        self._kept[entry.task] = probability_sample({k: state.candidates[k].latency_s for k in live},
                                                    set(live) - set(entry.candidates), kappa=self.kappa,
                                                    beta=self.beta)

    def _observation(self) -> np.ndarray:
        tuner = self._tuner
        obs = np.zeros((self.max_tasks, self.row_size), dtype=np.float32)
        estimate = tuner.estimate()
        total_weight = sum(self.network.weights)
        for state in tuner.tasks:
            row = obs[state.index]
            latency = state.latency_s
            warm = self._warm[state.index] if state.index < len(self._warm) else None
            row[0] = state.live
            row[1] = state.weight * latency / estimate if estimate and latency is not None else 0.0
            row[2] = latency / warm if latency is not None and warm else 1.0
            row[3] = state.trials / len(tuner.trials) if tuner.trials else 0.0
            row[4] = math.log10(1.0 + state.flops) / 12.0
            row[5] = state.weight / total_weight
            history = state.history
            if len(history) > IMPROVEMENT_WINDOW and history[-1 - IMPROVEMENT_WINDOW] > 0:
                row[6] = (history[-1 - IMPROVEMENT_WINDOW] - history[-1]) / history[-1 - IMPROVEMENT_WINDOW]
            selectable = set(self._selectable(state.index)) if state.live else set()
            for candidate in state.candidates:
                base = len(TASK_FEATURES) + len(CANDIDATE_FEATURES) * candidate.index
                row[base] = not candidate.dead
                row[base + 1] = latency / candidate.latency_s if candidate.latency_s and latency else 0.0
                row[base + 2] = candidate.trials / state.trials if state.trials else 0.0
                row[base + 3] = candidate.index in selectable
        return np.clip(obs.reshape(-1), 0.0, 1.0)

    def _info(self, status: str) -> dict[str, Any]:
        tuner = self._tuner
        info: dict[str, Any] = {
            "status": status,  # of this step: ok, masked; of a reset: warm-up (a new session), resumed
            "estimate_s": tuner.estimate(),
            "trials": len(tuner.trials),  # of the session
            "episode_trials": len(tuner.trials) - self._episode_start,
            "session": self._sessions,  # how many sessions this env has started
            "latencies_s": [t.latency_s for t in tuner.tasks],
            "action_mask": self.action_masks(),
        }
        if self._last is not None and status == "ok":
            info.update(task=self._last.task, candidates=list(self._last.candidates), round_trials=self._last.trials)
        return info


def relative_reduction(before: float | None, after: float | None) -> float:
    """``(before - after) / before`` of the network estimate (1 when ``after`` is the first known estimate)."""
    if after is None:
        return 0.0
    if before is None:
        return 1.0
    return (before - after) / before if before > 0 else 0.0


def _candidate_of(space: Space, config) -> int | None:
    try:
        return space.candidate_of(config)
    except Exception:  # noqa: BLE001 - a stored config the space no longer accepts is no candidate's
        return None


def make_network_env(**kwargs: Any) -> gym.Env:
    """Entry point of the built-in network ids: ``network=`` (a name, file or Network), then the env's keywords.

    For ``gym.make``, which adds the id's ``TimeLimit``: the env has no step limit of its own, and
    ``max_steps=N`` becomes a ``TimeLimit`` of ``N`` inside the registered one."""
    if "network" not in kwargs:
        raise InvalidArgumentError("tensorgym/Network-v0 needs network= (a Network, a built-in network's name, or a "
                                   "JSON/TOML file of layers and counts)")
    max_steps = check_max_steps(kwargs.pop("max_steps", None))
    env = NetworkEnv(kwargs.pop("network"), max_steps=None, **kwargs)
    return env if max_steps is None else TimeLimit(env, max_steps)


def make_custom_network_env(**kwargs: Any) -> gym.Env:
    """Entry point of ``tensorgym/Network-v0``, whose network comes with ``gym.make``: its episode length too,
    so the ``TimeLimit`` is added here (``max_steps``, default :func:`default_episode_steps`)."""
    max_steps = check_max_steps(kwargs.pop("max_steps", None))  # refused before anything is built
    env = make_network_env(**kwargs)
    return TimeLimit(env, max_steps or default_episode_steps(env.unwrapped.network))
