"""What a dataset holds: records per layer, failures, throughput, and what replay can use of it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..database import Database
from ..spaces.tiles import HopGraph, TilesSpace


@dataclass(frozen=True)
class LayerStats:
    """One layer (workload, target, space) of a dataset."""

    label: str
    workload: str
    target: str
    space: str
    records: int
    statuses: dict[str, int]
    best_gflops: float
    median_gflops: float
    replay_starts: int | None  # correct configs with a recorded correct 1-hop neighbour (tiles only)

    @property
    def ok(self) -> int:
        return self.statuses.get("ok", 0)


@dataclass
class DatasetStats:
    """Per-layer statistics and totals."""

    layers: list[LayerStats] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(layer.records for layer in self.layers)

    @property
    def statuses(self) -> Counter:
        total: Counter = Counter()
        for layer in self.layers:
            total.update(layer.statuses)
        return total

    @property
    def ops(self) -> Counter:
        return Counter(layer.workload.split("(")[0] for layer in self.layers)

    @property
    def targets(self) -> set[str]:
        return {layer.target for layer in self.layers}


def dataset_stats(database: Database, *, space: str | None = None, target: str | None = None) -> DatasetStats:
    """Statistics of every (workload, target, space) in ``database`` (optionally one space / target)."""
    workloads = database.workloads()
    targets = database.targets()
    groups: dict[tuple[str, str, str], list] = {}
    for record in database.records(target=target, space=space):
        groups.setdefault((record.workload, record.target, record.space), []).append(record)
    stats = DatasetStats()
    for (key, fingerprint, space_name), records in groups.items():
        wl = workloads.get(key)
        scores = [r.score for r in records if r.ok]
        starts = None
        if space_name == "tiles" and wl is not None and fingerprint in targets:
            starts = len(HopGraph(TilesSpace(wl, targets[fingerprint]), records).starts)
        stats.layers.append(LayerStats(
            label=wl.label if wl else key, workload=key, target=fingerprint, space=space_name, records=len(records),
            statuses=dict(Counter(r.status.value for r in records)), best_gflops=max(scores, default=0.0),
            median_gflops=float(np.median(scores)) if scores else 0.0, replay_starts=starts))
    return stats
