"""Does a landscape still hold? Re-measure some of its configs live and compare ranks.

A landscape is one CPU's measurements, taken once. :func:`check_landscape` re-measures a
seeded random sample of its configs on this machine, through the normal evaluator (checked
against NumPy, faults recorded), and reports the Spearman rank correlation between the live
and the recorded throughputs of the configs that ran correctly both times. On the CPU the
landscape was measured on this is the landscape's own noise figure (it should be at least
0.9); on another CPU it says how far the landscape's ranking carries over, which is reported,
not asserted. The median live/recorded throughput ratio says whether this machine is simply
faster or slower.

With ``rounds`` > 1 each sampled config is timed live in that many rounds, each over the whole
sample in its own shuffled order, and its live latency is the median of its rounds: the same rule
as a landscape measured in rounds, so that a check of one is not limited by the noise of a single
live timing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..database import Database
from ..evaluator import Evaluator
from ..measure.measurer import Measurer
from .file import Landscape


@dataclass(frozen=True)
class LandscapeCheck:
    """The outcome of :func:`check_landscape`."""

    layer: str
    landscape_cpu: str
    live_cpu: str
    same_cpu: bool
    configs: int  # re-measured
    both_ok: int  # correct in the landscape and live
    status_changed: int  # correct in one, failed in the other
    spearman: float | None  # over the configs correct both times
    median_ratio: float | None  # live / recorded GFLOP/s, median over those configs
    rounds: int = 1  # live timing rounds per config
    spearman_first_round: float | None = None  # with rounds > 1: the Spearman of round 1's live timings alone

    def summary(self) -> str:
        rho = "n/a" if self.spearman is None else f"{self.spearman:.3f}"
        ratio = "n/a" if self.median_ratio is None else f"{self.median_ratio:.2f}"
        where = ("the landscape's own CPU" if self.same_cpu
                 else f"another CPU than the landscape's ({self.landscape_cpu})")
        verdict = ""
        if self.same_cpu and self.spearman is not None:
            verdict = "; holds (>= 0.9)" if self.spearman >= 0.9 else "; below 0.9: noisier than expected"
        timed = "" if self.rounds == 1 else f" ({self.rounds} rounds each, median)"
        if self.rounds > 1 and self.spearman_first_round is not None:
            rho += f" (round 1 alone: {self.spearman_first_round:.3f})"
        return (f"{self.layer}: {self.configs} configs re-measured live{timed} on {where}: Spearman {rho} over "
                f"{self.both_ok} correct both times{verdict}; live/recorded throughput {ratio} (median); "
                f"{self.status_changed} changed between correct and failed")


def check_landscape(landscape: Landscape, database: Database, measurer: Measurer, *, configs: int = 64,
                    seed: int = 0, rounds: int = 1, progress: bool = True) -> LandscapeCheck:
    """Re-measure ``configs`` random configs of ``landscape`` with ``measurer`` (the first round's records in
    ``database``), each in ``rounds`` rounds (see the module docs)."""
    from scipy.stats import spearmanr
    from tqdm.auto import tqdm

    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    target = measurer.target
    space = landscape.space(target)
    rng = np.random.default_rng(seed)
    rows = [int(r) for r in rng.choice(len(landscape), size=min(configs, len(landscape)), replace=False)]
    evaluator = Evaluator(space, database, measurer)
    bar = tqdm(total=len(rows) * rounds, desc=f"check {landscape.workload_label}", unit="timing",
               disable=not progress)
    latencies: dict[int, list[float]] = {}
    changed = 0
    for row in rows:  # round 1: checked against NumPy, stored
        config = landscape.configs[row]
        before = landscape.record(row)
        after = evaluator.evaluate([config])[0]
        if after.short:  # a one-sample bound of a far-off kernel: timed in full, so that it ranks fairly
            after = evaluator.time_in_full(after)
        if before.ok and after.ok:
            latencies[row] = [after.latency_s]
        elif before.ok != after.ok:
            changed += 1
        bar.update(1)
    for _ in range(1, rounds):  # later rounds: the same kernels timed again, in another order each
        for row in rng.permutation(sorted(latencies)):
            timed = measurer.measure(space, [landscape.configs[int(row)]], check=False)[0]
            if timed.ok:
                latencies[int(row)].append(timed.latency_s)
            bar.update(1)
        bar.update(len(rows) - len(latencies))
    bar.close()
    recorded = [landscape.record(row).score for row in latencies]
    live = [space.workload.gflops(float(np.median(values))) for values in latencies.values()]
    rho = float(spearmanr(recorded, live).statistic) if len(live) >= 3 else None
    first = None
    if rounds > 1 and len(live) >= 3:
        first_live = [space.workload.gflops(values[0]) for values in latencies.values()]
        first = float(spearmanr(recorded, first_live).statistic)
    ratio = float(np.median(np.asarray(live) / np.asarray(recorded))) if live else None
    return LandscapeCheck(layer=landscape.workload_label, landscape_cpu=landscape.cpu_label, live_cpu=target.label,
                          same_cpu=target.fingerprint == landscape.fingerprint, configs=len(rows), both_ok=len(live),
                          status_changed=changed, spearman=rho, median_ratio=ratio, rounds=rounds,
                          spearman_first_round=first)
