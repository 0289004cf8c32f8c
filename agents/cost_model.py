"""Cost models that rank configs for the GA and DGD agents: XGBoost retrained as measurements arrive, and random scores.

A cost model maps a config to a score that should order configs like their
measured throughput (higher is better). The GA (``ga``) and DGD (``dgd``)
agents consult one before they spend measurements; :class:`RandomModel`, the
ablation, gives the same agents uniform random scores instead, so that the
difference between the two is what the learning contributes.

:class:`CostModel` defaults to Ansor's ``XGBModel`` (TVM v0.9, the model seed
000 keeps, re-read line by line):

* target: each config's GFLOP/s divided by the best GFLOP/s in the training
  data, in [0, 1] whatever the layer; a config that failed (build error,
  crash, timeout, wrong result) gets 0, the throughput Ansor assigns to a
  failed measurement;
* each sample is **weighted by that normalised throughput** (Ansor's
  ``pack_sum_xgbmatrix(..., weights=normalized_throughputs)``): the squared
  error of a config at 90 % of the best counts nine times that of one at
  10 %, and failed configs carry no weight, so the trees spend their
  splits on telling good configs apart;
* squared error with ``max_depth=10, eta=0.2, gamma=0.001,
  min_child_weight=0``, up to ``num_boost_round`` rounds with early stopping
  after 50 rounds without improvement of the (unweighted) RMSE on the
  training data;
* the model is rebuilt from scratch on all data at every ``fit`` / ``update``.

Ansor sums per-statement predictions ("pack-sum"); a tiles config describes
one statement, so one prediction per config is that sum. Ansor checks its
early-stopping metric every other round; here every round (the stop comes at
most one round apart). Like Ansor, predictions use every tree trained,
including the rounds after the best one that early stopping waited through.

Options, each one change from Ansor's training (``CostModel(...)``, or an
agent's ``model_options``), all measured by the offline evaluation
(``bench/bench_cost_model.py``):

``objective="pairwise"`` / ``"ndcg"``
    XGBoost's learning-to-rank objectives (``rank:pairwise``; LambdaMART
    ``rank:ndcg`` with linear gains) over the whole training set as one query:
    they learn the order, not the values; early stopping watches the NDCG of
    the training data;
``target="log"``
    ``log2`` of the normalised throughput, floored at 1/64 of the best and
    mapped to [0, 1] (failed: 0): ratios matter, not differences. Predictions
    are mapped back to the throughput scale, so scores keep their meaning
    (DGD's 0.6 x threshold compares them as throughputs);
``target="rank"``
    the normalised rank in the training data (failed: 0);
``weights="none"``
    every sample counts alike;
``prior="draft"``
    boost from the analytical draft of :mod:`.draft`: each config's training
    and prediction start at its draft, the trees learn the correction.

Named set-ups (:data:`SETUPS`, ``setup=``, and the agents' ``model=``):
``"ansor"`` (the default here: Ansor's training above), ``"log-shallow"``
(log target, no weights, ``max_depth=4``: on the development data of R5, M3
and Y10, 384-512 random configs each, its held-out Spearman was higher than
``"ansor"``'s at every training size from 32 to 256 and its recall of the
true top 10 % at most sizes; it is what the GA and DGD use by default, with
``features="both"``), ``"ansor-shallow"`` (Ansor's target and weights with
``max_depth=4``: the agents' opt-in, with ``features="all"``, see below) and ``"draft"``
(``"log-shallow"`` with ``prior="draft"``: better than it on R5, not on M3
and Y10, where the draft alone ranks poorly).

On the shipped landscapes of this CPU (every config measured, so the true
top 10 % is known; ``bench/bench_cost_model_landscape.py``), trained on 128
random configs and scored on all the others, ``"ansor-shallow"`` with
``features="all"`` recalls more of the true top 10 % than ``"log-shallow"``
with ``"both"`` on every layer (R5 0.49 against 0.42, C7 0.56 / 0.54, M3
0.44 / 0.40, Y9 0.51 / 0.41), and at no layer and no training size from 32
to 256 less beyond the 95 % intervals; its Spearman over the
whole space is 0.00-0.09 lower (most with 32 configs, and on Y9), inside the
true top quartile it is higher. The throughput scale of the target (a log
target spends as much on the slow configs as on the fast) and, on R5, the
throughput weights put the trees' splits among the good configs, which is what
recall asks; the code features (``"all"``) tell apart configs whose ``unroll``
value unrolls different loops (M3 and Y9). Neither reaches the issue's 0.6 at
128 configs: the same
model needs 256 (Y9), about 1,000 (R5, C7) or more than 2,000 (M3), and two
timings of the same kernel differ by 3-11 % in the top quartile. In the
search the better recall shows little: over 20 seeds of 512 trials on the
four layers, the GA's and DGD's mean best with it is 0.0-0.6 % higher at 128
to 512 trials (geometric mean over the layers), beyond the paired 95 %
intervals only for DGD on Y9 at 256 and 512 trials (+1.2 % and +1.3 %);
DGD's runs take about 1.4 times as long, the GA's about the same
(``bench/reports/landscapes/cost_model_search.txt``). So it stays opt-in.

Training is deterministic: a fixed small thread count (``nthread=1`` by
default), the ``hist`` tree method and no row or column subsampling, so the
seed only matters if subsampling options are passed through ``xgb_params``.

Four feature sets (``features=``), all provided by the space:

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

``"both"``
    the two side by side.

``"all"``
    every feature the space has: the two above and, for a CPU ``tiles`` space, the features of the
    code it compiles to (:mod:`.code_features`: which loops TVM's auto-unroll unrolls, which the
    ``unroll`` knob alone does not say). In a space without analytical or code features, what it has.
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

from .code_features import CODE_FEATURE_NAMES, code_features, has_code_features

log = logging.getLogger(__name__)

FEATURE_SETS = ("generic", "af", "both", "all")
OBJECTIVES = ("regression", "pairwise", "ndcg")
TARGETS = ("normalised", "log", "rank")
WEIGHTS = ("throughput", "none")
PRIORS = ("none", "draft")
_FEATURE_CACHE_LIMIT = 200_000  # configs whose features are kept (GA populations revisit many)
LOG_TARGET_FLOOR = 1.0 / 64  # target="log": throughputs below 1/64 of the best all map to 0

# Ansor's XGBModel parameters (TVM v0.9 python/tvm/auto_scheduler/cost_model/xgb_model.py).
ANSOR_XGB_PARAMS: dict[str, Any] = {
    "max_depth": 10,
    "gamma": 0.001,
    "min_child_weight": 0.0,
    "eta": 0.2,
}


# Named training set-ups (``CostModel(setup=...)``); explicit options override them.
SETUPS: dict[str, dict[str, Any]] = {
    # Ansor's XGBModel, as TVM v0.9 trains it.
    "ansor": {"objective": "regression", "target": "normalised", "weights": "throughput", "prior": "none",
              "xgb_params": {}},
    # Log throughput, every sample alike, shallower trees: what the offline evaluation found to rank better.
    "log-shallow": {"objective": "regression", "target": "log", "weights": "none", "prior": "none",
                    "xgb_params": {"max_depth": 4}},
    # The same, boosted from the analytical draft (agents/draft.py).
    "draft": {"objective": "regression", "target": "log", "weights": "none", "prior": "draft",
              "xgb_params": {"max_depth": 4}},
    # Ansor's target and throughput weights with trees of depth 4: what recalls the true top 10 % of the
    # shipped landscapes best (bench/bench_cost_model_landscape.py).
    "ansor-shallow": {"objective": "regression", "target": "normalised", "weights": "throughput", "prior": "none",
                      "xgb_params": {"max_depth": 4}},
}
MODELS = (*SETUPS, "random")  # what the agents' ``model=`` option accepts


def normalised_targets(gflops: Sequence[float | None]) -> np.ndarray:
    """Ansor's regression target: GFLOP/s / best GFLOP/s (failed or missing: 0)."""
    values = np.array([g if g is not None and math.isfinite(g) and g > 0 else 0.0 for g in gflops], dtype=np.float64)
    best = values.max() if len(values) else 0.0
    return values / best if best > 0 else values


