"""Does a landscape still hold? Re-measure some of its configs live and compare ranks.

A landscape is one CPU's measurements, taken once. :func:`check_landscape` re-measures a
seeded random sample of its configs on this machine, through the normal evaluator (checked
against NumPy, faults recorded), and reports the Spearman rank correlation between the live
and the recorded throughputs of the configs that ran correctly both times. On the CPU the
landscape was measured on this is the landscape's own noise figure (it should be at least
0.9); on another CPU it says how far the landscape's ranking carries over, which is reported,
not asserted. The median live/recorded throughput ratio says whether this machine is simply
faster or slower.
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

    def summary(self) -> str:
        rho = "n/a" if self.spearman is None else f"{self.spearman:.3f}"
        ratio = "n/a" if self.median_ratio is None else f"{self.median_ratio:.2f}"
        where = ("the landscape's own CPU" if self.same_cpu
                 else f"another CPU than the landscape's ({self.landscape_cpu})")
        verdict = ""
        if self.same_cpu and self.spearman is not None:
            verdict = "; holds (>= 0.9)" if self.spearman >= 0.9 else "; below 0.9: noisier than expected"
        return (f"{self.layer}: {self.configs} configs re-measured live on {where}: Spearman {rho} over "
                f"{self.both_ok} correct both times{verdict}; live/recorded throughput {ratio} (median); "
                f"{self.status_changed} changed between correct and failed")


def check_landscape(landscape: Landscape, database: Database, measurer: Measurer, *, configs: int = 64,
                    seed: int = 0, progress: bool = True) -> LandscapeCheck:
    """Re-measure ``configs`` random configs of ``landscape`` with ``measurer`` (records in ``database``)."""
    from scipy.stats import spearmanr
    from tqdm.auto import tqdm

    target = measurer.target
    space = landscape.space(target)
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(landscape), size=min(configs, len(landscape)), replace=False)
    evaluator = Evaluator(space, database, measurer)
    recorded, live, changed = [], [], 0
    for row in tqdm(rows, desc=f"check {landscape.workload_label}", unit="config", disable=not progress):
        config = landscape.configs[int(row)]
        before = landscape.record(int(row))
        after = evaluator.evaluate([config])[0]
        if after.short:  # a one-sample bound of a far-off kernel: timed in full, so that it ranks fairly
            after = evaluator.time_in_full(after)
        if before.ok and after.ok:
            recorded.append(before.score)
            live.append(after.score)
        elif before.ok != after.ok:
            changed += 1
    rho = float(spearmanr(recorded, live).statistic) if len(live) >= 3 else None
    ratio = float(np.median(np.asarray(live) / np.asarray(recorded))) if live else None
    return LandscapeCheck(layer=landscape.workload_label, landscape_cpu=landscape.cpu_label, live_cpu=target.label,
                          same_cpu=target.fingerprint == landscape.fingerprint, configs=len(rows), both_ok=len(live),
                          status_changed=changed, spearman=rho, median_ratio=ratio)
