"""Landscape env throughput: raw env steps per second of the tile-hop env on a shipped landscape.

The landscape backend answers every step from tables built once per landscape (the hop table in
the env's actions, the masks, each config's static observation) and per seed of the draws (each
config's throughput): a step is list lookups, one small array copy and an info dict. The issue
asks for at least 100,000 raw steps/s (``env.unwrapped.step``). Measured here, per observation
layout, on one layer (default R5):

* ``raw, random actions``: ``env.unwrapped.step`` with uniformly random Python ints (most are masked
  moves on a bounded space, which cost as much as allowed ones: the info dict dominates);
* ``raw, allowed actions``: ``env.unwrapped.step`` with NumPy integers (what SB3 passes), every one
  allowed (a walk recorded once with the same seed, then replayed: only the steps are timed);
* ``gym.make``: the same random actions through ``gym.make``'s wrappers (``TimeLimit``,
  ``OrderEnforcing``, ``PassiveEnvChecker``), resetting when an episode is truncated (64 steps);
* ``make_vec sync x4``: env steps per second of ``gym.make_vec(..., vectorization_mode="sync")``.

It also times ``gym.make`` (the first builds the walk; the next finds it built) and ``reset(seed=...)``
(which draws every config's latency again).

    flock /tmp/tensorgym-cpu.lock python bench/bench_landscape_env.py --out bench/reports/landscapes/env_steps.txt
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import tensorgym  # noqa: F401  (registers the ids)
from tensorgym.target import resolve_target


def rate(steps: int, seconds: float) -> str:
    return f"{steps:,} in {seconds:.2f} s = {steps / seconds:,.0f} steps/s"


def bench_layout(env_id: str, landscape: str | None, observation: str, steps: int, lines: list[str]) -> None:
    options = {"backend": "landscape", "observation": observation}
    if landscape:
        options["landscape"] = landscape
    t0 = time.perf_counter()
    env = gym.make(env_id, **options)
    first_make = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = gym.make(env_id, **options)
    second_make = time.perf_counter() - t0
    again.close()
    base = env.unwrapped
    t0 = time.perf_counter()
    for seed in range(10):
        base.reset(seed=seed)
    reset_s = (time.perf_counter() - t0) / 10
    lines.append(f"[{observation}] {base.landscape!r}, {base.action_space.n} actions, observation "
                 f"{base.observation_space.shape[0]} floats")
    lines.append(f"[{observation}] gym.make: first {first_make:.2f} s (builds the walk), next {second_make * 1e3:.0f} "
                 f"ms; reset(seed=...): {reset_s * 1e3:.1f} ms (draws every config again)")

    rng = np.random.default_rng(0)
    actions = rng.integers(0, base.action_space.n, steps).tolist()
    base.max_steps = float("inf")  # the unwrapped env without a step limit: one long walk
    base.reset(seed=0)
    masked = 0
    t0 = time.perf_counter()
    for action in actions:
        _, _, _, _, info = base.step(action)
    raw = time.perf_counter() - t0
    base.reset(seed=0)
    for action in actions[:10_000]:
        masked += base.step(action)[4]["status"] == "masked"
    lines.append(f"[{observation}] raw, random actions (unwrapped; {masked / 100:.0f} % masked): {rate(steps, raw)}")

    # A walk of allowed actions, recorded once, then replayed from the same seed: the same states, so every
    # action is allowed again; only the steps are timed.
    obs, info = base.reset(seed=1)
    walk = []
    for _ in range(steps):
        action = np.int64(rng.choice(np.flatnonzero(info["action_mask"])))
        walk.append(action)
        info = base.step(action)[4]
    base.reset(seed=1)
    t0 = time.perf_counter()
    for action in walk:
        base.step(action)
    allowed = time.perf_counter() - t0
    lines.append(f"[{observation}] raw, allowed actions (unwrapped, NumPy ints): {rate(steps, allowed)}")

    env.reset(seed=0)
    t0 = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    wrapped = time.perf_counter() - t0
    lines.append(f"[{observation}] gym.make's wrappers, random actions, reset every 64 steps: {rate(steps, wrapped)}")
    env.close()

    n_envs = 4
    vec = gym.make_vec(env_id, num_envs=n_envs, vectorization_mode="sync", **options)
    vec.reset(seed=0)
    batches = np.asarray(actions[: (steps // n_envs) * n_envs]).reshape(-1, n_envs)
    t0 = time.perf_counter()
    for batch in batches:
        vec.step(batch)
    vectorised = time.perf_counter() - t0
    lines.append(f"[{observation}] make_vec sync x{n_envs}, random actions: {rate(batches.size, vectorised)} "
                 f"(env steps)")
    vec.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Conv2d-ResNet-R5-v0", help="the layer (default: R5)")
    parser.add_argument("--landscape", default=None,
                        help="the CPU folder of the landscape (default: this machine's CPU)")
    parser.add_argument("--steps", type=int, default=200_000, help="steps per measurement (default: 200000)")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    target = resolve_target(None)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parent).stdout.strip()
    lines = ["# Landscape env throughput: raw env steps/s of the tile-hop env on a landscape (target >= 100,000)",
             f"command: python {' '.join(['bench/bench_landscape_env.py', *sys.argv[1:]])}",
             f"commit: {commit}{' (with uncommitted changes)' if dirty else ''}; CPU: {target.label} "
             f"({platform.machine()}); Python {platform.python_version()}, NumPy {np.__version__}, "
             f"Gymnasium {gym.__version__}",
             f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", ""]
    for observation in ("layer", "common"):
        bench_layout(args.env, args.landscape, observation, args.steps, lines)
        print("\n".join(lines[-7:]), flush=True)
    report = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(report)
    else:
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
