"""Benchmark of the core: step costs of the tile-hop env, and the random agent on R5.

Prints:
1. median wall seconds per freshly measured env step (build + check + time) on
   ResNet-50 R5 and BERT M1, with the build / run split;
2. env steps per second on configs already in the database (replayed walk);
3. the best GFLOP/s the random agent finds on R5 in 64 measurements, next to
   PyTorch (oneDNN) on the same layer, timed in the same run;
4. how much re-measuring the same kernel moves its median (timing spread).

Run it on an otherwise idle machine: ``python bench/bench_measure.py``.

``--before-after`` measures instead what the cheaper trials save and whether
they time anything differently: the same seeded random configs of each layer (``--configs``, in the
random agent's batches of 16) are measured by two measurers in the same run, one with the savings
off (before: ``Measurer(savings=False)``) and one with them on (after: the early stop of far slower
kernels, one-call samples timed without time_evaluator's extra call), each with its own database
(so each has its own incumbent, as a fresh run of the random agent does), batch by batch, the order rotating; a third
measurer with the savings off (again) measures them too, in its own runner process, so that the
agreement of before with again is the noise that after's agreement with before is judged against. It
prints the mean and median seconds per fresh trial of each, the Spearman rank correlation of their
latencies, the median latency ratio over the kernels both timed in full, how many kernels each
timed short, and how far from the best the kernels stopped early were when timed before.
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
from report_header import emit, header
from tensorgym.agents import RandomAgent
from tensorgym.baselines import time_vendor, vendor_choices
from tensorgym.baselines.vendor import ratio_text
from tensorgym.database import Database
from tensorgym.evaluator import Evaluator
from tensorgym.measure import Measurer
from tensorgym.record import Record
from tensorgym.target import resolve_target
from tensorgym.tuner import ProgressBarCallback

BATCH = 16  # the random agent's batch: built in parallel, then timed one by one


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


def before_after(env_id: str, n: int, seed: int, tmp: str, measurers: dict[str, Measurer]) -> list[str]:
    """Measure the same ``n`` seeded random configs of ``env_id`` with each measurer (see the module docs)."""
    probe = gym.make(env_id, db=":memory:", measurer=measurers["after"])
    space = probe.unwrapped.search_space
    probe.close()
    configs = space.sample_many(np.random.default_rng(seed), n)
    evaluators = {mode: Evaluator(space, Database(Path(tmp) / f"{env_id}-{mode}.db"), measurer)
                  for mode, measurer in measurers.items()}
    wall = {mode: 0.0 for mode in measurers}
    records: dict[str, list[Record]] = {mode: [] for mode in measurers}
    modes = list(measurers)
    for i in range(0, n, BATCH):
        k = (i // BATCH) % len(modes)
        for mode in modes[k:] + modes[:k]:  # each batch starts with the next mode: none always goes first
            t0 = time.perf_counter()
            records[mode] += evaluators[mode].evaluate(configs[i:i + BATCH])
            wall[mode] += time.perf_counter() - t0
    for evaluator in evaluators.values():
        evaluator.database.close()
    return compare_modes(env_id, records, wall)


def agreement(before: list[Record], other: list[Record]) -> str:
    """How well ``other``'s latencies agree with ``before``'s, config by config: rank correlation over every kernel
    correct in both, and over those both timed in full, with the median latency ratio of the latter."""
    from scipy.stats import spearmanr

    both = [(b, a) for b, a in zip(before, other) if b.ok and a.ok]
    full = [(b, a) for b, a in both if not b.short and not a.short]
    if len(full) < 3:
        return "too few kernels timed in full by both"
    rho_all = spearmanr([b.latency_s for b, _ in both], [a.latency_s for _, a in both]).statistic
    rho = spearmanr([b.latency_s for b, _ in full], [a.latency_s for _, a in full]).statistic
    ratios = [a.latency_s / b.latency_s for b, a in full]
    q1, q3 = np.percentile(ratios, [25, 75])
    return (f"Spearman {rho_all:.3f} over all {len(both)} kernels ok in both, {rho:.3f} over the {len(full)} timed in "
            f"full by both; their median latency ratio {statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f})")


def compare_modes(env_id: str, records: dict[str, list[Record]], wall: dict[str, float]) -> list[str]:
    """The lines of one layer, from each mode's records of the same configs in the same order."""
    before, after = records["before"], records["after"]
    n = len(before)
    lines = [f"{env_id}: {n} seeded random configs, batches of {BATCH}, the modes interleaved"]
    for mode, got in records.items():
        per_trial = [r.wall_s for r in got]
        lines.append(f"  {mode:6s}: mean {wall[mode] / n:.3f} s per fresh trial, median "
                     f"{statistics.median(per_trial):.3f} s (record wall), {sum(r.ok for r in got)} ok, "
                     f"{sum(r.ok and r.short for r in got)} timed short")
    lines.append(f"  saving: {wall['before'] / n:.3f} -> {wall['after'] / n:.3f} s per trial "
                 f"({(1 - wall['after'] / wall['before']) * 100:.0f} % less)")
    changed = [(b.status.value, a.status.value) for b, a in zip(before, after) if b.status != a.status]
    lines.append(f"  statuses that differ after/before: {len(changed)}" + (f" {changed}" if changed else ""))
    lines.append(f"  after vs before: {agreement(before, after)}")
    if "again" in records:  # the noise: the same protocol as before, in another runner process
        lines.append(f"  again vs before (the noise): {agreement(before, records['again'])}")
    # The kernels timed short after (stopped early, or confirmed by a sample) against what before said of them.
    best = min((b.latency_s for b in before if b.ok and not b.short), default=None)
    shorts = [(b, a) for b, a in zip(before, after) if b.ok and a.ok and a.short]
    if shorts and best:
        nearest = min(b.latency_s for b, _ in shorts) / best
        within = sum(b.latency_s < 2 * best for b, _ in shorts)
        ratio = statistics.median(a.latency_s / b.latency_s for b, a in shorts)
        # Stopped after the checked call: no sample followed it, so the run took about one call (a confirmed short
        # took the checked call and a sample of at least as long).
        stopped = sum(len(a.samples) == 1 and a.number == 1 and a.run_s < 1.5 * a.latency_s for _, a in shorts)
        lines.append(f"  {len(shorts)} kernels short after ({stopped} stopped after the checked call; before: "
                     f"{sum(b.short for b, _ in shorts)} of them short); the nearest was {nearest:.1f}x the best "
                     f"before timed it ({best * 1e3:.3f} ms); within 2x of the best: {within}; their median latency "
                     f"ratio after/before: {ratio:.3f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40, help="env steps per workload (default 40)")
    parser.add_argument("--replays", type=int, default=50, help="times the walk is replayed from the DB")
    parser.add_argument("--budget", type=int, default=64, help="random-agent measurements on R5 (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--envs", default="Conv2d-ResNet-R5-v0,Matmul-BERT-M1-v0")
    parser.add_argument("--before-after", action="store_true",
                        help="measure the same configs with the savings off and on (default envs: R5 and M3)")
    parser.add_argument("--configs", type=int, default=64, help="seeded random configs per layer (--before-after)")
    parser.add_argument("--out", help="also write the --before-after report to this file")
    args = parser.parse_args()
    if args.before_after:
        envs = args.envs if args.envs != parser.get_default("envs") else "Conv2d-ResNet-R5-v0,Matmul-BERT-M3-v0"
        target = resolve_target(None)
        lines = header("Cheaper trials before and after: the same configs measured both ways",
                       target)
        with (tempfile.TemporaryDirectory() as tmp, Measurer(savings=False) as off, Measurer() as on,
              Measurer(savings=False) as again):
            for env_id in envs.split(","):
                modes = {"before": off, "after": on, "again": again}
                lines += before_after(env_id, args.configs, args.seed, tmp, modes)
                print("\n".join(lines[-10:]), flush=True)
        emit("\n".join(lines) + "\n", args.out)
        return
    with tempfile.TemporaryDirectory() as tmp, Measurer() as measurer:
        db = str(Path(tmp) / "bench.db")
        for env_id in args.envs.split(","):
            bench_steps(env_id, args.steps, db, measurer, args.replays)
        bench_random_agent(args.budget, str(Path(tmp) / "agent.db"), measurer, args.seed)


if __name__ == "__main__":
    main()
