"""Which layers a dataset measures: seed 004's prior-guided task sampling (PGS).

The prior is a frequency table of the conv2d and matmul instances of real
model architectures (ResNet-18/50, MobileNet-V2, VGG-16, Inception-v3,
DenseNet-121, BERT-base, GPT-2 small), shipped as
``tensorgym/data/shape_priors.json``: each row is one distinct shape with the
number of times it occurs in each model (its ``provenance`` block names the
papers and counting conventions; ``tools/derive_shapes.py`` derives it and
``tools/SHAPE_PRIORS.md`` describes how it was cross-checked against
PyTorch forward passes). The layers of the seed suites (ResNet-50, YOLO-9000,
BERT, ResNet-18) are added to it: a suite layer that is already a row keeps the
row's weight and takes the suite's name (the first suite's, for a layer of
two); one that is not becomes a row of weight 1.

**Sampling** (:meth:`ShapePrior.sample`) follows seed 004's Algorithm 1: a
task is drawn knob by knob (the operator first, then its shape parameters in
a random order), each value with probability ``count(sampled + value) /
count(sampled)`` among the rows that agree with the knobs drawn so far. By the
chain rule this draws an existing row with probability proportional to its
weight; it never invents a combination (what seed 004's artifact does too).
Tasks are distinct: a row drawn twice is drawn again.

**Weights.** ``count`` counts attention matmuls once per head (12 per layer),
which lets the per-head attention shapes of the transformers dominate the
table; ``count_batched`` (the default) counts them once per layer, as one
batched operator, so CNN and transformer layers weigh alike. Rows that
tensorgym cannot express (depthwise and asymmetrically padded convs) are
left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..suites import SUITES
from ..workloads import Workload, conv2d, matmul

WEIGHTS = ("count", "count_batched")
OPS = ("conv2d", "matmul")
PRIOR_SUITE = "prior"  # the suite name of sampled layers that are not suite layers


@dataclass(frozen=True)
class ShapeRow:
    """One distinct shape of the prior: its workload and how often it occurs."""

    workload: Workload
    weight: float
    models: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def knobs(self) -> dict[str, Any]:
        """The values Algorithm 1 samples: the operator and its shape parameters."""
        return {"op": self.workload.op, **self.workload.shape_params}


@lru_cache(maxsize=1)
def load_table() -> dict[str, Any]:
    """The shipped frequency table (``tensorgym/data/shape_priors.json``), as JSON."""
    text = resources.files("tensorgym").joinpath("data", "shape_priors.json").read_text()
    return json.loads(text)


def _row_name(workload: Workload) -> str:
    p = workload.shape_params
    if workload.op == "conv2d":
        return f"C{p['C']}-H{p['H']}-F{p['F']}-R{p['R']}-s{p['stride']}"
    return f"M{p['M']}-N{p['N']}-K{p['K']}"


def _workload_of_row(row: dict[str, Any]) -> Workload | None:
    if not row.get("tensorgym_compatible"):
        return None
    if row["op"] == "conv2d":
        wl = conv2d(row["N"], row["C"], row["H"], row["W"], row["F"], row["R"], row["S"], row["stride"],
                    row["padding"])
    elif row["op"] == "matmul":
        wl = matmul(row["M"], row["N"], row["K"])
    else:
        return None
    return type(wl)(**wl.shape_params, suite=PRIOR_SUITE, name=_row_name(wl))


class ShapePrior:
    """Weighted distinct shapes to draw dataset tasks from (see the module docs).

    Args:
        ops: the operators to keep (``"conv2d"``, ``"matmul"``).
        weights: ``"count_batched"`` (default) or ``"count"``.
        suites: add the seed suites' layers (default True).
        max_gflop: leave out shapes of more GFLOP than this (None: keep all).
        exclude_models: leave out the rows that occur only in these models (a held-out split,
            as seed 004 trains on models disjoint from the evaluated ones); suite layers stay.
    """

    def __init__(self, ops: Sequence[str] = OPS, weights: str = "count_batched", *, suites: bool = True,
                 max_gflop: float | None = None, exclude_models: Iterable[str] = ()):
        unknown = set(ops) - set(OPS)
        if unknown or not ops:
            raise InvalidArgumentError(f"ops must be among {OPS}, got {list(ops)}")
        if weights not in WEIGHTS:
            raise InvalidArgumentError(f"weights must be one of {WEIGHTS}, got {weights!r}")
        if max_gflop is not None and not max_gflop > 0:
            raise InvalidArgumentError(f"max_gflop must be positive or None, got {max_gflop!r}")
        table = load_table()
        self.provenance: dict[str, Any] = table["provenance"]
        excluded = set(exclude_models)
        known_models = set(self.provenance.get("models", {}))
        if excluded - known_models:
            raise InvalidArgumentError(f"unknown model(s) {sorted(excluded - known_models)}; the table has "
                                       f"{sorted(known_models)}")
        rows: dict[str, ShapeRow] = {}
        for entry in table["shapes"]:
            wl = _workload_of_row(entry)
            if wl is None or wl.op not in ops:
                continue
            models = {m: c for m, c in entry.get("models", {}).items() if m not in excluded}
            if not models:
                continue
            weight = float(entry[weights]) * sum(models.values()) / sum(entry["models"].values())
            rows[wl.key] = ShapeRow(wl, weight, models)
        if suites:
            for suite in SUITES.values():
                for wl in suite.layers:
                    if wl.op not in ops:
                        continue
                    old = rows.get(wl.key)
                    if old is not None and old.workload.suite != PRIOR_SUITE:
                        continue  # a layer of two suites (ResNet-50/R5 = ResNet-18/C5) keeps its first name
                    rows[wl.key] = ShapeRow(wl, old.weight if old else 1.0, old.models if old else {})
        self.rows: list[ShapeRow] = [r for r in rows.values()
                                     if max_gflop is None or r.workload.gflop <= max_gflop]
        if not self.rows:
            raise InvalidArgumentError("the prior has no shape left after filtering (ops, max_gflop, exclude_models)")

    def __len__(self) -> int:
        return len(self.rows)

    def probabilities(self) -> np.ndarray:
        """The probability of each row under Algorithm 1 (its weight over the total)."""
        weights = np.array([r.weight for r in self.rows], dtype=np.float64)
        return weights / weights.sum()

    def draw(self, rng: np.random.Generator, candidates: Sequence[int] | None = None) -> ShapeRow:
        """One row (of ``candidates``, row indices; default all), drawn knob by knob (Algorithm 1's
        PRIOR_GUIDED_TASK_SAMPLING for one task)."""
        candidates = list(range(len(self.rows))) if candidates is None else list(candidates)
        if not candidates:
            raise InvalidArgumentError("no row left to draw from")
        op_rows = self._choose(rng, candidates, "op")
        knobs = [k for k in self.rows[op_rows[0]].knobs if k != "op"]
        for index in rng.permutation(len(knobs)):
            op_rows = self._choose(rng, op_rows, knobs[index])
        return self.rows[op_rows[int(rng.integers(len(op_rows)))]]

    def _choose(self, rng: np.random.Generator, candidates: list[int], knob: str) -> list[int]:
        """Draw a value of ``knob`` with P = count(sampled + value) / count(sampled); keep the rows that agree."""
        totals: dict[Any, float] = {}
        for i in candidates:
            value = self.rows[i].knobs[knob]
            totals[value] = totals.get(value, 0.0) + self.rows[i].weight
        values = list(totals)
        p = np.array([totals[v] for v in values])
        chosen = values[int(rng.choice(len(values), p=p / p.sum()))]
        return [i for i in candidates if self.rows[i].knobs[knob] == chosen]

    def sample(self, n: int, rng: np.random.Generator, exclude: Iterable[Workload] = ()) -> list[Workload]:
        """``n`` distinct workloads (fewer if the prior holds fewer), none of them in ``exclude``."""
        if n < 0:
            raise InvalidArgumentError(f"the number of tasks must be >= 0, got {n}")
        taken = {wl.key for wl in exclude}
        left = [i for i, r in enumerate(self.rows) if r.workload.key not in taken]
        out: list[Workload] = []
        while len(out) < n and left:
            # Drawing among the rows not taken yet is drawing with rejection of repeats, without the waste.
            row = self.draw(rng, left)
            out.append(row.workload)
            left = [i for i in left if self.rows[i] is not row]
        return out

    def occurrences(self, workload: Workload) -> dict[str, int]:
        """In which models of the table ``workload``'s shape occurs, and how often (empty: none)."""
        for row in self.rows:
            if row.workload.key == workload.key:
                return dict(row.models)
        return {}
