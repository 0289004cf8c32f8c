"""Benchmark of the core (issue 2): step costs of the tile-hop env, and the random agent on R5.

Prints:
1. median wall seconds per freshly measured env step (build + check + time) on
   ResNet-50 R5 and BERT M1, with the build / run split;
2. env steps per second on configs already in the database (replayed walk);
3. the best GFLOP/s the random agent finds on R5 in 64 measurements, next to
   PyTorch (oneDNN) on the same layer, timed in the same run;
4. how much re-measuring the same kernel moves its median (timing spread).

Run it on an otherwise idle machine: ``python bench/bench_measure.py``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import tensorgym  # noqa: F401
from tensorgym.agents import RandomAgent
from tensorgym.baselines import time_vendor, vendor_choices
from tensorgym.baselines.vendor import ratio_text
from tensorgym.measure import Measurer
from tensorgym.tuner import ProgressBarCallback


def walk(env, steps: int, seed: int) -> tuple[list[int], list[tuple[float, bool]]]:
    """A seeded random walk over allowed actions; returns the actions and (seconds, fresh) per step."""
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    actions, costs = [], []
    evaluator = env.unwrapped.evaluator
    for _ in range(steps):
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        before = evaluator.measured
        t0 = time.perf_counter()
        _, _, _, _, info = env.step(action)
        costs.append((time.perf_counter() - t0, evaluator.measured > before))
        actions.append(action)
    return actions, costs


def bench_steps(env_id: str, steps: int, db: str, measurer: Measurer, replays: int) -> None:
    env = gym.make(env_id, db=db, measurer=measurer, max_steps=10 ** 6)
    actions, costs = walk(env, steps, seed=0)
    fresh = [s for s, is_fresh in costs if is_fresh]
    records = env.unwrapped.database.records(env.unwrapped.workload.key)
    builds = [r.build_s for r in records]
    runs = [r.run_s for r in records]
    print(f"{env_id}: {len(fresh)} fresh steps of {steps}: median {statistics.median(fresh):.3f} s/step "
          f"(p90 {np.percentile(fresh, 90):.3f}); per record median build {statistics.median(builds):.3f} s, "
          f"run (check + timing) {statistics.median(runs):.3f} s")

    # Replay: the same seeded walk again, every config now answered from the database.
    t0 = time.perf_counter()
    n = 0
    for _ in range(replays):
        _, info = env.reset(seed=0)
        for action in actions:
            env.step(action)
            n += 1
    elapsed = time.perf_counter() - t0
    print(f"{env_id}: {n / elapsed:,.0f} cached steps/s ({n} steps replayed from the database)")
    env.close()


def bench_random_agent(budget: int, db: str, measurer: Measurer, seed: int) -> None:
    env = gym.make("Conv2d-ResNet-R5-v0", db=db, measurer=measurer)
    result = RandomAgent().tune(env, budget=budget, seed=seed, callback=ProgressBarCallback())
    env.close()
    workload = env.unwrapped.workload
    vendor = [time_vendor(workload, library, layout, native_blas=True)
              for library, layout in vendor_choices(workload)]
    print(f"random agent on R5, {budget} measurements (seed {seed}): best {result.best_gflops:.1f} GFLOP/s "
          f"({result.best_latency_s * 1e3:.3f} ms, cv {result.best_latency_cv * 100:.1f} %), "
          f"tuning clock {result.trials[-1].elapsed_s:.1f} s")
    for v in vendor:
        print(f"  {v.library} {v.layout}: {v.gflops:.1f} GFLOP/s ({v.latency_s * 1e3:.3f} ms, "
              f"cv {v.latency_cv * 100:.1f} %) -> tensorgym: {ratio_text(result.best_gflops, v) or '-'}")

    # Timing spread: re-measure the best kernel a few times (no check; fresh runs of the same binary).
    space = env.unwrapped.search_space
    medians = [measurer.measure(space, [result.best_config], check=False)[0].gflops for _ in range(5)]
    print(f"  re-measuring the best kernel 5 times: {min(medians):.1f}-{max(medians):.1f} GFLOP/s "
          f"(spread {(max(medians) - min(medians)) / max(medians) * 100:.1f} %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40, help="env steps per workload (default 40)")
    parser.add_argument("--replays", type=int, default=50, help="times the walk is replayed from the DB")
    parser.add_argument("--budget", type=int, default=64, help="random-agent measurements on R5 (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--envs", default="Conv2d-ResNet-R5-v0,Matmul-BERT-M1-v0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Measurer() as measurer:
        db = str(Path(tmp) / "bench.db")
        for env_id in args.envs.split(","):
            bench_steps(env_id, args.steps, db, measurer, args.replays)
        bench_random_agent(args.budget, str(Path(tmp) / "agent.db"), measurer, args.seed)


if __name__ == "__main__":
    main()
