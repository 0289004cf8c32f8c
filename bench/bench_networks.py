"""Benchmark of the networks issue: task schedulers on ResNet-18 under one budget, against PyTorch.

Runs round-robin, gradient (Ansor's), dual-task (GTA's) and MetaSchedule's own
network tuner (``ms.tune_tasks`` with its gradient task scheduler) on the
live layers of ResNet-18 with the same budget, 64 trials x the 11 layers
that occur in the model (704), in one process, into one database; times
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
from pathlib import Path

from tensorgym.baselines.network_board import REFERENCE
from tensorgym.baselines.network_compare import compare_network
from tensorgym.baselines.network_render import caption, text_table
from tensorgym.cli.args import float_list, int_list, seed_list
from tensorgym.network_tuning import default_measure_per_round
from tensorgym.networks import resolve_network

SCHEDULERS = ("round-robin", "gradient", "dual-task", "metaschedule")
TRIALS_PER_TASK = 64
TARGET_SHARE_OF_RR = 60.0  # dual-task reaches round-robin's final latency within 60 % of its trials
TARGET_OVER_PYTORCH = 1.2  # the final estimate is >= 1.2x faster than PyTorch's weighted sum
SEED_002_CLAIMS = {"over Ansor": 1.49, "over PyTorch": 2.76}  # GTA on an AVX-512 CPU (Ryzen 7 7840H)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", default="ResNet-18", help="a built-in network or a JSON/TOML file")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS), help="comma-separated schedulers")
    parser.add_argument("--space", default="tiles", help="search space of the layers (tiles; mapping with #10)")
    parser.add_argument("--dtype", default=None, help="data type of the layers (default float32; int8 for mapping)")
    parser.add_argument("--budget", type=int, default=None,
                        help=f"trials per run (default: {TRIALS_PER_TASK} x the layers that occur)")
    parser.add_argument("--seeds", type=seed_list, default=3, help="number of seeds or a list 0,1,2 (default: 3)")
    parser.add_argument("--measure-per-round", type=int, default=None,
                        help="trials per round (default: Ansor's min(64, budget // layers); at a budget of 64 per "
                             "layer that is one round per layer, and every scheduler does the same)")
    parser.add_argument("--trial-points", type=int_list, default=None)
    parser.add_argument("--time-points", type=float_list, default=None)
    parser.add_argument("--db", default="bench-networks.db", help="database shared by all runs")
    parser.add_argument("--out", default="bench-networks", help="output directory (tables, results, plot)")
    parser.add_argument("--no-vendor", action="store_true")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    network = resolve_network(args.network)
    budget = args.budget or TRIALS_PER_TASK * len(network.live_tasks)
    per_round = args.measure_per_round or default_measure_per_round(budget, len(network.live_tasks))
    t0 = time.monotonic()
    board = compare_network(network, args.schedulers, budget=budget, seeds=args.seeds, db=args.db, space=args.space,
                            dtype=args.dtype, out_dir=args.out, trial_points=args.trial_points,
                            time_points=args.time_points, vendor=not args.no_vendor, progress=not args.quiet,
                            measure_per_round=args.measure_per_round)
    wall = time.monotonic() - t0

    print(f"\n== {board.network}: {', '.join(board.schedulers)}; {args.space} space"
          f"{f' ({args.dtype})' if args.dtype else ''}; budget {budget}; {per_round} trials per round; "
          f"seeds {board.seeds} ({wall / 60:.1f} min) ==\n")
    if budget // per_round <= len(network.live_tasks):
        print(f"note: {budget} trials in rounds of {per_round} is at most one round per layer: every scheduler "
              f"spends the budget on its warm-up round (use --measure-per-round)\n")
    print(text_table(board))
    print(f"\n{caption(board)} metaschedule: its timeline is MetaSchedule's own timing; its final, each layer's "
          f"best schedules re-timed by tensorgym.")
    vendor = board.vendor.estimate_s if board.vendor is not None else None
    if vendor:
        print(f"\nPyTorch's weighted sum over the same layers ({board.vendor.library}): {vendor * 1e3:.3f} ms")
    for name in board.schedulers:
        stats = board.stats(name)
        final = stats["final"]
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
    finals = {name: board.stats(name)["final"].mean for name in ("dual-task", "gradient") if name in board.schedulers}
    if finals.get("dual-task") and finals.get("gradient"):
        over_ansor = finals["gradient"] / finals["dual-task"]
        over_torch = vendor / (finals["dual-task"] / 1e3) if vendor else None
        print(f"\ndual-task vs seed 002's claims (AVX-512 CPU, mapping space + scheduler): "
              f"{over_ansor:.2f}x over the gradient scheduler (claim {SEED_002_CLAIMS['over Ansor']}x over Ansor)"
              + (f", {over_torch:.2f}x over PyTorch (claim {SEED_002_CLAIMS['over PyTorch']}x)" if over_torch else ""))
    for error in board.errors:
        print(f"FAILED: {error['scheduler']} (seed {error['seed']}): {error['error'].splitlines()[0]}")
    print(f"\nfiles: {Path(args.out).resolve()} (compare_network.csv/json/md/png, results/); database {args.db}")
    return 1 if board.errors else 0


if __name__ == "__main__":
    sys.exit(main())