def training_targets(gflops: Sequence[float | None], target: str = "normalised") -> np.ndarray:
    """The labels a model trains on (see the module docs): all in [0, 1], 1 for the best, 0 for failures."""
    y = normalised_targets(gflops)
    if target == "normalised":
        return y
    if target == "log":
        floor = math.log2(LOG_TARGET_FLOOR)
        with np.errstate(divide="ignore"):
            logged = np.where(y > 0, np.log2(np.maximum(y, 1e-300)), floor)
        return np.clip((logged - floor) / -floor, 0.0, 1.0)
    if target == "rank":
        from scipy.stats import rankdata

        ok = y > 0
        out = np.zeros_like(y)
        if ok.any():
            out[ok] = rankdata(y[ok]) / ok.sum()
        return out
    raise ValueError(f"target must be one of {TARGETS}, got {target!r}")


class Featurizer:
    """A space's feature vectors of one set (``generic``, ``af`` or ``both``), cached per config."""

    def __init__(self, space: Space, features: str):
        if features not in FEATURE_SETS:
            raise ValueError(f"features must be one of {FEATURE_SETS}, got {features!r}")
        if features in ("af", "both") and not space.feature_names:
            raise SpaceError(f"the {space.name!r} space defines no analytical features; use features='generic'")
        if features in ("generic", "both") and not space.generic_feature_names:
            raise SpaceError(f"the {space.name!r} space defines no generic features; use features='af'")
        self.space = space
        self.features = features
        self._cache: dict[Config, np.ndarray] = {}
        self._parts = self._blocks(space, features)
        if not self._parts:
            raise SpaceError(f"the {space.name!r} space defines no features")

    @staticmethod
    def _blocks(space: Space, features: str) -> tuple[str, ...]:
        """The blocks of features, in order: ``generic``, ``af`` (the space's analytical ones), ``code``."""
        if features != "all":
            return {"generic": ("generic",), "af": ("af",), "both": ("generic", "af")}[features]
        return tuple(block for block, present in (("generic", bool(space.generic_feature_names)),
                                                  ("af", bool(space.feature_names)),
                                                  ("code", has_code_features(space))) if present)

    @property
    def names(self) -> tuple[str, ...]:
        names = {"generic": tuple(self.space.generic_feature_names), "af": tuple(self.space.feature_names),
                 "code": CODE_FEATURE_NAMES}
        return tuple(name for block in self._parts for name in names[block])

    def _block(self, block: str, config: Config) -> np.ndarray:
        if block == "generic":
            return self.space.generic_features(config)
        if block == "af":
            return self.space.scaled_features(config)
        return code_features(self.space, config)

    def row(self, config: Config) -> np.ndarray:
        row = self._cache.get(config)
        if row is None:
            if len(self._cache) > _FEATURE_CACHE_LIMIT:
                self._cache.clear()
            parts = [self._block(block, config) for block in self._parts]
            row = parts[0] if len(parts) == 1 else np.concatenate(parts)
            self._cache[config] = row
        return row

    def matrix(self, configs: Sequence[Config]) -> np.ndarray:
        """The feature matrix (one row per config)."""
        if len(configs) == 0:
            return np.zeros((0, len(self.names)))
        return np.vstack([self.row(c) for c in configs])


