"""Search agents on the ``tiles`` space: best GFLOP/s after N measurements and after T seconds.

Runs every agent on every env for every seed with the same trial budget, on
this machine, sharing one measurer, and prints for each (env, agent) the best
GFLOP/s at 16/32/64/128 trials and at 60/120 s of tuning clock (mean and
min-max over seeds), the final best, and how many trials it took to reach
95 % of each run's final best.

Agents are names, optionally with a feature set: ``random``, ``ga`` (Ansor,
generic features), ``ga:af`` (Ansor-AF), ``dgd`` (Ansor-AF-DS, analytical
features), ``dgd:generic`` (Ansor-DS).

Defaults are the issue's benchmark (R5, budget 128, 3 seeds), which takes
tens of minutes on 2 cores; smoke-test with ``--budget 16 --seeds 1``::

    python bench/bench_agents_tiles.py --envs Conv2d-ResNet-R5-v0 --agents random,ga,dgd --budget 16 --seeds 1

Each run measures into a fresh temporary database unless ``--db`` is given
(a shared database lets later runs replay earlier measurements: same
numbers, fewer compilations).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def make_agent(spec: str):
    from tensorgym.agents.dgd import DGDAgent
    from tensorgym.agents.ga import GAAgent
    from tensorgym.agents.random_search import RandomAgent

    name, _, features = spec.partition(":")
    if name == "random":
        if features:
            raise SystemExit("error: the random agent has no features")
        return RandomAgent()
    if name == "ga":
        return GAAgent(features or "generic")
    if name == "dgd":
        return DGDAgent(features or "af")
    raise SystemExit(f"error: unknown agent {spec!r}; use random, ga, ga:af, dgd, dgd:generic")


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{np.mean(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="Conv2d-ResNet-R5-v0", help="comma-separated env ids")
    parser.add_argument("--agents", default="random,ga,dgd", help="comma-separated agent specs")
    parser.add_argument("--budget", type=int, default=128, help="trials per run")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds of tuning clock per run")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    parser.add_argument("--checkpoints", default="16,32,64,128", help="trial counts to report")
    parser.add_argument("--seconds", default="60,120", help="tuning-clock seconds to report")
    parser.add_argument("--db", default=None, help="database file (default: a fresh one per run)")
    parser.add_argument("--json", default=None, help="write every TuningResult to this JSON file")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    import gymnasium as gym

    import tensorgym  # noqa: F401  (registers the env ids)
    from tensorgym.measure import Measurer

    envs = [e for e in args.envs.split(",") if e]
    specs = [a for a in args.agents.split(",") if a]
    checkpoints = [int(c) for c in args.checkpoints.split(",") if c]
    seconds = [float(s) for s in args.seconds.split(",") if s]
    for spec in specs:
        make_agent(spec)  # fail early on a bad spec
    results = []
    with Measurer() as measurer, tempfile.TemporaryDirectory(prefix="tensorgym-bench-") as tmp:
        for env_id in envs:
            for spec in specs:
                for seed in range(args.seeds):
                    db = args.db or str(Path(tmp) / f"{env_id}-{spec.replace(':', '_')}-{seed}.db")
                    env = gym.make(env_id, db=db, measurer=measurer)
                    try:
                        t0 = time.monotonic()
                        result = make_agent(spec).tune(env, budget=args.budget, time_budget=args.time_budget,
                                                       seed=seed, progress=args.progress)
                        wall = time.monotonic() - t0
                    finally:
                        env.close()
                    results.append((env_id, spec, seed, result))
                    print(f"{env_id} {spec} seed {seed}: best {result.best_gflops:.1f} GFLOP/s after "
                          f"{len(result.trials)} trials, {wall:.0f} s wall ({result.measured} measured)",
                          file=sys.stderr, flush=True)

    header = ["env", "agent"] + [f"@{c}" for c in checkpoints] + [f"@{s:g}s" for s in seconds] + \
             ["final", "trials to 95%"]
    rows = []
    for env_id in envs:
        for spec in specs:
            runs = [r for e, s, _, r in results if e == env_id and s == spec]
            row = [env_id, spec]
            row += [summary([r.best_at(trials=c) for r in runs]) for c in checkpoints]
            row += [summary([r.best_at(seconds=s) for r in runs]) for s in seconds]
            row.append(summary([r.best_gflops for r in runs]))
            reach = [r.trials_to_reach(0.95) for r in runs]
            row.append(summary([float(x) for x in reach if x is not None]))
            rows.append(row)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    print("\nGFLOP/s: mean (min-max) over seeds; @N = best after N trials, @Ts = after T s of tuning clock.")
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"env": e, "agent": s, "seed": seed, "result": r.to_json()} for e, s, seed, r in results], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
