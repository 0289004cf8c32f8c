"""An XGBoost cost model over config features, retrained as measurements arrive (Ansor's, seed 000).

The model maps a feature vector of a config to a score that should rank
configs like their measured throughput. It is what the GA (``ga``) and DGD
(``dgd``) agents consult before they spend measurements.

Training follows Ansor's ``XGBModel`` (TVM v0.9, the model seed 000 keeps):

* target: each config's GFLOP/s divided by the best GFLOP/s in the training
  data, so that targets lie in [0, 1] whatever the layer (rank-friendly);
  a config that failed (build error, crash, timeout, wrong result) gets 0,
  the throughput Ansor assigns to a failed measurement;
* regression with squared error, ``max_depth=10, eta=0.2, gamma=0.001,
  min_child_weight=0``, up to ``num_boost_round`` rounds with early stopping
  after 50 rounds without improvement of the RMSE on the training data;
* the model is rebuilt from scratch on all data at every ``fit`` / ``update``.

Ansor sums per-statement predictions ("pack-sum"); a tiles config describes
one statement, so one prediction per config is that sum.

Training is deterministic: a fixed small thread count (``nthread=1`` by
default), the ``hist`` tree method (its quantile sketch is exact for data
this small) and no row or column subsampling, so the seed only matters if
subsampling options are passed through ``xgb_params``.

Two feature sets (``features=``):

``"af"``
    the analytical features of the space (:meth:`Space.features`; for the
    ``tiles`` space :mod:`tensorgym.features`: operational intensities at L1
    and L2, cache fits, register reuse, ILP, register pressure, lane
    utilisation, parallel balance, ...), with ``log2(1 + x)`` applied to the
    unbounded ones (intensities, ratios, counts). This is seed 000's
    "Ansor-AF" input, re-derived for a CPU.

``"generic"``
    schedule features that know the loop nest but not the machine, in the
    spirit of Ansor's per-statement features (loop extents per annotation,
    vector length, unroll step, parallel extent); see
    :func:`generic_features` for the list. This is the "Ansor" / "Ansor-DS"
    input (Ansor's own 164 features need its TE lowering, which TVM 0.27
    no longer has).

Trees split on thresholds, so a monotone transform of one feature (such as
the logs) changes nothing for XGBoost; the logs are there for readability
and for anyone who plots the features. Products of several tile sizes, on the
other hand, are new information for a tree, hence the per-level products.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np

from ..spaces.base import Config, Space

log = logging.getLogger(__name__)

FEATURE_SETS = ("generic", "af")

# Ansor's XGBModel parameters (TVM v0.9 python/tvm/auto_scheduler/cost_model/xgb_model.py).
ANSOR_XGB_PARAMS: dict[str, Any] = {
    "max_depth": 10,
    "gamma": 0.001,
    "min_child_weight": 0.0,
    "eta": 0.2,
}

# Analytical features of the tiles space that are unbounded (intensities, ratios, counts):
# they are fed as log2(1 + x). The others are fractions or flags in [0, 1].
_LOG_FEATURES = frozenset({"oi_l2", "oi_l1", "l2_fit", "l1_fit", "reg_reuse", "ilp", "reg_pressure"})

_FEATURE_CACHE_LIMIT = 200_000  # configs whose features are kept (GA populations revisit many)


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0


# -- generic features ------------------------------------------------------------------
def _is_tiles(space: Space) -> bool:
    return all(hasattr(space, attr) for attr in ("loops", "levels", "unroll_choices")) and space.name == "tiles"


def generic_feature_names(space: Space) -> tuple[str, ...]:
    """Names of :func:`generic_features` for ``space`` (a ``tiles`` space), in order."""
    if not _is_tiles(space):
        raise ValueError(f"generic features are defined for the tiles space, not {space.name!r}; "
                         f"use features='af'")
    names = []
    for lp in space.loops:
        if lp.extent > 1:
            names += [f"log2_{lp.name}.{level}" for level in range(space.levels[lp.name])]
    names += ["log2_S0_parallel", "log2_S1", "log2_S2", "log2_S3", "log2_R0", "log2_R1",
              "log2_S2S3", "log2_S1S2S3", "log2_R1S3", "log2_S2R1S3",
              "log2_vector_len", "log2_unroll", "cache_write"]
    return tuple(names)


def generic_features(space: Space, config: Config) -> np.ndarray:
    """Machine-independent schedule features of a ``tiles`` config.

    In order (all logs base 2):

    * ``log2_{loop}.{level}``: every tile size of every loop of extent > 1,
      outermost level first (4 levels for spatial loops, 2 for reductions);
    * ``log2_S0_parallel`` ... ``log2_S3``: the product over spatial loops of
      each level, i.e. the trip count of each spatial band of the ``SSRSRS``
      nest; ``S0`` is the extent of the fused parallel loop;
    * ``log2_R0``, ``log2_R1``: the same for the two reduction bands;
    * ``log2_S2S3``, ``log2_S1S2S3``: spatial iterations below R0 and below
      S0 (the sizes of the inner blocks);
    * ``log2_R1S3``, ``log2_S2R1S3``: iterations of the innermost loop bodies
      (R1 x S3, and S2 x R1 x S3);
    * ``log2_vector_len``: the innermost tile of the last spatial loop (the
      vectorised loop);
    * ``log2_unroll``: ``log2(1 + auto_unroll_max_step)``; ``cache_write``: 0/1.
    """
    if not _is_tiles(space):
        raise ValueError(f"generic features are defined for the tiles space, not {space.name!r}; "
                         f"use features='af'")
    out: list[float] = []
    spatial = [lp.name for lp in space.workload.spatial_loops]
    reduction = [lp.name for lp in space.workload.reduction_loops]
    for lp in space.loops:
        if lp.extent > 1:
            out += [_log2(t) for t in config[lp.name]]
    s = [prod(config[n][level] for n in spatial) for level in range(4)]
    r = [prod(config[n][level] for n in reduction) for level in range(2)]
    out += [_log2(v) for v in s]
    out += [_log2(v) for v in r]
    out += [_log2(s[2] * s[3]), _log2(s[1] * s[2] * s[3]), _log2(r[1] * s[3]), _log2(s[2] * r[1] * s[3])]
    out += [_log2(config[spatial[-1]][3]), _log2(1 + config["unroll"]), float(config["cache_write"])]
    return np.asarray(out, dtype=np.float64)


def analytical_features(space: Space, config: Config) -> np.ndarray:
    """``space.features(config)`` with ``log2(1 + x)`` on the unbounded features (see the module docs)."""
    raw = np.asarray(space.features(config), dtype=np.float64)
    return np.array([math.log2(1.0 + v) if n in _LOG_FEATURES and v >= 0 else v
                     for n, v in zip(space.feature_names, raw)])


def normalised_targets(gflops: Sequence[float | None]) -> np.ndarray:
    """Ansor's regression target: GFLOP/s / best GFLOP/s (failed or missing: 0)."""
    values = np.array([g if g is not None and math.isfinite(g) and g > 0 else 0.0 for g in gflops], dtype=np.float64)
    best = values.max() if len(values) else 0.0
    return values / best if best > 0 else values


