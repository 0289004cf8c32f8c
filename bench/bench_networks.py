"""Benchmark of the networks issue: task schedulers on ResNet-18 under one budget, against PyTorch.

Runs round-robin, gradient (Ansor's), dual-task (GTA's) and MetaSchedule's own
network tuner (``ms.tune_tasks`` with its gradient task scheduler) on the
live layers of ResNet-18 with the same budget, 64 trials x the 11 layers
that occur in the model (704), in one process, into one database, through
``compare`` (a network's comparison is a layer's: one board, one table); times
PyTorch's weighted sum over the same layers (oneDNN, the faster of NCHW and
channels-last per layer); and prints the table of ``compare-network`` and,
per scheduler:

* the final estimated network latency and its ratio to PyTorch's weighted
  sum (target: >= 1.2x faster);
* the trials it needs to reach round-robin's final latency (same seed), as a
  share of round-robin's trials (target for dual-task: <= 60 %);
* dual-task against the gradient scheduler (Ansor's), beside seed 002's
  claims on an AVX-512 CPU: 1.49x over Ansor and 2.76x over PyTorch (its
  claims come from the mapping space as well as the scheduler).

The tasks' search space is a flag: ``--space tiles`` (fp32, default) or, with
the mapping space, ``--space mapping --dtype int8``. At 64 trials per layer,
Ansor's round size (``min(64, budget // layers)``) gives each layer exactly one
round, which every scheduler spends on its warm-up: the schedulers only differ
with smaller rounds, hence ``--measure-per-round 16``. The full run (hours)::

    python bench/bench_networks.py --measure-per-round 16 --out bench-networks --db bench-networks.db

and in the mapping space::

    python bench/bench_networks.py --space mapping --dtype int8 --measure-per-round 16 \\
        --out bench-networks-int8 --db bench-networks-int8.db

A smoke run (minutes)::

    python bench/bench_networks.py --network /path/to/tiny.json --budget 24 --seeds 1 \\
        --schedulers round-robin,dual-task --out /tmp/networks-smoke --db /tmp/networks-smoke.db

Re-running with the same ``--out`` and ``--db`` resumes.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from tensorgym.baselines.board import REFERENCE, Stat
from tensorgym.baselines.compare import compare
from tensorgym.cli.args import add_board_arguments, add_run_arguments
from tensorgym.cli.compare import report
from tensorgym.networks import resolve_network
from tensorgym.tuner import default_measure_per_round

SCHEDULERS = ("round-robin", "gradient", "dual-task", "metaschedule")
TRIALS_PER_TASK = 64
TARGET_SHARE_OF_RR = 60.0  # dual-task reaches round-robin's final latency within 60 % of its trials
TARGET_OVER_PYTORCH = 1.2  # the final estimate is >= 1.2x faster than PyTorch's weighted sum
SEED_002_CLAIMS = {"over Ansor": 1.49, "over PyTorch": 2.76}  # GTA on an AVX-512 CPU (Ryzen 7 7840H)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", default="ResNet-18", help="a built-in network or a JSON/TOML file")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS), help="comma-separated schedulers")
    parser.add_argument("--space", default="tiles", help="search space of the layers (tiles or mapping)")
    parser.add_argument("--dtype", default=None, help="data type of the layers (default float32; int8 for mapping)")
    parser.add_argument("--budget", type=int, default=None,
                        help=f"trials per run (default: {TRIALS_PER_TASK} x the layers that occur)")
    parser.add_argument("--measure-per-round", type=int, default=None,
                        help="trials per round (default: Ansor's min(64, budget // layers); at a budget of 64 per "
                             "layer that is one round per layer, and every scheduler does the same)")
    add_board_arguments(parser, "bench-networks", None, None)
    add_run_arguments(parser, "bench-networks.db")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    network = resolve_network(args.network)
    budget = args.budget or TRIALS_PER_TASK * len(network.live_tasks)
    per_round = args.measure_per_round or default_measure_per_round(budget, len(network.live_tasks))
    t0 = time.monotonic()
    board = compare([network], args.schedulers, budget=budget, seeds=args.seeds, db=args.db, space=args.space,
                    dtype=args.dtype, out_dir=args.out, trial_points=args.trial_points, time_points=args.time_points,
                    vendor=not args.no_vendor, progress=not args.quiet, measure_per_round=args.measure_per_round)
    wall = time.monotonic() - t0
    env_id = board.env_ids[0]

    print(f"\n== {network.name}: {', '.join(board.agents)}; {args.space} space"
          f"{f' ({args.dtype})' if args.dtype else ''}; budget {budget}; {per_round} trials per round; "
          f"seeds {board.seeds} ({wall / 60:.1f} min); database {args.db} ==")
    if budget // per_round <= len(network.live_tasks):
        print(f"note: {budget} trials in rounds of {per_round} is at most one round per layer: every scheduler "
              f"spends the budget on its warm-up round (use --measure-per-round)")
    status = report(board, args.out)
    print("metaschedule: its timeline is MetaSchedule's own timing; its final, each layer's best schedules re-timed "
          "by tensorgym.")
    reference = next((ref for ref in board.vendor.get(env_id, []) if ref.get("latency_s")), None)
    vendor = reference["latency_s"] if reference is not None else None
    if vendor:
        print(f"\n{reference['library']} over the same layers: {vendor * 1e3:.3f} ms")
    finals = {}
    for name in board.agents:
        stats = board.stats(env_id, name)
        final = Stat(tuple(r.best_latency_s * 1e3 if r.best_latency_s else None
                           for r in board.results.get((env_id, name), [])))
        finals[name] = final.mean
        if final.mean is None:
            print(f"  {name:13s} no result")
            continue
        line = f"  {name:13s} final {final.format(3)} ms"
        if vendor:
            line += f"; {vendor / (final.mean / 1e3):.2f}x PyTorch (target >= {TARGET_OVER_PYTORCH}x)"
        if "%RR" in stats and name != REFERENCE:
            line += f"; reaches round-robin's final in {stats['%RR'].format(0)} % of its trials"
            if name == "dual-task":
                line += f" (target <= {TARGET_SHARE_OF_RR:.0f} %)"
        print(line)
    if finals.get("dual-task") and finals.get("gradient"):
        over_ansor = finals["gradient"] / finals["dual-task"]
        over_torch = vendor / (finals["dual-task"] / 1e3) if vendor else None
        print(f"\ndual-task vs seed 002's claims (AVX-512 CPU, mapping space + scheduler): "
              f"{over_ansor:.2f}x over the gradient scheduler (claim {SEED_002_CLAIMS['over Ansor']}x over Ansor)"
              + (f", {over_torch:.2f}x over PyTorch (claim {SEED_002_CLAIMS['over PyTorch']}x)" if over_torch else ""))
    return status


if __name__ == "__main__":
    sys.exit(main())
