"""Benchmark of learned search: random, GA, DGD, Optuna and the two random-model ablations, with statistics.

Runs ``compare`` per layer (``--envs``) with every agent at ``--budget``
measurements (512 by default) and ``--seeds`` seeds (5), one run at a time,
into one database, then reads every result back and reports
(:mod:`tensorgym.baselines.learning`):

* the best GFLOP/s after 128 and 512 measurements and after 1-5 minutes of
  tuning clock, mean and 95 % interval over seeds, and the final best
  re-timed at the end; each agent against random (ratio of means with a
  bootstrap interval, Welch's p) and against its ablation (``ga`` vs
  ``ga-random-model``, ``dgd`` vs ``dgd-random-model``: what the model adds);
* the trials each run needs to reach random@512's mean best;
* seed 000's headline: DGD after 2 minutes of tuning clock against GA after
  512 measurements;
* the targets (GA and DGD above random at 512 with non-overlapping 95 %
  intervals on >= 2 layers; DGD@2min >= 0.95 x GA@512).

The @128 columns read the first 128 trials of the 512-trial runs: every
agent here makes the same first ``k`` trials whatever its budget (random,
GA and DGD by construction; Optuna's TPE does not look at the budget), so
one run per seed serves both budgets.

**Long.** 6 agents x 5 seeds x 512 measurements per layer: about 2-3 hours
per layer on 2 cores. Each layer is its own ``compare`` run in
``<out>/<layer>/``, so the work can be split (one ``--envs`` per
invocation, on different days or machines with their own ``--db``) and is
resumable: finished runs are read back from their result files, an
interrupted one is replayed from the database for free. ``--report-only``
reports on every layer found in ``--out`` without running anything.

Smoke run (a minute)::

    python bench/bench_learning.py --envs Matmul-BERT-M0-v0 --budget 12 --seeds 2 --budgets 8,12 \\
        --agent-option ga:population=64 --agent-option ga-random-model:population=64 --no-vendor \\
        --db /tmp/learn-smoke.db --out /tmp/learn-smoke
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import sys
import time
from pathlib import Path

from tensorgym.baselines.compare import compare
from tensorgym.baselines.learning import analyse, plot, render
from tensorgym.cli.args import float_list, int_list, seed_list
from tensorgym.text import slug
from tensorgym.tuner import TuningResult

DEFAULT_ENVS = ("Conv2d-ResNet-R5-v0", "Conv2d-YOLO-Y10-v0", "Matmul-BERT-M3-v0")
DEFAULT_AGENTS = ("random", "ga", "dgd", "optuna", "ga-random-model", "dgd-random-model")
TIME_POINTS = (60.0, 120.0, 180.0, 240.0, 300.0)


def agent_option(text: str) -> tuple[str, str, object]:
    """``agent:key=value`` (the value a Python literal, else a string)."""
    try:
        agent, rest = text.split(":", 1)
        key, value = rest.split("=", 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected agent:key=value, got {text!r}") from None
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = value
    return agent.strip(), key.strip(), parsed


def load(out: Path) -> tuple[dict[str, dict[str, list[TuningResult]]], dict[str, str]]:
    """Every layer's results under ``out`` (``<out>/<layer>/compare.json``): env -> agent -> runs; and labels."""
    results: dict[str, dict[str, list[TuningResult]]] = {}
    labels: dict[str, str] = {}
    for board in sorted(out.glob("*/compare.json")):
        data = json.loads(board.read_text())
        for row in data["rows"]:
            if row.get("workload"):
                labels[row["env"]] = row["workload"]
        for key, files in data.get("result_files", {}).items():
            env_id, agent = key.rsplit("/", 1)
            # The paths are as compare wrote them (relative to where it ran); else look beside compare.json.
            paths = [Path(f) if Path(f).exists() else board.parent / "results" / Path(f).parent.name / Path(f).name
                     for f in files]
            runs = [TuningResult.from_json(json.loads(p.read_text())) for p in paths if p.exists()]
            results.setdefault(env_id, {})[agent] = runs
    return results, labels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(DEFAULT_ENVS), help="comma-separated env ids")
    parser.add_argument("--agents", default=",".join(DEFAULT_AGENTS), help="comma-separated agents")
    parser.add_argument("--budget", type=int, default=512, help="measurements per run (default: 512)")
    parser.add_argument("--budgets", type=int_list, default=(128, 512),
                        help="trial budgets the report reads (default: 128,512; the largest <= --budget)")
    parser.add_argument("--seeds", type=seed_list, default=5, help="number of seeds or a list (default: 5)")
    parser.add_argument("--time-points", type=float_list, default=TIME_POINTS, help="seconds of tuning clock")
    parser.add_argument("--dgd-seconds", type=float, default=120.0, help="DGD's clock in the headline (120)")
    parser.add_argument("--agent-option", type=agent_option, action="append", default=[],
                        help="agent:key=value, e.g. ga:features=af (repeatable)")
    parser.add_argument("--db", default="bench-learning.db", help="database shared by all runs")
    parser.add_argument("--out", default="bench-learning", help="output directory (one sub-directory per layer)")
    parser.add_argument("--remeasure", type=int, default=3, help="rounds of re-timing every winner (default: 3)")
    parser.add_argument("--no-vendor", action="store_true", help="skip the vendor libraries")
    parser.add_argument("--report-only", action="store_true", help="report on what --out holds; run nothing")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if max(args.budgets) > args.budget:
        parser.error(f"--budgets {args.budgets} go beyond --budget {args.budget}")
    out = Path(args.out)
    options: dict[str, dict[str, object]] = {}
    for agent, key, value in args.agent_option:
        options.setdefault(agent, {})[key] = value

    errors = 0
    t0 = time.monotonic()
    if not args.report_only:
        for env_id in [e.strip() for e in args.envs.split(",") if e.strip()]:
            board = compare([env_id], args.agents, budget=args.budget, seeds=args.seeds, db=args.db,
                            time_points=args.time_points, trial_points=sorted(set(args.budgets)),
                            out_dir=out / slug(env_id), agent_options=options, vendor=not args.no_vendor,
                            progress=not args.quiet, remeasure=args.remeasure)
            for error in board.errors:
                errors += 1
                print(f"FAILED: {error['agent']} on {error['env']} (seed {error['seed']}): "
                      f"{error['error'].splitlines()[0]}")

    results, labels = load(out)
    if not results:
        print(f"no results under {out}", file=sys.stderr)
        return 2
    report = analyse(results, budgets=args.budgets, time_points=args.time_points, dgd_seconds=args.dgd_seconds,
                     labels=labels)
    text = render(report)
    print(text)
    (out / "learning.json").write_text(json.dumps(report, indent=1))
    (out / "learning.txt").write_text(text + "\n")
    paths = plot(results, out / "plots", labels)
    where = "" if args.report_only else f"; database {args.db}"
    print(f"\nwrote {out / 'learning.txt'}, {out / 'learning.json'} and {len(paths)} plot(s) in {out / 'plots'}"
          f"{where} ({(time.monotonic() - t0) / 60:.1f} min)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