# -- the model ---------------------------------------------------------------------------
class CostModel:
    """XGBoost regression from config features to normalised throughput (see the module docs).

    Args:
        space: the space whose configs are scored.
        features: ``"generic"`` (Ansor) or ``"af"`` (analytical features, seed 000's Ansor-AF).
        seed: XGBoost's seed (only matters with subsampling options).
        nthread: XGBoost threads; small and fixed so that training is reproducible and does
            not compete with measurements.
        num_boost_round: the most boosting rounds (Ansor: 10000; early stopping ends far sooner).
        early_stopping_rounds: stop after this many rounds without a better training RMSE (Ansor: 50).
        xgb_params: overrides of :data:`ANSOR_XGB_PARAMS` and other XGBoost parameters.

    Example::

        model = CostModel(space, features="af")
        model.fit(configs, gflops)          # gflops: float, or None for a failed config
        scores = model.predict(candidates)  # higher is better
    """

    def __init__(self, space: Space, features: str = "generic", *, seed: int = 0, nthread: int = 1,
                 num_boost_round: int = 10000, early_stopping_rounds: int = 50,
                 xgb_params: dict[str, Any] | None = None):
        if features not in FEATURE_SETS:
            raise ValueError(f"features must be one of {FEATURE_SETS}, got {features!r}")
        if features == "af" and not space.feature_names:
            raise ValueError(f"the {space.name!r} space defines no analytical features; use features='generic'")
        if features == "generic":
            generic_feature_names(space)  # raises a clear error for other spaces
        if nthread < 1:
            raise ValueError(f"nthread must be >= 1, got {nthread}")
        if num_boost_round < 1 or early_stopping_rounds < 1:
            raise ValueError("num_boost_round and early_stopping_rounds must be >= 1")
        self.space = space
        self.features = features
        self.seed = int(seed)
        self.nthread = int(nthread)
        self.num_boost_round = int(num_boost_round)
        self.early_stopping_rounds = int(early_stopping_rounds)
        self.params: dict[str, Any] = {
            **ANSOR_XGB_PARAMS,
            "objective": "reg:squarederror",
            "tree_method": "hist",
            "nthread": self.nthread,
            "seed": self.seed,
            "verbosity": 0,
            **(xgb_params or {}),
        }
        self._booster = None
        self._best_iteration = 0
        self._configs: list[Config] = []
        self._gflops: list[float | None] = []
        self._index: dict[Config, int] = {}
        self._cache: dict[Config, np.ndarray] = {}
        self._featurize_one = generic_features if features == "generic" else analytical_features
        self.fits = 0  # how many times the booster was trained

    # -- features -------------------------------------------------------------------
    @property
    def feature_names(self) -> tuple[str, ...]:
        if self.features == "generic":
            return generic_feature_names(self.space)
        return tuple(self.space.feature_names)

    def featurize(self, configs: Sequence[Config]) -> np.ndarray:
        """The feature matrix (one row per config); rows are cached per config."""
        if len(self._cache) > _FEATURE_CACHE_LIMIT:
            self._cache.clear()
        rows = []
        for config in configs:
            row = self._cache.get(config)
            if row is None:
                row = self._cache[config] = self._featurize_one(self.space, config)
            rows.append(row)
        if not rows:
            return np.zeros((0, len(self.feature_names)))
        return np.vstack(rows)

    # -- training -----------------------------------------------------------------------
    @property
    def num_samples(self) -> int:
        """Configs in the training data."""
        return len(self._configs)

    def fit(self, configs: Sequence[Config], gflops: Sequence[float | None]) -> "CostModel":
        """Train on exactly these measurements (GFLOP/s; None, 0 or NaN for a failed config)."""
        self._configs, self._gflops, self._index = [], [], {}
        return self.update(configs, gflops)

    def update(self, configs: Sequence[Config], gflops: Sequence[float | None]) -> "CostModel":
        """Add measurements (a config seen before takes its new value) and retrain on all data."""
        if len(configs) != len(gflops):
            raise ValueError(f"got {len(configs)} configs but {len(gflops)} GFLOP/s values")
        for config, value in zip(configs, gflops):
            if config in self._index:
                self._gflops[self._index[config]] = value
            else:
                self._index[config] = len(self._configs)
                self._configs.append(config)
                self._gflops.append(value)
        self._train()
        return self

    def _train(self) -> None:
        import xgboost as xgb

        if not self._configs:
            self._booster = None
            return
        x = self.featurize(self._configs)
        y = normalised_targets(self._gflops)
        dtrain = xgb.DMatrix(x, label=y)
        self._booster = xgb.train(
            self.params, dtrain, num_boost_round=self.num_boost_round, evals=[(dtrain, "tr")],
            early_stopping_rounds=self.early_stopping_rounds, verbose_eval=False,
        )
        self._best_iteration = int(getattr(self._booster, "best_iteration", self.num_boost_round - 1))
        self.fits += 1
        log.debug("cost model (%s) trained on %d configs: %d rounds", self.features, len(y), self._best_iteration + 1)

    # -- prediction ---------------------------------------------------------------------
    def predict(self, configs: Sequence[Config]) -> np.ndarray:
        """Scores (predicted throughput / best measured throughput; higher is better)."""
        if self._booster is None:
            raise RuntimeError("the cost model has no training data yet: call fit() first")
        if len(configs) == 0:
            return np.zeros(0)
        import xgboost as xgb

        data = xgb.DMatrix(self.featurize(configs))
        return self._booster.predict(data, iteration_range=(0, self._best_iteration + 1)).astype(np.float64)

    def kendall_tau(self, configs: Sequence[Config], gflops: Sequence[float | None]) -> float:
        """Kendall's tau between predictions and measured GFLOP/s (failed: 0) of ``configs``."""
        from scipy.stats import kendalltau

        predicted = self.predict(configs)
        measured = normalised_targets(gflops)
        tau = kendalltau(predicted, measured).statistic
        return float(tau) if np.isfinite(tau) else 0.0


def holdout_kendall_tau(space: Space, configs: Sequence[Config], gflops: Sequence[float | None], *,
                        features: str = "generic", train_fraction: float = 0.7, seed: int = 0,
                        **model_options: Any) -> float:
    """Train a :class:`CostModel` on a random ``train_fraction`` of the data, return its tau on the rest.

    A model that ranks better than chance has tau > 0.
    """
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    n = len(configs)
    if n != len(gflops):
        raise ValueError(f"got {n} configs but {len(gflops)} GFLOP/s values")
    n_train = int(round(train_fraction * n))
    if n_train < 1 or n - n_train < 2:
        raise ValueError(f"{n} measurements are too few for a held-out split")
    order = np.random.default_rng(seed).permutation(n)
    train, test = order[:n_train], order[n_train:]
    model = CostModel(space, features, seed=seed, **model_options)
    model.fit([configs[i] for i in train], [gflops[i] for i in train])
    return model.kendall_tau([configs[i] for i in test], [gflops[i] for i in test])
