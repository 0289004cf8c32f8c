"""The compare-network board: every scheduler's runs on one network, and the statistics its table shows.

Per scheduler, over seeds (mean and min-max, :class:`~tensorgym.baselines.board.Stat`):

* the estimated network latency (ms) after N trials (``@N``) and after T
  seconds of tuning clock (``@Ts``), and at the end (``final``);
* ``to-RR``: the trials the run needed to reach the final latency of
  round-robin's run *of the same seed* (the reference scheduler), and
  ``%RR``: that as a share of round-robin's trials (GTA's headline: how much
  of the baseline's budget the scheduler needs for the baseline's result);
* ``xPyTorch``: PyTorch's weighted sum over the same layers divided by the
  final estimate (> 1: faster than PyTorch).

The PyTorch weighted sum is an extra row. Time points default to 25, 50 and
100 % of the shortest run's clock, so that every run has a value at each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tensorgym.network_result import NetworkResult

from .board import Stat, seconds_label
from .network_vendor import NetworkVendor

REFERENCE = "round-robin"
TRIAL_FRACTIONS = (0.25, 0.5, 1.0)
TIME_FRACTIONS = (0.25, 0.5, 1.0)


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1e3


@dataclass
class NetworkBoard:
    """The results of a compare-network run and the table made of them."""

    network: str
    schedulers: list[str]
    seeds: list[int]
    budget: int | None
    time_budget: float | None = None
    space: str = "tiles"
    dtype: str | None = None
    trial_points: tuple[int, ...] | None = None
    time_points: tuple[float, ...] | None = None
    results: dict[str, list[NetworkResult]] = field(default_factory=dict)
    result_files: dict[str, list[str]] = field(default_factory=dict)
    vendor: NetworkVendor | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def points(self) -> tuple[int, ...]:
        if self.trial_points:
            return tuple(self.trial_points)
        if self.budget is None:
            return ()
        return tuple(dict.fromkeys(max(1, round(f * self.budget)) for f in TRIAL_FRACTIONS))

    @property
    def seconds(self) -> tuple[float, ...]:
        if self.time_points:
            return tuple(self.time_points)
        ends = [r.trials[-1].elapsed_s for runs in self.results.values() for r in runs if r.trials]
        if not ends:
            return ()
        return tuple(dict.fromkeys(round(f * min(ends), 1) for f in TIME_FRACTIONS))

    def metric_names(self) -> list[str]:
        names = [f"@{p}" for p in self.points] + [f"@{seconds_label(t)}" for t in self.seconds] + ["final"]
        if REFERENCE in self.schedulers:
            names += ["to-RR", "%RR"]
        if self.vendor is not None and self.vendor.estimate_s:
            names.append("xPyTorch")
        return names

    def reference_run(self, seed: int) -> NetworkResult | None:
        return next((r for r in self.results.get(REFERENCE, []) if r.seed == seed), None)

    def stats(self, scheduler: str) -> dict[str, Stat]:
        runs = self.results.get(scheduler, [])
        out = {f"@{p}": Stat(tuple(_ms(r.estimate_at(trials=p)) for r in runs)) for p in self.points}
        out.update({f"@{seconds_label(t)}": Stat(tuple(_ms(r.estimate_at(seconds=t)) for r in runs))
                    for t in self.seconds})
        out["final"] = Stat(tuple(_ms(r.estimate_s) for r in runs))
        if REFERENCE in self.schedulers:
            reach, share = [], []
            for r in runs:
                ref = self.reference_run(r.seed)
                target = ref.estimate_s if ref is not None else None
                n = r.trials_to_reach(target) if target is not None else None
                reach.append(None if n is None else float(n))
                share.append(None if n is None or not ref.trials else 100.0 * n / len(ref.trials))
            out["to-RR"], out["%RR"] = Stat(tuple(reach)), Stat(tuple(share))
        if self.vendor is not None and self.vendor.estimate_s:
            out["xPyTorch"] = Stat(tuple(self.vendor.estimate_s / r.estimate_s if r.estimate_s else None for r in runs))
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One row per scheduler, then PyTorch's weighted sum: the table as data."""
        out = [{"scheduler": s, "seeds": [r.seed for r in self.results.get(s, [])], "stats": self.stats(s)}
               for s in self.schedulers]
        if self.vendor is not None and self.vendor.estimate_s is not None:
            out.append({"scheduler": f"PyTorch ({self.vendor.library})", "seeds": [],
                        "stats": {"final": Stat((_ms(self.vendor.estimate_s),)), "xPyTorch": Stat((1.0,))}})
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": {"network": self.network, "schedulers": self.schedulers, "seeds": self.seeds,
                         "budget": self.budget, "time_budget": self.time_budget, "space": self.space,
                         "dtype": self.dtype, "trial_points": list(self.points), "time_points": list(self.seconds)},
            "rows": [{**r, "stats": {k: s.to_json() for k, s in r["stats"].items()}} for r in self.rows()],
            "vendor": self.vendor.to_json() if self.vendor is not None else None, "errors": self.errors,
            "result_files": self.result_files,
        }
