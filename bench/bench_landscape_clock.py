"""Does the landscape backend's simulated clock agree with a live run's tuning clock?

For each agent (default: random and the GA), seed and layer, the same search runs twice
over the layer's benchmark space with ``--budget`` trials:

* live: kernels compiled and timed now, into a fresh database (nothing reused), the tuning
  clock as the live pipeline charges it (parallel builds, serial timing, the agent's compute);
* simulated: answered from the shipped landscape (:class:`~tensorgym.landscape.LandscapeEvaluator`),
  the clock charging each config's recorded build and run seconds as the live pipeline does.

It prints both clocks at the end of each run and their ratio; the issue's criterion is agreement
within 15 %. Random search with one seed draws the same configs in both worlds; the GA's choices
depend on the (noisy) measurements, so its two runs may part ways.

Run on a quiet machine (a live run of 128 trials is about a minute on 2 cores)::

    python bench/bench_landscape_clock.py --out bench/reports/landscapes/clock.txt
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tensorgym.catalog import make_agent
from tensorgym.database import Database
from tensorgym.evaluator import Evaluator
from tensorgym.landscape import Landscape, LandscapeEvaluator, find_landscape
from tensorgym.measure.measurer import Measurer
from tensorgym.target import resolve_target
from tensorgym.text import format_table
from tensorgym.tuner import Tuner

from report_header import emit, header


def run(agent: str, evaluator, budget: int, seed: int):
    search = make_agent(agent)
    tuner = Tuner(evaluator, budget=budget)
    extra = tuner.run(search, seed) or {}
    return tuner.result(agent, seed, **extra)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="Conv2d-ResNet-R5-v0,Matmul-BERT-M3-v0")
    parser.add_argument("--agents", default="random,ga")
    parser.add_argument("--budget", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    target = resolve_target(None)
    rows = []
    with Measurer(target) as measurer, tempfile.TemporaryDirectory() as tmp:
        for env_id in [i.strip() for i in args.layers.split(",") if i.strip()]:
            landscape = Landscape.load(find_landscape(env_id))
            space = landscape.space()
            for agent in [a.strip() for a in args.agents.split(",") if a.strip()]:
                for seed in range(args.seeds):
                    with Database(Path(tmp) / f"{env_id}-{agent}-{seed}.db") as database:
                        live = run(agent, Evaluator(space, database, measurer), args.budget, seed)
                    simulated = run(agent, LandscapeEvaluator(landscape, seed=seed, space=space), args.budget, seed)
                    a, b = live.trials[-1].elapsed_s, simulated.trials[-1].elapsed_s
                    same = sum(x.config == y.config for x, y in zip(live.trials, simulated.trials))
                    rows.append((landscape.workload_label, agent, seed, len(live.trials), f"{a:.1f}", f"{b:.1f}",
                                 f"{b / a:.3f}", "yes" if abs(b / a - 1) <= 0.15 else "NO",
                                 f"{same}/{len(live.trials)}", f"{live.best_gflops:.1f}",
                                 f"{simulated.best_gflops:.1f}"))
    emit("\n".join([*header("The landscape backend's simulated tuning clock against a live run of the same search",
                             target), "",
                     format_table(rows, ("layer", "agent", "seed", "trials", "live clock s", "simulated s", "ratio",
                                         "within 15 %", "same configs", "live best", "simulated best")), ""]),
         args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
