"""An analytical draft of a ``tiles`` config's speed: a roofline over its analytical features, no training.

Pruner (ASPLOS '25) drafts with a cheap symbolic analyser and lets the
learned model verify; TLP and Ansor learn everything from measurements. With
a few dozen measurements a learned model has little to go on, while a crude
hardware model already knows that a kernel with one vector accumulator, a
half-empty vector register or an idle core cannot be fast. The draft here is
that crude model, built on the CPU analytical features of
:mod:`tensorgym.spaces.tiles.features` (per core, in FLOP per cycle, up to a
constant factor):

* **compute**: ``4 * lanes`` FLOP/cycle (two FMA ports, an FMA being two
  FLOPs, on full vectors) times the lane utilisation, times
  ``min(1, ilp / 8)`` (two ports with a four-cycle FMA latency need eight
  independent accumulators to stay busy), divided by the register pressure
  when it exceeds 1 (spills);
* **L1 traffic**: the L1 block's operational intensity times the bandwidth
  it is served at: ``2 * 4 * lanes`` bytes/cycle (two vector loads) if the
  block fits in L1, a quarter of that (L2) if not;
* **L2 traffic**: the L2 block's intensity times the L2 bandwidth if the
  block fits in L2, a sixteenth of the L1 bandwidth (L3 / memory) if not;

and the draft is the smallest of the three (the roofline), times the share
of cores the parallel loop keeps busy (``parallel_fraction *
parallel_balance``), as a fraction of the compute peak: a number in (0, 1]
that means the same on every layer. The constants are the usual ones for a modern x86 core,
not measured; the draft only has to *order* configs, and what it gets wrong
is what the learned model is for: :class:`~tensorgym.agents.cost_model.CostModel`
with ``prior="draft"`` boosts from it (the draft is each config's starting
score, the trees learn the correction).

How well the draft alone ranks is part of the offline evaluation
(``bench/bench_cost_model.py``, model ``draft``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensorgym.config import Config
from tensorgym.spaces.base import Space, SpaceError

NEEDED = ("oi_l2", "oi_l1", "l2_fit", "l1_fit", "ilp", "reg_pressure", "lane_util", "parallel_balance",
          "parallel_fraction")
FMA_CHAINS = 8  # independent accumulators that keep two FMA ports with a 4-cycle latency busy


def check_space(space: Space) -> None:
    """Raise :class:`SpaceError` unless ``space`` has the analytical features the draft reads."""
    missing = [n for n in NEEDED if n not in space.feature_names]
    if missing:
        raise SpaceError(f"the {space.name!r} space lacks the analytical features {missing} the draft needs; "
                         f"use prior=None")


def draft_from_features(raw: np.ndarray, names: Sequence[str], lanes: int) -> np.ndarray:
    """The draft (a fraction of the peak, in (0, 1]) of each row of raw analytical features named ``names``."""
    raw = np.atleast_2d(np.asarray(raw, dtype=np.float64))
    f = {name: raw[:, names.index(name)] for name in NEEDED}
    peak = 4.0 * lanes
    l1_bandwidth = 8.0 * lanes
    compute = peak * f["lane_util"] * np.minimum(1.0, f["ilp"] / FMA_CHAINS) / np.maximum(1.0, f["reg_pressure"])
    l1 = f["oi_l1"] * np.where(f["l1_fit"] <= 1.0, l1_bandwidth, l1_bandwidth / 4)
    l2 = f["oi_l2"] * np.where(f["l2_fit"] <= 1.0, l1_bandwidth / 4, l1_bandwidth / 16)
    roof = np.minimum.reduce([compute, l1, l2])
    return np.clip(roof * f["parallel_fraction"] * f["parallel_balance"] / peak, 1e-6, 1.0)


def draft(space: Space, configs: Sequence[Config]) -> np.ndarray:
    """The draft of each config (a fraction of the peak; higher is faster)."""
    check_space(space)
    if len(configs) == 0:
        return np.zeros(0)
    raw = np.vstack([space.features(c) for c in configs])
    return draft_from_features(raw, list(space.feature_names), space.target.vector_lanes_fp32)
