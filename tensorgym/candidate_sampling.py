"""GTA's ``probability_sample`` (seed 002, Sec. 4.2, Eq. 3): which mapping candidates of a task to keep tuning.

Given the best latency of each candidate of a task:

* ``P(k) = (1 / m_k) / sum_j (1 / m_j)``: faster candidates are likelier
  (a candidate without a correct kernel has ``P = 0``; if none has one, all
  are equally likely);
* ``P'(k) ~ (1 + beta) P(k)`` for the *boosted* candidates (those dropped in
  the last round), ``P(k)`` for the others, normalised: the exploration boost;
* keep ``ceil(kappa * n)`` of the ``n`` candidates: the top ones by ``P'``
  (Eq. 3, ties to the lower index), or drawn without replacement with
  probabilities ``P'`` (``selection="sample"``, the paper's prose reading).

Used by the ``dual-task`` scheduler and by the network env's optional
candidate pruning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .errors import InvalidArgumentError

SELECTIONS = ("top", "sample")


def kept_count(kappa: float, n: int) -> int:
    """``ceil(kappa * n)``, at least 1 (with a tolerance: ``0.6 * 5`` is 3, not 4)."""
    return max(1, min(n, math.ceil(kappa * n - 1e-9)))


def sampling_probabilities(latencies: Mapping[int, float | None], boosted: set[int], beta: float) -> dict[int, float]:
    """``P'``: inverse-latency probabilities, with the ``(1 + beta)`` boost for ``boosted`` candidates, normalised.

    Candidates without a latency (no correct kernel) get 0; if none has one, all are equally likely.
    """
    inverse = {k: (1.0 / lat if lat is not None and math.isfinite(lat) and lat > 0 else 0.0)
               for k, lat in latencies.items()}
    total = sum(inverse.values())
    p = {k: (v / total if total > 0 else 1.0 / len(inverse)) for k, v in inverse.items()}
    boosted_p = {k: (1.0 + (beta if k in boosted else 0.0)) * v for k, v in p.items()}
    norm = sum(boosted_p.values())
    return {k: v / norm for k, v in boosted_p.items()}


def probability_sample(latencies: Mapping[int, float | None], boosted: set[int], *, kappa: float = 0.2,
                       beta: float = 0.2, selection: str = "top",
                       rng: np.random.Generator | None = None) -> list[int]:
    """GTA's ``probability_sample``: the candidates to keep, sorted (see the module docs).

    Args:
        latencies: each candidate's best latency (None: no correct kernel yet).
        boosted: the candidates that get the ``(1 + beta)`` exploration boost (dropped last round).
        kappa: the sampling rate: ``ceil(kappa * len(latencies))`` candidates are kept.
        beta: the exploration boost.
        selection: ``"top"`` (Top-N by ``P'``) or ``"sample"`` (drawn without replacement with ``P'``).
        rng: the generator of ``"sample"``.
    """
    if not latencies:
        return []
    n = kept_count(kappa, len(latencies))
    p = sampling_probabilities(latencies, boosted, beta)
    keys = sorted(p)
    if selection == "top":
        return sorted(sorted(keys, key=lambda k: (-p[k], k))[:n])
    if selection != "sample":
        raise InvalidArgumentError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    if rng is None:
        raise InvalidArgumentError("selection='sample' needs an rng")
    chosen: list[int] = []
    left = list(keys)
    while len(chosen) < n:
        weights = np.array([p[k] for k in left])
        probs = weights / weights.sum() if weights.sum() > 0 else None  # all zero: uniform
        k = left[int(rng.choice(len(left), p=probs))]
        chosen.append(k)
        left.remove(k)
    return sorted(chosen)
