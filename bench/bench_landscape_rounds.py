"""How reproducible is a landscape measured in rounds? Its rounds against each other, and the ceiling that sets.

A landscape measured with ``tensorgym landscape measure --rounds N`` holds every config measured N
times, each round in its own shuffled order, minutes apart, each into its own database. This
script reads those databases (nothing is measured) and reports, over the configs correct in every
round:

* the Spearman rank correlation between each pair of rounds: how well one measurement of a config
  predicts the next, on this machine;
* each config's spread between rounds (``(max - min) / median``), next to the spread of the space
  itself (the percentiles of the configs' median-of-rounds GFLOP/s): when a config moves between
  rounds by as much as configs differ from each other, no single ranking reproduces;
* the same among the 64, 128 and 256 best configs alone: whether the rounds rank the space's top, where
  configs lie a few per cent apart, or only its broad levels;
* whether the slow timings come in stretches (the autocorrelation in time of each timing's log
  ratio to its config's median over the other rounds): a machine whose speed drifts over seconds
  gives stretches; noise per allocation or per build does not;
* the Spearman-Brown projection: with a between-round rank correlation ``r``, the median of ``n``
  rounds has reliability about ``n r / (1 + (n - 1) r)``; the rounds a landscape would need for two
  independent landscapes (or a landscape and a live check of the same rounds) to agree at 0.9.

Usage::

    python bench/bench_landscape_rounds.py work/landscapes-mk.db --rounds 3 \\
        --out bench/reports/landscapes/rounds_microkernel.txt
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys

import numpy as np

from tensorgym.database import Database
from tensorgym.landscape.measuring import round_path
from tensorgym.text import format_table

from report_header import emit, header


TOP = (64, 128, 256)  # the best configs whose ranking among themselves is reported apart


def rounds_of(db_path: str, rounds: int, space: str | None) -> tuple[list[dict], object]:
    """Per round: config -> (GFLOP/s, created) of its correct records; and the target of round 1."""
    out, target = [], None
    for r in range(1, rounds + 1):
        with Database(round_path(db_path, r), readonly=True) as db:
            records = [x for x in db.records(space=space) if x.ok]
            if target is None:
                targets = db.targets()
                target = next(iter(targets.values())) if targets else None
        out.append({x.config: (x.score, x.created) for x in records})
    return out, target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", help="round 1's database (rounds 2.. beside it, as landscape measure --rounds writes)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--space", default=None, help="only records of this space name (default: all)")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        print("error: --rounds must be at least 2 (rounds compared with each other)", file=sys.stderr)
        return 2
    per_round, target = rounds_of(args.db, args.rounds, args.space)
    configs = [c for c in per_round[0] if all(c in r for r in per_round)]
    if len(configs) < 3:
        print(f"error: only {len(configs)} configs are correct in all {args.rounds} rounds", file=sys.stderr)
        return 2
    from scipy.stats import spearmanr

    scores = np.array([[r[c][0] for c in configs] for r in per_round])
    logs = np.log(scores)
    median = np.median(scores, axis=0)
    lines = header(f"A landscape's rounds against each other: {args.db}, {args.rounds} rounds", target) if target \
        else [f"# A landscape's rounds against each other: {args.db}"]
    lines.append(f"{len(configs)} configs correct in every round")

    pairs = []
    for i, j in itertools.combinations(range(args.rounds), 2):
        pairs.append(float(spearmanr(scores[i], scores[j]).statistic))
    lines += ["", "between rounds (Spearman of the configs' GFLOP/s):",
              format_table([[f"round {i + 1} vs {j + 1}", f"{rho:.3f}"] for (i, j), rho in
                            zip(itertools.combinations(range(args.rounds), 2), pairs)], ["pair", "Spearman"])]

    spread = (scores.max(axis=0) - scores.min(axis=0)) / median
    pct = (0, 5, 10, 25, 50, 75, 90, 95, 100)
    lines += ["", "the space (median over rounds, GFLOP/s) and each config's move between rounds:",
              format_table([["space: configs' median GFLOP/s", *(f"{v:.1f}" for v in np.percentile(median, pct))],
                            *[[f"space: round {i + 1}'s GFLOP/s", *(f"{v:.1f}" for v in np.percentile(s, pct))]
                              for i, s in enumerate(scores)],
                            ["a config's (max - min) / median", *(f"{v:.3f}" for v in np.percentile(spread, pct))]],
                           ["", *(f"p{p}" for p in pct)])]

    rows = []
    for k in TOP:
        if k >= len(configs):
            continue
        top = np.argsort(-median)[:k]
        rho = [float(spearmanr(scores[i, top], scores[j, top]).statistic)
               for i, j in itertools.combinations(range(args.rounds), 2)]
        rows.append([f"best {k}", f"{np.ptp(median[top]) / np.median(median[top]):.3f}",
                     f"{np.median(spread[top]):.3f}", f"{min(rho):.3f}-{max(rho):.3f}"])
    lines += ["", "the best configs alone (by their median over rounds): how fine a ranking the rounds reproduce",
              format_table(rows, ["configs", "span of their medians / median", "median move between rounds",
                                  "Spearman between rounds"])]

    rows = []
    for i in range(args.rounds):
        others = np.mean(np.delete(logs, i, axis=0), axis=0)
        created = np.array([per_round[i][c][1] for c in configs])
        order = np.argsort(created)
        residual = (logs[i] - others)[order]
        auto = [float(np.corrcoef(residual[:-lag], residual[lag:])[0, 1]) for lag in (1, 4, 16)]
        rows.append([f"round {i + 1}", f"{residual.std():.3f}", f"{(residual < math.log(0.8)).mean():.3f}",
                     *(f"{a:.2f}" for a in auto)])
    lines += ["", "each timing against its config's mean over the other rounds (log ratio), in the order timed:",
              format_table(rows, ["round", "sd", "share > 20 % slow", "autocorr lag 1", "lag 4", "lag 16"])]

    r = max(min(float(np.mean(pairs)), 0.999), 1e-3)
    def reliability(n: int) -> float:
        return n * r / (1 + (n - 1) * r)
    need = math.ceil(0.9 * (1 - r) / (r * (1 - 0.9)))
    lines += ["", f"mean between-round Spearman r = {r:.3f}; Spearman-Brown reliability of a median of n rounds: "
              + ", ".join(f"n={n}: {reliability(n):.2f}" for n in (1, 3, 5, 10, 30)),
              f"rounds for two independent landscapes to agree at 0.9 (reliability 0.9 each): about {need}"]
    emit("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
