"""Bring your own search strategy: simulated annealing over the space's neighbours, beside the bundled agents.

A strategy proposes configs (``ask``) and learns from their records (``tell``); tensorgym's loop measures
between the two, counts the budget and the tuning clock, and stores every record. Run:

    python examples/my_strategy.py                    # BERT M3 and a small matmul, 32 trials, 2 seeds
    python examples/my_strategy.py --budget 16 --seeds 1 --env tensorgym/Matmul-v0 --shape M=64,N=64,K=64
"""

from __future__ import annotations

import argparse
import math

from tensorgym.agents import SearchAgent
from tensorgym.baselines.compare import compare
from tensorgym.baselines.render import text_table
from tensorgym.catalog import register_agent


class SimulatedAnnealing(SearchAgent):
    """Walks to a random unmeasured neighbour batch; accepts a worse config with probability exp(-loss / T)."""

    name = "annealing"
    spaces = ("tiles", "mapping")

    def __init__(self, batch_size: int = 4, temperature: float = 0.3, cooling: float = 0.9):
        self.batch_size, self.temperature, self.cooling = batch_size, temperature, cooling

    def start(self, space, rng, seed=0, database=None):
        super().start(space, rng, seed, database)
        self.current, self.t = None, self.temperature

    def ask(self, n=None):
        if self.current is None:  # no correct config yet: draw at random
            return self.history.sample(self.rng, self.batch_size)
        moves = [c for c in self.history.neighbours(self.current.config) if self.history.seen(c) is None]
        picks = [moves[i] for i in self.rng.permutation(len(moves))[:self.batch_size]]
        return picks or self.history.sample(self.rng, self.batch_size)  # a local optimum: jump

    def tell(self, records):
        for record in sorted((r for r in records if r.ok), key=lambda r: -r.gflops):
            loss = 1.0 - record.gflops / self.current.gflops if self.current else -1.0
            if loss <= 0 or self.rng.random() < math.exp(-loss / max(self.t, 1e-6)):
                self.current = record
                break
        self.t *= self.cooling


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", action="append", help="env ids (default: Matmul-BERT-M3-v0)")
    parser.add_argument("--shape", default=None, help="M=..,N=..,K=.. for tensorgym/Matmul-v0")
    parser.add_argument("--budget", type=int, default=32)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--db", default="my_strategy.db")
    parser.add_argument("--out", default="my-strategy-results")
    parser.add_argument("--no-vendor", action="store_true", help="skip the vendor libraries' timings")
    args = parser.parse_args(argv)
    register_agent("annealing", SimulatedAnnealing)  # now a name like "ga" for make_agent and compare
    shape = dict((k, int(v)) for k, v in (p.split("=") for p in args.shape.split(","))) if args.shape else None
    board = compare(args.env or ["Matmul-BERT-M3-v0"], agents="random,annealing,ga", budget=args.budget,
                    seeds=args.seeds, db=args.db, out_dir=args.out, shape=shape, vendor=not args.no_vendor,
                    plot=False)
    print(text_table(board))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