class _TrainingData:
    """The measurements a model learns from: configs in first-seen order, a re-measured config keeps its slot."""

    def __init__(self) -> None:
        self.configs: list[Config] = []
        self.gflops: list[float | None] = []
        self._index: dict[Config, int] = {}

    def clear(self) -> None:
        self.configs, self.gflops, self._index = [], [], {}

    def add(self, configs: Sequence[Config], gflops: Sequence[float | None]) -> None:
        if len(configs) != len(gflops):
            raise ValueError(f"got {len(configs)} configs but {len(gflops)} GFLOP/s values")
        for config, value in zip(configs, gflops):
            if config in self._index:
                self.gflops[self._index[config]] = value
            else:
                self._index[config] = len(self.configs)
                self.configs.append(config)
                self.gflops.append(value)


# -- the model ---------------------------------------------------------------------------
class CostModel:
    """XGBoost from config features to a score that ranks configs by throughput (see the module docs).

    Args:
        space: the space whose configs are scored.
        features: ``"generic"`` (Ansor), ``"af"`` (analytical features, seed 000's Ansor-AF), ``"both"`` or
            ``"all"`` (both and the code features, where the space has them).
        setup: a named set of the options below (:data:`SETUPS`): ``"ansor"`` (default), ``"ansor-shallow"``,
            ``"log-shallow"`` or ``"draft"``; options given explicitly override it.
        objective: ``"regression"`` (Ansor), ``"pairwise"`` or ``"ndcg"``.
        target: ``"normalised"`` (Ansor: GFLOP/s / best), ``"log"`` or ``"rank"``.
        weights: ``"throughput"`` (Ansor: samples weighted by their normalised throughput) or ``"none"``;
            the ranking objectives compare pairs and ignore it.
        prior: ``"none"`` (Ansor) or ``"draft"``: boost from the analytical draft of
            :mod:`.draft` (needs a space with the ``tiles`` analytical features).
        seed: XGBoost's seed (only matters with subsampling options).
        nthread: XGBoost threads; small and fixed so that training is reproducible and does
            not compete with measurements.
        num_boost_round: the most boosting rounds (Ansor: 10000; early stopping ends far sooner).
        early_stopping_rounds: stop after this many rounds without a better training metric (Ansor: 50).
        xgb_params: overrides of :data:`ANSOR_XGB_PARAMS` (after the set-up's) and other XGBoost parameters.

    Example::

        model = CostModel(space, features="af")
        model.fit(configs, gflops)          # gflops: float, or None for a failed config
        scores = model.predict(candidates)  # higher is better
    """

    def __init__(self, space: Space, features: str = "generic", *, setup: str = "ansor", objective: str | None = None,
                 target: str | None = None, weights: str | None = None, prior: str | None = None, seed: int = 0,
                 nthread: int = 1, num_boost_round: int = 10000, early_stopping_rounds: int = 50,
                 xgb_params: dict[str, Any] | None = None):
        if setup not in SETUPS:
            raise ValueError(f"setup must be one of {tuple(SETUPS)}, got {setup!r}")
        base = SETUPS[setup]
        objective = base["objective"] if objective is None else objective
        target = base["target"] if target is None else target
        weights = base["weights"] if weights is None else weights
        prior = base["prior"] if prior is None else prior
        for name, value, allowed in (("objective", objective, OBJECTIVES), ("target", target, TARGETS),
                                     ("weights", weights, WEIGHTS), ("prior", prior, PRIORS)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if nthread < 1:
            raise ValueError(f"nthread must be >= 1, got {nthread}")
        if num_boost_round < 1 or early_stopping_rounds < 1:
            raise ValueError("num_boost_round and early_stopping_rounds must be >= 1")
        self._featurizer = Featurizer(space, features)
        if prior == "draft":
            from .draft import check_space

            check_space(space)
        self.space = space
        self.features = features
        self.setup = setup
        self.objective = objective
        self.target = target
        self.weights = weights
        self.prior = prior
        self.seed = int(seed)
        self.nthread = int(nthread)
        self.num_boost_round = int(num_boost_round)
        self.early_stopping_rounds = int(early_stopping_rounds)
        xgb_objective = {"regression": "reg:squarederror", "pairwise": "rank:pairwise", "ndcg": "rank:ndcg"}
        self.params: dict[str, Any] = {
            **ANSOR_XGB_PARAMS,
            "objective": xgb_objective[objective],
            "tree_method": "hist",
            "nthread": self.nthread,
            "seed": self.seed,
            "verbosity": 0,
            **({"eval_metric": "ndcg", "ndcg_exp_gain": False} if objective != "regression" else {}),
            **base["xgb_params"],
            **(xgb_params or {}),
        }
        self._booster = None
        self._best_iteration = 0
        self._data = _TrainingData()
        self._drafts: dict[Config, float] = {}
        self.fits = 0  # how many times the booster was trained

    @property
    def name(self) -> str:
        return self.setup

    def describe(self) -> str:
        """The set-up in a few words, e.g. ``xgb af regression/normalised/throughput``."""
        weights = f"/{self.weights}" if self.objective == "regression" else ""
        prior = " + draft prior" if self.prior == "draft" else ""
        depth = self.params.get("max_depth")
        return f"xgb {self.features} {self.objective}/{self.target}{weights}{prior} depth {depth}"

    # -- the prior ------------------------------------------------------------------------
    def draft(self, configs: Sequence[Config]) -> np.ndarray | None:
        """The analytical draft of each config (a fraction of the peak), or None without ``prior="draft"``."""
        if self.prior != "draft":
            return None
        from .draft import draft

        missing = [c for c in dict.fromkeys(configs) if c not in self._drafts]
        if missing:
            if len(self._drafts) > _FEATURE_CACHE_LIMIT:
                self._drafts.clear()
            self._drafts.update(zip(missing, draft(self.space, missing)))
        return np.array([self._drafts[c] for c in configs])

    def _margin(self, draft: np.ndarray) -> np.ndarray:
        """The draft on the scale of the training target: each config's starting score."""
        if self.target == "normalised":
            return draft
        return training_targets(draft, "log") if len(draft) else draft  # log2 scale, floored like the target

    # -- features -------------------------------------------------------------------
    @property
    def feature_names(self) -> tuple[str, ...]:
        return self._featurizer.names

    def featurize(self, configs: Sequence[Config]) -> np.ndarray:
        """The feature matrix (one row per config); rows are cached per config."""
        return self._featurizer.matrix(configs)

    # -- training -----------------------------------------------------------------------
    @property
    def num_samples(self) -> int:
        """Configs in the training data."""
        return len(self._data.configs)

    def fit(self, configs: Sequence[Config], gflops: Sequence[float | None]) -> "CostModel":
        """Train on exactly these measurements (GFLOP/s; None, 0 or NaN for a failed config)."""
        if len(configs) != len(gflops):
            raise ValueError(f"got {len(configs)} configs but {len(gflops)} GFLOP/s values")
        self._data.clear()
        return self.update(configs, gflops)

    def update(self, configs: Sequence[Config], gflops: Sequence[float | None]) -> "CostModel":
        """Add measurements (a config seen before takes its new value) and retrain on all data."""
        self._data.add(configs, gflops)
        self._train()
        return self

    def _train(self) -> None:
        if not self._data.configs:
            self._booster = None
            return
        configs = self._data.configs
        self.train_matrix(self.featurize(configs), self._data.gflops, drafts=self.draft(configs))

    def train_matrix(self, x: np.ndarray, gflops: Sequence[float | None], groups: Sequence[int] | None = None,
                     drafts: np.ndarray | None = None, weights: np.ndarray | None = None) -> "CostModel":
        """Train on feature rows directly (what :meth:`fit` does after featurising).

        ``groups`` (one id per row) marks rows of different layers: targets and
        weights are normalised within each group (each layer's best is 1), and the
        ranking objectives rank within groups only. Used to train on other layers'
        data (transfer); the rows' columns must be this model's features.
        ``drafts``: the rows' analytical drafts, or any prior score on the throughput
        scale (needed with ``prior="draft"``).
        ``weights``: a weight per row, multiplying the set-up's (regression only: the
        ranking objectives weigh whole groups), e.g. a layer's own rows against other layers'.
        """
        import xgboost as xgb

        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or len(x) != len(gflops) or len(x) == 0:
            raise ValueError(f"need a non-empty 2-D feature matrix with one row per value; got shape {x.shape} "
                             f"and {len(gflops)} values")
        ids = np.zeros(len(x), dtype=np.int64) if groups is None else np.asarray(groups)
        if len(ids) != len(x):
            raise ValueError(f"got {len(ids)} group ids for {len(x)} rows")
        if self.prior == "draft" and (drafts is None or len(drafts) != len(x)):
            raise ValueError("a model with prior='draft' needs the draft of every training row")
        if weights is not None and len(weights) != len(x):
            raise ValueError(f"got {len(weights)} weights for {len(x)} rows")
        order = np.argsort(ids, kind="stable")  # XGBoost's query groups are runs of consecutive rows
        x, ids = x[order], ids[order]
        values = [gflops[i] for i in order]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1], True])
        y = np.concatenate([training_targets(values[a:b], self.target) for a, b in zip(starts[:-1], starts[1:])])
        dtrain = evals = xgb.DMatrix(x, label=y)
        if drafts is not None and self.prior == "draft":
            dtrain.set_base_margin(self._margin(np.asarray(drafts, dtype=np.float64)[order]))
        if self.objective != "regression":
            dtrain.set_group(np.diff(starts))
        else:
            weight = np.ones(len(y))
            if self.weights == "throughput":
                weight = np.concatenate([normalised_targets(values[a:b]) for a, b in zip(starts[:-1], starts[1:])])
                if weight.sum() <= 0:  # all failed: nothing to weight by, every sample counts alike
                    weight = np.ones(len(y))
            if weights is not None:
                weight = weight * np.asarray(weights, dtype=np.float64)[order]
            if not np.all(weight == 1.0):
                dtrain.set_weight(weight)
                evals = xgb.DMatrix(x, label=y, base_margin=dtrain.get_base_margin() if self.prior == "draft"
                                    else None)  # Ansor's early stopping watches the unweighted RMSE
        self._booster = xgb.train(
            self.params, dtrain, num_boost_round=self.num_boost_round, evals=[(evals, "tr")],
            early_stopping_rounds=self.early_stopping_rounds, verbose_eval=False,
        )
        self._best_iteration = int(getattr(self._booster, "best_iteration", self.num_boost_round - 1))
        self.fits += 1
        log.debug("cost model (%s) trained on %d rows: best round %d of %d", self.describe(), len(y),
                  self._best_iteration + 1, self._booster.num_boosted_rounds())
        return self

    # -- prediction ---------------------------------------------------------------------
    def predict(self, configs: Sequence[Config]) -> np.ndarray:
        """Scores, higher is better: with the regression objective and the ``normalised`` or ``log`` target,
        the predicted throughput / the best measured one; otherwise on the scale of the target or of the
        ranking objective."""
        if self._booster is None:
            raise RuntimeError("the cost model has no training data yet: call fit() first")
        if len(configs) == 0:
            return np.zeros(0)
        return self.predict_matrix(self.featurize(configs), self.draft(configs))

    def predict_matrix(self, x: np.ndarray, drafts: np.ndarray | None = None) -> np.ndarray:
        """Scores of feature rows (the columns of :attr:`feature_names`; ``drafts`` with ``prior="draft"``)."""
        import xgboost as xgb

        if self._booster is None:
            raise RuntimeError("the cost model has no training data yet: call fit() first")
        data = xgb.DMatrix(np.asarray(x, dtype=np.float64))
        if self.prior == "draft":
            if drafts is None or len(drafts) != data.num_row():
                raise ValueError("a model with prior='draft' needs the draft of every row")
            data.set_base_margin(self._margin(np.asarray(drafts, dtype=np.float64)))
        scores = self._booster.predict(data).astype(np.float64)  # every tree, as Ansor predicts
        if self.objective == "regression" and self.target == "log":
            # Back to the throughput scale (a monotone map: the order is unchanged), so that a score
            # means "predicted GFLOP/s / best measured" whatever the target, as DGD's 0.6 x threshold assumes.
            floor = math.log2(LOG_TARGET_FLOOR)
            scores = np.exp2(floor - floor * np.minimum(scores, 2.0))
        return scores

    def kendall_tau(self, configs: Sequence[Config], gflops: Sequence[float | None]) -> float:
        """Kendall's tau between predictions and measured GFLOP/s (failed: 0) of ``configs``."""
        from .model_quality import kendall

        return kendall(self.predict(configs), normalised_targets(gflops))


