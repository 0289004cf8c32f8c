"""Is a benchmark space a toy? Its best config against the GA's best in the *full* tiles space at 512.

(``--space microkernel``: a conv2d's microkernel benchmark space against random-structured's best in the full
microkernel space at 512, the search that anchors it; ``--ga-db`` is then that search's database, e.g.
the landscape's anchor database.)

For each layer: the best config of its shipped landscape of this CPU (the benchmark sub-space,
``tensorgym landscape measure`` then ``export``) and the best config the GA finds
in the full tiles space with 512 measurements, seed 0 (``--ga-db``: its own database, so
that no landscape record guides it; the run resumes from it). The ``--top`` best recorded
kernels of each side are then timed again in ``--retime`` interleaved rounds (a best-of-N of
noisy timings is biased upward, and the machine drifts), each side's best median is taken,
and the ratio of the two is printed. The issue's
criterion: the benchmark space's best is within 10 % of the GA's (ratio >= 0.90).

Run on a quiet machine (each GA run is 512 trials, about 5 minutes on 2 cores)::

    python bench/bench_landscape_quality.py --ga-db work/ga512.db --out bench/reports/landscapes/quality.txt
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from tensorgym.agents.ga import GAAgent
from tensorgym.agents.random_structured import RandomStructuredAgent
from tensorgym.catalog import make_space
from tensorgym.database import Database
from tensorgym.envs.registration import workload_of
from tensorgym.evaluator import Evaluator
from tensorgym.measure.measurer import Measurer
from tensorgym.errors import TensorgymError
from tensorgym.landscape import Landscape, find_landscape
from tensorgym.spaces.tiles.space import TilesSpace
from tensorgym.target import resolve_target
from tensorgym.text import format_table
from tensorgym.tuner import Tuner

from report_header import emit, header

LAYERS = ("Conv2d-ResNet-R5-v0", "Matmul-BERT-M3-v0", "Conv2d-ResNet18-C7-v0", "Conv2d-YOLO-Y9-v0")


def ga_best(space: TilesSpace, database: Database, measurer: Measurer, budget: int, top: int):
    """The GA's ``top`` best records in ``space`` after ``budget`` measurements, seed 0 (resumed from ``database``);
    in the microkernel space, random-structured's (the GA does not search it)."""
    agent = RandomStructuredAgent() if space.name == "microkernel" else GAAgent()
    Tuner(Evaluator(space, database, measurer), budget=budget).run(agent, seed=0)
    return database.best(space.workload.key, space.target.fingerprint, space.name, k=top)  # the GA's database alone


def retime(measurer: Measurer, kernels, rounds: int) -> list[list[float]]:
    """GFLOP/s of each (space, config) kernel, timed in ``rounds`` interleaved rounds."""
    out: list[list[float]] = [[] for _ in kernels]
    for _ in range(rounds):
        for i, (space, config) in enumerate(kernels):
            record = measurer.measure(space, [config], check=False)[0]
            if record.ok:
                out[i].append(record.score)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default=",".join(LAYERS))
    parser.add_argument("--space", default="tiles", choices=("tiles", "microkernel"))
    parser.add_argument("--ga-db", default="work/ga512.db")
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("--retime", type=int, default=5)
    parser.add_argument("--top", type=int, default=5, help="best recorded kernels of each side timed again")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    target = resolve_target(None)
    rows, lines = [], []
    with Database(args.ga_db) as ga_db, Measurer(target) as measurer:
        for env_id in [i.strip() for i in args.layers.split(",") if i.strip()]:
            workload = workload_of(env_id)
            try:
                full = make_space(args.space, workload, target)
                landscape = Landscape.load(find_landscape(workload, args.space))
            except TensorgymError as exc:
                lines.append(f"{workload.label}: {exc}; skipped")
                continue
            bench = landscape.space()
            held = landscape.records()
            size = len(bench.configs())
            top_bench = sorted((r for r in held if r.ok), key=lambda r: -r.score)[:args.top]
            start = time.monotonic()
            top_ga = ga_best(full, ga_db, measurer, args.budget, args.top)
            ga_s = time.monotonic() - start
            timed = retime(measurer, [(bench, r.config) for r in top_bench] + [(full, r.config) for r in top_ga],
                           args.retime)
            bench_t = max(timed[:len(top_bench)], key=statistics.median)
            ga_t = max(timed[len(top_bench):], key=statistics.median)
            b, g = statistics.median(bench_t), statistics.median(ga_t)
            rows.append((workload.label, f"{len(held)}/{size}", f"{top_bench[0].score:.1f}", f"{top_ga[0].score:.1f}",
                         f"{b:.1f} ({min(bench_t):.1f}-{max(bench_t):.1f})",
                         f"{g:.1f} ({min(ga_t):.1f}-{max(ga_t):.1f})", f"{b / g:.2f}",
                         "yes" if b / g >= 0.90 else "NO", f"{ga_s:.0f}"))
    search = "GA" if args.space == "tiles" else "random-structured"
    header_row = ("layer", "measured", "bench best", f"{search}@{args.budget} best", "bench re-timed",
                  f"{search} re-timed", "ratio", ">= 0.90", f"{search} s")
    title = (f"Benchmark spaces against the full {args.space} space (GFLOP/s; recorded: the best first measurement; "
             f"re-timed: the best median (min-max) of each side's top {args.top}, {args.retime} interleaved rounds)")
    emit("\n".join([*header(title, target), "", format_table(rows, header_row), *lines, ""]), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
