"""How well a cost model ranks configs: the metrics of the offline evaluation and the agents' per-round logs.

A search uses a cost model to decide what to measure next, so what matters is
not how close its predictions come to the measured GFLOP/s but how it *orders*
configs, and above all the good ones. The metrics here take the scores a model
gave some configs (``predicted``, higher is better) and what those configs
measured (``measured``, GFLOP/s, a failed config counted as 0):

``spearman``, ``kendall``
    rank correlation over all configs;
``top_quartile_spearman``
    the same among the configs whose measured value is in the top quarter:
    does the model still tell good from very good?
``recall(top, k)``
    the share of the truly best ``top`` fraction that the model puts into its
    own best ``k`` fraction (recall@10 % of the true top 10 % is what a GA
    batch picked from the model's favourites can hope to catch);
``best_of_top(k)``
    the measured value of the best config among the model's top ``k``
    configs, as a fraction of the best measured one (k=1: the true quality of
    the predicted best).

A correlation is 0 where it is undefined (constant predictions carry no
ranking). :class:`PredictionLog` records, round by round, what a model
predicted for configs *before* they were measured and what they measured,
so a run's history shows whether the model helped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

BATCH_RECALL_MIN = 10  # a logged round's recall needs a top 10 % of at least one config
QUALITY_METRICS = ("spearman", "kendall", "top_quartile_spearman", "recall10", "recall1", "best_of_1",
                   "best_of_10pct")


def _arrays(predicted: Sequence[float], measured: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(predicted, dtype=np.float64)
    m = np.asarray([v if v is not None and math.isfinite(v) and v > 0 else 0.0 for v in measured],
                   dtype=np.float64)
    if p.shape != m.shape or p.ndim != 1:
        raise ValueError(f"predicted and measured must be 1-D and of the same length, got {p.shape} and {m.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("predicted scores must be finite")
    return p, m


def _correlation(kind: str, p: np.ndarray, m: np.ndarray) -> float:
    from scipy.stats import kendalltau, spearmanr

    if len(p) < 2 or np.ptp(p) == 0 or np.ptp(m) == 0:
        return 0.0
    value = (spearmanr(p, m).statistic if kind == "spearman" else kendalltau(p, m).statistic)
    return float(value) if np.isfinite(value) else 0.0


def spearman(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Spearman's rank correlation (0 if either side is constant)."""
    return _correlation("spearman", *_arrays(predicted, measured))


def kendall(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Kendall's tau-b (0 if either side is constant)."""
    return _correlation("kendall", *_arrays(predicted, measured))


def _count(fraction: float, n: int) -> int:
    if not 0 < fraction <= 1:
        raise ValueError(f"a fraction must be in (0, 1], got {fraction}")
    return max(1, math.ceil(fraction * n - 1e-9))


def _top(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` highest values (ties: the earlier index first)."""
    return np.argsort(-values, kind="stable")[:count]


def top_quartile_spearman(predicted: Sequence[float], measured: Sequence[float], quantile: float = 0.25) -> float:
    """Spearman among the configs in the measured top ``quantile`` (at least 2 of them)."""
    p, m = _arrays(predicted, measured)
    keep = _top(m, max(2, _count(quantile, len(m))))
    return _correlation("spearman", p[keep], m[keep])


def recall(predicted: Sequence[float], measured: Sequence[float], top: float = 0.1, k: float = 0.1) -> float:
    """Share of the measured best ``top`` fraction found among the ``k`` fraction predicted best."""
    p, m = _arrays(predicted, measured)
    truth = set(_top(m, _count(top, len(m))).tolist())
    picked = set(_top(p, _count(k, len(p))).tolist())
    return len(truth & picked) / len(truth)


def best_of_top(predicted: Sequence[float], measured: Sequence[float], k: int | float = 1) -> float:
    """Best measured value among the ``k`` predicted best (an int: a count; a float: a fraction) / best measured."""
    p, m = _arrays(predicted, measured)
    best = m.max() if len(m) else 0.0
    if best <= 0:
        return 0.0
    count = int(k) if isinstance(k, (int, np.integer)) and not isinstance(k, bool) else _count(float(k), len(p))
    if count < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return float(m[_top(p, count)].max() / best)


def quality(predicted: Sequence[float], measured: Sequence[float]) -> dict[str, float]:
    """Every metric of :data:`QUALITY_METRICS` for one set of predictions."""
    return {
        "spearman": spearman(predicted, measured),
        "kendall": kendall(predicted, measured),
        "top_quartile_spearman": top_quartile_spearman(predicted, measured),
        "recall10": recall(predicted, measured, top=0.1, k=0.1),
        "recall1": recall(predicted, measured, top=0.01, k=0.1),
        "best_of_1": best_of_top(predicted, measured, 1),
        "best_of_10pct": best_of_top(predicted, measured, 0.1),
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else float(f"{value:.{digits}g}")


class PredictionLog:
    """Per round of a search: what the model predicted for the configs it sent to be measured, and what they measured.

    Each round is one compact dict (the trial the round started at, how many
    configs, Spearman between prediction and measurement, the measured value
    of the config the model liked best against the round's best, the mean
    predicted score and the mean measured GFLOP/s, with at least
    :data:`BATCH_RECALL_MIN` configs the recall of the round's best 10 % among
    the 10 % the model predicted best, the best before the round, and whatever
    facts the agent adds). The predictions are
    made before the configs are measured, so every round is a held-out test of
    the model as it was at that point of the run.
    """

    def __init__(self) -> None:
        self.rounds: list[dict[str, Any]] = []

    def add(self, trial: int, predicted: Sequence[float], measured: Sequence[float], best_before: float,
            **facts: Any) -> dict[str, Any]:
        """Log one round: ``trial`` its first trial (0-based), ``best_before`` the best GFLOP/s before it."""
        p, m = _arrays(predicted, measured)
        entry: dict[str, Any] = {"trial": int(trial), "n": int(len(p))}
        if len(p):
            entry["rho"] = _round(_correlation("spearman", p, m))
            entry["pick"] = _round(float(m[_top(p, 1)[0]]))  # measured GFLOP/s of the predicted best
            entry["best"] = _round(float(m.max()))
            entry["score"] = _round(float(p.mean()))  # what the model predicted for the batch, on average
            entry["mean"] = _round(float(m.mean()))  # and what the batch measured
            if len(p) >= BATCH_RECALL_MIN:
                entry["recall"] = _round(recall(p, m))  # the batch's best 10 % among the 10 % it predicted best
        entry["before"] = _round(best_before)
        entry.update({k: (_round(v) if isinstance(v, float) else v) for k, v in facts.items()})
        self.rounds.append(entry)
        return entry

    def summary(self) -> dict[str, Any]:
        """Mean Spearman over rounds of >= 3 configs, and how many rounds improved on the best so far."""
        rhos = [r["rho"] for r in self.rounds if r["n"] >= 3 and r.get("rho") is not None]
        improved = sum(1 for r in self.rounds if r.get("best") is not None and r["best"] > r["before"])
        return {"rounds": len(self.rounds), "mean_rho": _round(float(np.mean(rhos))) if rhos else None,
                "improving_rounds": improved}

    def to_json(self) -> dict[str, Any]:
        return {**self.summary(), "log": self.rounds}
