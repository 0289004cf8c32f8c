"""Train a stable-baselines3 policy on tensorgym envs (what ``tensorgym train`` runs).

The recipe, in SB3's own terms:

1. **Envs.** ``n_envs`` copies of a :class:`~tensorgym.agents.rl.layers.LayerSampledEnv`
   (each episode on a layer drawn from the training layers, tile-hop envs in
   the common layout so that every layer has the same spaces), each in a
   ``Monitor``, in a ``DummyVecEnv`` (default) or ``SubprocVecEnv``. The
   ``replay`` backend answers from the database (no compiling; thousands of
   steps per second); ``landscape`` from each layer's landscape (every config of
   a benchmark space, measured once and shipped: no database, no compiling,
   recorded noise); ``tvm`` measures every new config (one process, one
   :class:`~tensorgym.context.TuningContext` and its measurer: timings must not
   overlap, so ``SubprocVecEnv`` is refused there).
2. **Model.** ``PPO``, ``MaskablePPO`` (sb3-contrib; it reads the envs'
   ``action_masks()``) or ``DQN``, ``"MlpPolicy"``, with :data:`ALGO_DEFAULTS`
   (short rollouts, a replay buffer that fits in memory) and any overrides.
3. **Logging and callbacks.** A CSV log (and TensorBoard, when the
   ``tensorboard`` package is installed) in ``out``; a tqdm progress bar;
   ``CheckpointCallback`` into ``out/checkpoints``; an ``EvalCallback``
   (``MaskableEvalCallback`` for MaskablePPO) on the training layers that
   saves ``out/best.zip`` whenever the mean episode return improves.
4. **Held-out evaluation.** After training, the best policy tunes every
   held-out layer as the ``rl`` agent within a measurement budget, and
   ``out/evaluation.json`` records what it found (with the replay backend,
   next to the best config the database holds for that layer; with the
   landscape backend, next to the landscape's true optimum).

The policy files carry tensorgym's :class:`~tensorgym.agents.rl.policy.PolicyInfo`, so
``tensorgym tune ENV --agent rl --policy out/best.zip`` knows what it loads.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tensorgym.checks import choice
from tensorgym.context import TuningContext
from tensorgym.database import Database
from tensorgym.envs.base import BACKENDS
from tensorgym.envs.landscape_env import LandscapeHopEnv
from tensorgym.envs.registration import make_env, workload_of
from tensorgym.errors import InvalidArgumentError
from tensorgym.measure.measurer import Measurer
from tensorgym.workloads import Workload

from ..threads import torch_threads
from .greedy import check_walk
from .layers import Landscapes, landscape_of, layer_env_factory
from .policy import ALGORITHMS, PolicyInfo, algorithm_class

log = logging.getLogger(__name__)

# Short PPO rollouts (256 steps per env) so that updates come often on short runs; a DQN replay
# buffer of 50k transitions (SB3's default of 1M would allocate gigabytes of observations).
ALGO_DEFAULTS: dict[str, dict[str, Any]] = {
    "ppo": {"n_steps": 256, "batch_size": 64, "gamma": 0.95},
    "maskable-ppo": {"n_steps": 256, "batch_size": 64, "gamma": 0.95},
    "dqn": {"buffer_size": 50_000, "learning_starts": 100, "exploration_fraction": 0.3, "gamma": 0.95,
            "target_update_interval": 1000},
}
VEC_ENVS = ("dummy", "subproc")


def _workloads(envs: Sequence[str | Workload]) -> list[Workload]:
    return [e if isinstance(e, Workload) else workload_of(e) for e in envs]


def dataset_layers(database: Database, target=None) -> list[Workload]:
    """The layers of a database that the replay backend can start an episode from (tiles space, this machine)."""
    from tensorgym.dataset.stats import dataset_stats
    from tensorgym.target import resolve_target

    fingerprint = resolve_target(target).fingerprint
    workloads = database.workloads()
    return [workloads[s.workload] for s in dataset_stats(database, space="tiles", target=fingerprint).layers
            if s.replay_starts and s.workload in workloads]


def make_training_env(envs: Sequence[str | Workload], *, db: str | Path | None = None, backend: str = "replay",
                      space: str = "tiles", n_envs: int = 4, vec: str = "dummy", max_steps: int = 32,
                      seed: int = 0, context: TuningContext | None = None, measurer: Measurer | None = None,
                      landscape: Landscapes = None, walk: str = "episodes", features: str = "env",
                      starts: int = 1):
    """A seeded SB3 ``VecEnv`` of ``n_envs`` layer-sampled envs over ``envs`` (ids or workloads); the backends'
    arguments are :func:`~tensorgym.agents.rl.layers.layer_env_factory`'s."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    if vec not in VEC_ENVS:
        raise InvalidArgumentError(f"vec must be one of {VEC_ENVS}, got {vec!r}")
    if backend == "tvm" and vec == "subproc":
        raise InvalidArgumentError("the tvm backend measures kernels: several processes would time them at once; "
                                   "use vec='dummy' (one process, one measurer) or the replay or landscape backend")
    if not isinstance(n_envs, int) or n_envs < 1:
        raise InvalidArgumentError(f"n_envs must be a positive integer, got {n_envs!r}")
    factory = layer_env_factory(_workloads(envs), db=db, space=space, backend=backend, max_steps=max_steps,
                                context=context, measurer=measurer, landscape=landscape, walk=walk,
                                features=features, starts=starts)
    venv = (SubprocVecEnv if vec == "subproc" else DummyVecEnv)([factory] * n_envs)
    venv.seed(seed)
    return venv


