"""Replay throughput: raw masked random env steps per second on one tile-hop env, and SB3 training steps/s.

The replay backend answers every step from the database (no kernel is
compiled), so its speed is the env's own overhead: the figure the issue's
target (>= 10,000 raw steps/s on one env) is about. The database is either a
dataset you built (``--db data.db --env Conv2d-ResNet-R5-v0``) or, by default,
a synthetic one: hop walks over the layer's space with made-up throughputs
(the step cost does not depend on the values, only on how many records and
neighbours there are).

    python bench/bench_replay.py                               # synthetic, 2000 records
    python bench/bench_replay.py --db data.db --env Conv2d-ResNet-R5-v0
    python bench/bench_replay.py --sb3 --timesteps 20000       # also PPO / MaskablePPO steps/s, Dummy vs Subproc

Prints one line per measurement (steps, seconds, steps/s).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import tensorgym  # noqa: F401  (registers the ids)
from tensorgym.database import Database
from tensorgym.envs.registration import workload_of
from tensorgym.record import Record, Status
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.target import local_cpu


def synthetic_database(path: Path, env_id: str, records: int, seed: int = 0) -> None:
    """``records`` configs of ``env_id`` reached by random hop walks, with made-up throughputs (5 % failures)."""
    workload = workload_of(env_id)
    space = TilesSpace(workload, local_cpu())
    rng = np.random.default_rng(seed)
    centre = space.sample(rng)
    target_code = space.encode(space.sample(rng))
    seen = {}
    with Database(path) as db:
        db.register(workload, space.target)
        frontier = [centre]
        while len(seen) < records and frontier:
            config = frontier.pop(int(rng.integers(len(frontier))))
            if config in seen:
                continue
            failed = rng.random() < 0.05
            gflops = 100.0 * 0.7 ** float(np.abs(space.encode(config) - target_code).sum() * 4)
            latency = workload.flops / (gflops * 1e9)
            record = Record(workload.key, space.target.fingerprint, space.name, config,
                            Status.BUILD_ERROR if failed else Status.OK,
                            latency_s=None if failed else latency, latency_cv=0.01,
                            gflops=None if failed else gflops, wall_s=0.5, created=time.time())
            seen[config] = db.commit(record)
            if not failed:
                neighbours = space.neighbours(config, 1)
                frontier += [neighbours[i] for i in rng.permutation(len(neighbours))[:4]]


def raw_steps(env, steps: int, seed: int = 0) -> tuple[int, float]:
    """Masked random steps (resetting when truncated); returns (steps, seconds)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    base = env.unwrapped
    t0 = time.perf_counter()
    for _ in range(steps):
        allowed = np.flatnonzero(base.action_masks())
        _, _, terminated, truncated, _ = env.step(int(allowed[int(rng.integers(len(allowed)))]))
        if terminated or truncated:
            env.reset()
    return steps, time.perf_counter() - t0


def sb3_steps(db: str, env_id: str, algo: str, vec: str, n_envs: int, timesteps: int) -> tuple[int, float]:
    from tensorgym.agents.rl.train import make_model, make_training_env
    from tensorgym.agents.threads import torch_threads

    venv = make_training_env([env_id], db=db, backend="replay", n_envs=n_envs, vec=vec, seed=0)
    model = make_model(algo, venv, seed=0, verbose=0)
    t0 = time.perf_counter()
    with torch_threads(1):  # what `tensorgym train` uses
        model.learn(total_timesteps=timesteps)
    seconds = time.perf_counter() - t0
    venv.close()
    return timesteps, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", help="a dataset to replay (default: a synthetic one)")
    parser.add_argument("--env", default="Conv2d-ResNet-R5-v0")
    parser.add_argument("--records", type=int, default=2000, help="records of the synthetic database")
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--sb3", action="store_true", help="also time SB3 training on replay")
    parser.add_argument("--timesteps", type=int, default=20_000)
    parser.add_argument("--n-envs", type=int, default=4)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = str(Path(tmp) / "synthetic.db")
            t0 = time.perf_counter()
            synthetic_database(Path(db), args.env, args.records)
            print(f"synthetic database: {args.records} records of {args.env} in {time.perf_counter() - t0:.1f} s")
        for layout in ("layer", "common"):
            env = gym.make(args.env, db=db, backend="replay", observation=layout)
            t0 = time.perf_counter()
            env.reset(seed=0)
            print(f"[{layout}] first reset (builds the hop graph): {time.perf_counter() - t0:.2f} s, "
                  f"{len(env.unwrapped._graph)} records, {len(env.unwrapped._graph.starts)} start states")
            for name, handle in (("gym.make", env), ("unwrapped", env.unwrapped)):
                n, seconds = raw_steps(handle, args.steps)
                print(f"[{layout}] raw masked random steps ({name}): {n} in {seconds:.2f} s = {n / seconds:,.0f} "
                      f"steps/s")
            env.close()
        if args.sb3:
            for algo in ("maskable-ppo", "ppo", "dqn"):
                for vec in ("dummy", "subproc"):
                    n, seconds = sb3_steps(db, args.env, algo, vec, args.n_envs, args.timesteps)
                    print(f"SB3 {algo} on replay, {args.n_envs} envs ({vec}): {n} timesteps in {seconds:.1f} s = "
                          f"{n / seconds:,.0f} steps/s")


if __name__ == "__main__":
    main()