class RandomModel:
    """The ablation of :class:`CostModel`: the same interface, uniform random scores in [0, 1).

    An agent that consults it makes the same moves as with a learned model,
    but its choices among candidates are blind. The scores come from its own
    generator, seeded by ``seed``, so a run stays deterministic.
    """

    name = "random"

    def __init__(self, space: Space, features: str = "generic", *, seed: int = 0, **_ignored: Any):
        self.space = space
        self.features = features
        self._rng = np.random.default_rng(seed)
        self._data = _TrainingData()
        self._trained = False
        self.fits = 0

    def describe(self) -> str:
        return "random scores"

    @property
    def num_samples(self) -> int:
        return len(self._data.configs)

    def fit(self, configs: Sequence[Config], gflops: Sequence[float | None]) -> "RandomModel":
        self._data.clear()
        return self.update(configs, gflops)

    def update(self, configs: Sequence[Config], gflops: Sequence[float | None]) -> "RandomModel":
        self._data.add(configs, gflops)
        self.fits += 1
        return self

    def train_matrix(self, x: np.ndarray, gflops: Sequence[float | None], groups: Sequence[int] | None = None,
                     drafts: np.ndarray | None = None, weights: np.ndarray | None = None) -> "RandomModel":
        self.fits += 1
        self._trained = True
        return self

    def predict(self, configs: Sequence[Config]) -> np.ndarray:
        if not self._data.configs and not self._trained:
            raise RuntimeError("the cost model has no training data yet: call fit() first")
        return self._rng.random(len(configs))

    def predict_matrix(self, x: np.ndarray, drafts: np.ndarray | None = None) -> np.ndarray:
        return self.predict([None] * len(x))  # type: ignore[list-item]


def make_model(kind: str, space: Space, features: str, *, seed: int, **options: Any) -> CostModel | RandomModel:
    """The model an agent's ``model=`` option names: a :class:`CostModel` set-up (:data:`SETUPS`) or ``"random"``."""
    if kind == "random":
        return RandomModel(space, features, seed=seed)
    if kind in SETUPS:
        return CostModel(space, features, setup=kind, seed=seed, **options)
    raise ValueError(f"model must be one of {MODELS}, got {kind!r}")


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
