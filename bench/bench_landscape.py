"""Landscape backend throughput: records/s of ``LandscapeEvaluator.evaluate`` on a synthetic landscape.

The landscape backend is meant to make agent comparisons with 20 seeds cheap, so its evaluator must
cost next to nothing beside the agents and the env (the issue's target: at least 100,000 raw env
steps/s). This measures the evaluator alone, on a synthetic landscape of about 5,000 configs (the
benchmark space of BERT M3 on a constructed Zen 4, with made-up records: the cost does not depend
on the values), for batches of 1 (an env step) and of 64 (an agent's batch), with both clocks,
plus the time to load the file and to draw a new seed.

    python bench/bench_landscape.py [--configs 5000] [--seconds 2]

Prints one line per measurement. Not a test: it times nothing that a test asserts.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from tensorgym.database import Database
from tensorgym.landscape import Landscape, LandscapeEvaluator, export_landscape
from tensorgym.record import Record, Status
from tensorgym.spaces.tiles.benchmark import benchmark_space
from tensorgym.suites import all_suite_workloads
from tensorgym.target import constructed_cpu


def synthetic_landscape(max_configs: int, seed: int = 0) -> Landscape:
    """The benchmark space of BERT M3 (at most ``max_configs`` configs) with made-up records (5 % failed)."""
    space = benchmark_space(all_suite_workloads()["Matmul-BERT-M3-v0"], constructed_cpu("znver4"),
                            max_configs=max_configs)
    rng = np.random.default_rng(seed)
    wl = space.workload
    with Database(":memory:") as db:
        db.register(wl, space.target)
        for config in space.configs():
            build_s = float(0.2 + 0.5 * rng.random())
            if rng.random() < 0.05:
                db.commit(Record(wl.key, space.target.fingerprint, space.name, config, Status.BUILD_ERROR,
                                 build_s=build_s, wall_s=build_s / 2, error="synthetic", created=time.time()))
                continue
            samples = tuple(float(s) for s in 1e-3 * (1 + rng.random()) * (1 + 0.03 * rng.standard_normal(8)))
            median = float(np.median(samples))
            db.commit(Record(wl.key, space.target.fingerprint, space.name, config, Status.OK, latency_s=median,
                             latency_cv=0.03, samples=samples, number=10, gflops=wl.gflops(median), build_s=build_s,
                             run_s=0.3, wall_s=build_s / 2 + 0.3, created=time.time()))
        return export_landscape(db, space, llvm_version="synthetic")


def rate(evaluator: LandscapeEvaluator, batch: int, seconds: float, rng: np.random.Generator) -> float:
    """Records per second of ``evaluate`` on random batches of ``batch`` configs for about ``seconds``."""
    configs = evaluator.configs
    picks = rng.integers(len(configs), size=(4096, batch))
    batches = [[configs[i] for i in row] for row in picks]
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for configs_of_batch in batches[:256]:
            evaluator.evaluate(configs_of_batch)
        done += 256 * batch
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=5000, help="size of the synthetic landscape (at most)")
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    args = parser.parse_args()

    t0 = time.perf_counter()
    land = synthetic_landscape(args.configs)
    built_s = time.perf_counter() - t0
    print(f"synthetic landscape: {len(land)} configs of {land.workload_label} built in {built_s:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        path = land.save(Path(tmp) / "M3-tiles.json.gz")
        t0 = time.perf_counter()
        Landscape.load(path)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        evaluator = LandscapeEvaluator(path, seed=0)
        open_s = time.perf_counter() - t0
        print(f"file {path.stat().st_size / 1024:.0f} KiB; load {load_s * 1e3:.0f} ms; evaluator from the file "
              f"{open_s * 1e3:.0f} ms")
    t0 = time.perf_counter()
    for seed in range(20):
        evaluator.seed(seed)
    print(f"seed (a new draw of every config): {(time.perf_counter() - t0) / 20 * 1e3:.2f} ms")
    rng = np.random.default_rng(0)
    for clock in ("batch", "recorded"):
        evaluator = LandscapeEvaluator(land, seed=0, clock=clock)
        for batch in (1, 64):
            print(f"evaluate, clock={clock:8s} batch {batch:3d}: {rate(evaluator, batch, args.seconds, rng):,.0f} "
                  f"records/s")
    evaluator = LandscapeEvaluator(land, seed=0)
    configs = evaluator.configs
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < args.seconds:
        for config in configs:
            evaluator.lookup(config)
        n += len(configs)
    print(f"lookup: {n / (time.perf_counter() - t0):,.0f} records/s")


if __name__ == "__main__":
    main()
