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

Two feature sets (``features=``), both provided by the space:

``"af"``
    the space's analytical features on their learning scale
    (:meth:`Space.scaled_features <tensorgym.spaces.Space.scaled_features>`;
    for the ``tiles`` space :mod:`tensorgym.spaces.tiles.features`:
    operational intensities at L1 and L2, cache fits, register reuse, ILP,
    register pressure, lane utilisation, parallel balance, ...). This is seed
    000's "Ansor-AF" input, re-derived for a CPU.

``"generic"``
    machine-independent schedule features of the loop nest
    (:meth:`Space.generic_features <tensorgym.spaces.Space.generic_features>`),
    the "Ansor" / "Ansor-DS" input.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.spaces.base import Space, SpaceError

log = logging.getLogger(__name__)

FEATURE_SETS = ("generic", "af")
_FEATURE_CACHE_LIMIT = 200_000  # configs whose features are kept (GA populations revisit many)

# Ansor's XGBModel parameters (TVM v0.9 python/tvm/auto_scheduler/cost_model/xgb_model.py).
ANSOR_XGB_PARAMS: dict[str, Any] = {
    "max_depth": 10,
    "gamma": 0.001,
    "min_child_weight": 0.0,
    "eta": 0.2,
}

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
            raise SpaceError(f"the {space.name!r} space defines no analytical features; use features='generic'")
        if features == "generic" and not space.generic_feature_names:
            raise SpaceError(f"the {space.name!r} space defines no generic features; use features='af'")
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
        self._featurize_one = space.generic_features if features == "generic" else space.scaled_features
        self.fits = 0  # how many times the booster was trained

    # -- features -------------------------------------------------------------------
    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(self.space.generic_feature_names if self.features == "generic" else self.space.feature_names)

    def featurize(self, configs: Sequence[Config]) -> np.ndarray:
        """The feature matrix (one row per config); rows are cached per config."""
        if len(self._cache) > _FEATURE_CACHE_LIMIT:
            self._cache.clear()
        rows = []
        for config in configs:
            row = self._cache.get(config)
            if row is None:
                row = self._cache[config] = self._featurize_one(config)
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


def check_model_options(options: Any) -> dict[str, Any]:
    """``model_options`` of an agent: keyword arguments of :class:`CostModel` (None: none)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise InvalidTypeError(f"model_options is a dict of CostModel options, got {type(options).__name__}")
    accepted = [p for p in inspect.signature(CostModel).parameters if p not in ("space", "features", "seed")]
    unknown = sorted(map(str, set(options) - set(accepted)))
    if unknown:
        raise InvalidArgumentError(f"model_options: the cost model takes no option {', '.join(unknown)}; "
                                   f"its options: {', '.join(accepted)}")
    return dict(options)