def check_landscapes(layers: Sequence[Workload], space: str = "tiles", landscape: Landscapes = None) -> None:
    """Refuse, before anything is trained, layers without a landscape (``landscape``: a CPU folder, default this
    machine's, or one landscape per workload key) or a space that has none: one line naming the first."""
    if space != "tiles":
        raise InvalidArgumentError(f"the landscape backend walks tiles landscapes; --space {space} has none yet")
    from tensorgym.envs.landscape_env import env_landscape

    for wl in layers:
        env_landscape(wl, landscape_of(landscape, wl))


def make_model(algo: str, env, *, seed: int = 0, verbose: int = 0, **options: Any):
    """The SB3 model of ``algo`` over ``env`` with :data:`ALGO_DEFAULTS` and ``options`` on top."""
    cls = algorithm_class(algo)
    return cls("MlpPolicy", env, seed=seed, verbose=verbose, device="cpu", **{**ALGO_DEFAULTS[algo], **options})


def _callbacks(algo: str, out: Path, eval_env, *, eval_freq: int, eval_episodes: int, checkpoint_freq: int,
               n_envs: int, progress: bool):
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList, CheckpointCallback, EvalCallback

    class SaveBest(BaseCallback):
        """Called by the eval callback on a new best mean return: keep that model as ``best.zip``."""

        def _on_step(self) -> bool:
            self.model.save(out / "best.zip")
            return True

    class ProgressBar(BaseCallback):
        """A tqdm bar over the training timesteps, with the latest mean episode return."""

        def _on_training_start(self) -> None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.locals["total_timesteps"] - self.model.num_timesteps, desc=f"train {algo}",
                            unit="step", dynamic_ncols=True)

        def _on_step(self) -> bool:
            self.bar.update(self.training_env.num_envs)
            episodes = self.model.ep_info_buffer
            if episodes and self.n_calls % 50 == 0:
                mean = sum(e["r"] for e in episodes) / len(episodes)
                self.bar.set_postfix_str(f"episode return {mean:+.2f}", refresh=False)
            return True

        def _on_training_end(self) -> None:
            self.bar.close()

    callbacks = []
    if progress:
        callbacks.append(ProgressBar())
    if checkpoint_freq > 0:
        callbacks.append(CheckpointCallback(save_freq=max(1, checkpoint_freq // n_envs),
                                            save_path=str(out / "checkpoints"), name_prefix=algo))
    if eval_env is not None and eval_freq > 0:
        if algo == "maskable-ppo":
            from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback as Eval
        else:
            Eval = EvalCallback
        callbacks.append(Eval(eval_env, callback_on_new_best=SaveBest(), n_eval_episodes=eval_episodes,
                              eval_freq=max(1, eval_freq // n_envs), log_path=str(out / "eval"),
                              deterministic=True, verbose=0))
    return CallbackList(callbacks)


def train(algo: str, envs: Sequence[str | Workload], *, db: str | Path | None = None, out: str | Path,
          backend: str = "replay", space: str = "tiles", timesteps: int = 200_000, n_envs: int = 4,
          vec: str = "dummy", max_steps: int = 32, seed: int = 0, eval_envs: Sequence[str | Workload] = (),
          eval_budget: int = 64, eval_backend: str | None = None, eval_freq: int | None = None,
          eval_episodes: int = 16, checkpoint_freq: int | None = None, progress: bool = True, threads: int = 1,
          landscape: Landscapes = None, algo_options: Mapping[str, Any] | None = None, walk: str = "episodes",
          features: str = "env", starts: int = 1) -> dict[str, Any]:
    """Train ``algo`` on the layers ``envs`` (see the module docs); returns the report also written to
    ``out/training.json``. Files in ``out``: ``final.zip``, ``best.zip``, ``checkpoints/``, ``progress.csv``,
    ``eval/``, ``evaluation.json``.

    ``db`` is the dataset of the replay backend and where the tvm backend stores its measurements (the
    landscape backend needs none); ``landscape`` names the CPU folder of the landscapes (default: this
    machine's), or maps each layer's workload key to its landscape (a file or a
    :class:`~tensorgym.landscape.Landscape`). ``walk="greedy"`` trains on the greedy walk
    (:mod:`~tensorgym.agents.rl.greedy`: ``starts`` random starts, then ``max_steps`` steps, ``features``), which
    the policy file records so that the ``rl`` agent tunes the same way. ``eval_freq`` / ``checkpoint_freq``
    count timesteps (default: a tenth of the run each with the replay and landscape backends; none with tvm,
    where evaluating measures kernels); ``eval_backend``
    defaults to ``backend``; ``threads`` is torch's CPU threads (:func:`~tensorgym.agents.threads.torch_threads`).
    """
    from stable_baselines3.common.logger import configure

    if algo not in ALGORITHMS:
        raise InvalidArgumentError(f"unknown algorithm {algo!r}; choose one of {', '.join(ALGORITHMS)}")
    if not isinstance(timesteps, int) or timesteps < 1:
        raise InvalidArgumentError(f"timesteps must be a positive integer, got {timesteps!r}")
    eval_backend = eval_backend or backend
    for name, value in (("backend", backend), ("eval_backend", eval_backend)):
        choice(name, value, BACKENDS)
    check_walk(walk, features, starts)
    if walk == "greedy" and backend != "landscape":
        raise InvalidArgumentError("the greedy walk trains on landscapes: use backend='landscape'")
    workloads = _workloads(envs)
    held_out = _workloads(eval_envs)
    if not workloads:
        raise InvalidArgumentError("give at least one training layer")
    if db is None and {backend, eval_backend} & {"replay", "tvm"}:
        raise InvalidArgumentError("the replay and tvm backends need a database: give db=")
    if "replay" in (backend, eval_backend) and not Path(db).exists():
        raise InvalidArgumentError(f"{db} does not exist: the replay backend trains on a dataset "
                                   f"(`tensorgym dataset build --db {db}`)")
    if backend == "landscape":
        check_landscapes(workloads, space, landscape)
    if eval_backend == "landscape":
        check_landscapes(held_out, space, landscape)
    default_freq = max(1, timesteps // 10) if backend != "tvm" else 0
    eval_freq = default_freq if eval_freq is None else eval_freq
    checkpoint_freq = default_freq if checkpoint_freq is None else checkpoint_freq
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    # One context measures whatever is measured, training and held-out evaluation alike (one measurer).
    context = TuningContext.local(None, db) if "tvm" in (backend, eval_backend) else None
    venv = eval_venv = None
    t0 = time.monotonic()
    try:
        train_context = context if backend == "tvm" else None
        walking = {"walk": walk, "features": features, "starts": starts}
        venv = make_training_env(workloads, db=db, backend=backend, space=space, n_envs=n_envs, vec=vec,
                                 max_steps=max_steps, seed=seed, context=train_context, landscape=landscape,
                                 **walking)
        if eval_freq > 0:
            eval_venv = make_training_env(workloads, db=db, backend=backend, space=space, n_envs=1,
                                          max_steps=max_steps, seed=seed + 1, context=train_context,
                                          landscape=landscape, **walking)
        model = make_model(algo, venv, seed=seed, **dict(algo_options or {}))
        formats = ["csv", "log"]
        try:
            import tensorboard  # noqa: F401

            formats.append("tensorboard")
        except ImportError:
            log.info("tensorboard is not installed: logging to progress.csv only")
        model.set_logger(configure(str(out), formats))
        info = PolicyInfo(algo=algo, space=space, observation="common" if space == "tiles" else None,
                          observation_size=int(venv.observation_space.shape[0]), n_actions=int(venv.action_space.n),
                          max_steps=max_steps, backend=backend, train_envs=[wl.label for wl in workloads],
                          timesteps=timesteps, walk=walk, features=features, starts=starts)
        model.tensorgym_policy = info.to_json()  # saved with the model (see policy.py)
        callback = _callbacks(algo, out, eval_venv, eval_freq=eval_freq, eval_episodes=eval_episodes,
                              checkpoint_freq=checkpoint_freq, n_envs=n_envs, progress=progress)
        with torch_threads(threads):
            model.learn(total_timesteps=timesteps, callback=callback)
        model.save(out / "final.zip")
        if not (out / "best.zip").exists():
            shutil.copyfile(out / "final.zip", out / "best.zip")
        train_seconds = time.monotonic() - t0
        evaluation = evaluate_held_out(out / "best.zip", held_out, db=db, backend=eval_backend, budget=eval_budget,
                                       seed=seed, context=context if eval_backend == "tvm" else None,
                                       landscape=landscape, progress=progress)
    finally:
        for env in (venv, eval_venv):
            if env is not None:
                env.close()
        if context is not None:
            context.close()
    (out / "evaluation.json").write_text(json.dumps(evaluation, indent=1))
    report = {"policy": str(out / "best.zip"), "final": str(out / "final.zip"), "info": info.to_json(),
              "train_seconds": train_seconds, "evaluation": evaluation}
    (out / "training.json").write_text(json.dumps(report, indent=1))
    return report


def evaluate_held_out(policy: str | Path, layers: Sequence[Workload], *, db: str | Path | None = None,
                      backend: str, budget: int, seed: int = 0, context: TuningContext | None = None,
                      measurer: Measurer | None = None, landscape: Landscapes = None,
                      progress: bool = False) -> list[dict[str, Any]]:
    """Tune each held-out layer with the policy as the ``rl`` agent; one dict per layer.

    By backend: ``tvm`` measures through ``context`` (it stays open), or a context of its own over ``db``
    (with ``measurer`` if given); ``replay`` answers from ``db``, and ``dataset_best_gflops`` is the best
    correct record it holds for the layer (what the policy could at most find there); ``landscape`` answers
    from the layer's landscape (``landscape``: its CPU folder, default this machine's), its draws seeded
    with ``seed``, and ``optimum_gflops`` is the landscape's true optimum, ``fraction_of_optimum`` the
    share of it found.
    """
    from tensorgym.tuner import ProgressBarCallback

    from .agent import RLAgent

    choice("backend", backend, BACKENDS)
    agent = RLAgent(str(policy))
    out = []
    owned: list[Any] = []
    options: dict[str, Any] = {}
    database = None
    if backend == "tvm":
        if context is None:
            context = TuningContext.local(None, db, measurer=measurer)
            owned.append(context)
        options["context"] = context
    elif backend == "replay":
        database = Database(db)
        owned.append(database)
        options["db"] = database
    try:
        for wl in layers:
            where = landscape_of(landscape, wl) if backend == "landscape" else None
            env = make_env(wl, space=agent.env_space, backend=backend,
                           **({**options, "landscape": where} if where is not None else options))
            entry: dict[str, Any] = {"layer": wl.label, "workload": wl.key, "backend": backend, "budget": budget}
            if isinstance(env, LandscapeHopEnv):
                env.reseed(seed)  # the landscape's draws of this evaluation
            try:
                result = agent.tune(env, budget=budget, seed=seed, callback=ProgressBarCallback() if progress else None)
                entry.update(best_gflops=result.best_gflops, trials=len(result.trials), measured=result.measured,
                             best_config=result.best_config.to_json() if result.best_config else None,
                             tuning_seconds=result.trials[-1].elapsed_s if result.trials else 0.0)
            except (RuntimeError, InvalidArgumentError) as exc:  # e.g. no replay data for this layer
                entry["error"] = str(exc)
            finally:
                env.close()
            if database is not None:
                best = database.best(wl.key, env.target.fingerprint, agent.env_space)
                entry["dataset_best_gflops"] = best[0].gflops if best else None
            if isinstance(env, LandscapeHopEnv):
                optimum = env.landscape.optimum
                entry["landscape"] = env.landscape.cpu_folder
                entry["optimum_gflops"] = optimum.gflops if optimum is not None else None
                if optimum is not None and entry.get("best_gflops") is not None:
                    entry["fraction_of_optimum"] = entry["best_gflops"] / optimum.gflops
            out.append(entry)
    finally:
        for resource in owned:
            resource.close()
    return out
