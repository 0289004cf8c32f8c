"""Offline evaluation of cost models: the database as a dataset, held-out splits, transfer across layers.

A :class:`Dataset` is a list of measured configs of one layer. The usual
one, :func:`random_dataset`, holds the configs the ``random`` agent draws
with a given seed, read from a database: ``RandomAgent`` with seed ``s`` and
budget ``N`` measures exactly ``space.sample_many(default_rng(s), N)`` (it
draws its batches from one generator and excludes what it drew before), so
the random runs of a benchmark are the dataset, and a dataset can be grown
by running that agent with a larger budget (:func:`collect_random`).

:func:`evaluate` trains each model (:class:`ModelSpec`) on ``n`` configs and
scores it on configs it never saw, for every ``n`` of ``sizes`` and every
split: each split permutes the dataset once, holds out its last
``test_size`` configs, and trains on the first ``n`` of the rest, so within
a split the held-out set is the same for every model and every ``n``.
:func:`evaluate_transfer` trains on whole other layers (and, optionally,
the same ``n`` configs of the layer itself) and scores on the same held-out
sets. The metrics are :func:`tensorgym.agents.model_quality.quality`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.database import Database
from tensorgym.spaces.base import Space

from .cost_model import FEATURE_SETS, CostModel, Featurizer, RandomModel
from .cost_model import SETUPS as COST_MODEL_SETUPS
from .model_quality import QUALITY_METRICS, quality

log = logging.getLogger(__name__)

DEFAULT_SIZES = (16, 32, 64, 128, 256, 512)


@dataclass
class Dataset:
    """Measured configs of one layer (``gflops``: None for a config that failed)."""

    space: Space
    configs: list[Config]
    gflops: list[float | None]
    label: str = ""

    def __post_init__(self) -> None:
        if len(self.configs) != len(self.gflops):
            raise ValueError(f"got {len(self.configs)} configs but {len(self.gflops)} values")
        self.label = self.label or self.space.workload.label

    def __len__(self) -> int:
        return len(self.configs)

    @property
    def measured(self) -> np.ndarray:
        """GFLOP/s with failures as 0 (what the metrics compare predictions with)."""
        return np.array([g if g is not None and g > 0 else 0.0 for g in self.gflops])


def random_dataset(db: Database, space: Space, seeds: Iterable[int] = (0,), n: int = 512) -> Dataset:
    """The first ``n`` configs the random agent draws with each seed that ``db`` holds records of.

    Configs missing from the database are left out (a logged warning says how many).
    """
    wl, target = space.workload, space.target
    configs: list[Config] = []
    gflops: list[float | None] = []
    seen: set[Config] = set()
    missing = 0
    for seed in seeds:
        for config in space.sample_many(np.random.default_rng(seed), n):
            if config in seen:
                continue
            seen.add(config)
            record = db.get(wl.key, target.fingerprint, space.name, config)
            if record is None:
                missing += 1
                continue
            configs.append(config)
            gflops.append(record.gflops if record.ok else None)
    if missing:
        log.warning("%s: %d of the random configs are not in the database (collect them first)", wl.label, missing)
    return Dataset(space, configs, gflops)


def records_dataset(db: Database, space: Space) -> Dataset:
    """Every record of ``space``'s workload and target in ``db`` (whatever measured them)."""
    records = db.records(space.workload.key, space.target.fingerprint, space.name)
    return Dataset(space, [r.config for r in records], [r.gflops if r.ok else None for r in records])


def collect_random(env, seed: int, n: int, progress: bool = True):
    """Measure the random agent's first ``n`` configs for ``seed`` into ``env``'s database (resumes)."""
    from tensorgym.tuner import ProgressBarCallback

    from .random_search import RandomAgent

    return RandomAgent().tune(env, budget=n, seed=seed, callback=ProgressBarCallback() if progress else None)


# -- the models under test ------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    """A named model under test: a :class:`CostModel` with ``options``, ``"random"`` (chance) or ``"draft"``.

    ``kind="draft"`` is the analytical draft alone (:mod:`.draft`), which learns nothing.
    """

    name: str
    features: str = "generic"
    kind: str = "xgb"
    options: tuple[tuple[str, Any], ...] = ()

    def build(self, space: Space, seed: int) -> CostModel | RandomModel | None:
        if self.kind == "random":
            return RandomModel(space, self.features, seed=seed)
        if self.kind == "draft":
            return None
        return CostModel(space, self.features, seed=seed, **dict(self.options))

    @property
    def uses_draft(self) -> bool:
        """Whether the model reads the analytical draft (the draft alone, or a model boosted from it)."""
        if self.kind != "xgb":
            return self.kind == "draft"
        options = dict(self.options)
        prior = options.get("prior") or COST_MODEL_SETUPS[options.get("setup", "ansor")]["prior"]
        return prior == "draft"


# Training set-ups under test (name -> CostModel options): Ansor's XGBModel ("ansor"), one change at a time,
# and the other set-ups of the agents: "log-shallow" (log target, depth 4), "draft" (the same boosted from
# the analytical draft) and "ansor-shallow" (Ansor's target and weights, depth 4: the agents' opt-in).
SETUPS: dict[str, dict[str, Any]] = {
    "ansor": {"setup": "ansor"},
    "unweighted": {"setup": "ansor", "weights": "none"},
    "log": {"setup": "ansor", "target": "log", "weights": "none"},
    "rank": {"setup": "ansor", "target": "rank", "weights": "none"},
    "pairwise": {"setup": "ansor", "objective": "pairwise"},
    "ndcg": {"setup": "ansor", "objective": "ndcg"},
    "log-shallow": {"setup": "log-shallow"},
    "ansor+draft": {"setup": "ansor", "prior": "draft"},
    "draft": {"setup": "draft"},
    "ansor-shallow": {"setup": "ansor-shallow"},
}


def model_specs(setups: Sequence[str] = tuple(SETUPS), features: Sequence[str] = FEATURE_SETS,
                baselines: bool = True) -> list[ModelSpec]:
    """Every ``setup/features`` combination; with ``baselines``, the draft alone and ``random`` (chance)."""
    unknown = [s for s in setups if s not in SETUPS] + [f for f in features if f not in FEATURE_SETS]
    if unknown:
        raise ValueError(f"unknown set-ups or feature sets {unknown}; set-ups: {', '.join(SETUPS)}; "
                         f"feature sets: {', '.join(FEATURE_SETS)}")
    specs = [ModelSpec(f"{s}/{f}", f, "xgb", tuple(SETUPS[s].items())) for s in setups for f in features]
    if baselines:
        specs += [ModelSpec("draft only", "af", "draft"), ModelSpec("random", "generic", "random")]
    return specs


def drafts_of(dataset: Dataset) -> np.ndarray | None:
    """The analytical draft of every config of ``dataset`` (None if its space has no draft)."""
    from tensorgym.spaces.base import SpaceError

    from .draft import draft

    try:
        return draft(dataset.space, dataset.configs)
    except SpaceError:
        return None


# -- evaluation ---------------------------------------------------------------------------
@dataclass
class Split:
    """One permutation of a dataset: the held-out configs and the order training configs are taken in."""

    train: np.ndarray
    test: np.ndarray


def splits(n_configs: int, test_size: int, count: int, seed: int = 0) -> list[Split]:
    """``count`` random splits with ``test_size`` held-out configs each."""
    if not 0 < test_size < n_configs:
        raise ValueError(f"test_size must be in [1, {n_configs - 1}] for {n_configs} configs, got {test_size}")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        order = rng.permutation(n_configs)
        out.append(Split(train=order[:n_configs - test_size], test=order[n_configs - test_size:]))
    return out


def default_test_size(n_configs: int, sizes: Sequence[int]) -> int:
    """Hold out what the largest training size leaves, but at least 128 configs (and at most half)."""
    return max(min(128, n_configs // 2), n_configs - max(sizes))


@dataclass
class Evaluation:
    """Rows of metrics: one per (layer, model, n, split); :meth:`table` averages over splits."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def table(self) -> list[dict[str, Any]]:
        """Mean and standard deviation over splits per (layer, model, n)."""
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for row in self.rows:
            groups.setdefault((row["layer"], row["model"], row["n"]), []).append(row)
        out = []
        for (layer, model, n), rows in groups.items():
            entry: dict[str, Any] = {"layer": layer, "model": model, "n": n, "splits": len(rows),
                                     "test": rows[0]["test"]}
            for metric in QUALITY_METRICS + ("fit_s",):
                values = [r[metric] for r in rows]
                entry[metric] = float(np.mean(values))
                entry[f"{metric}_sd"] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
            out.append(entry)
        return out


def _fit_and_score(model, x_train: np.ndarray, y_train: Sequence[float | None], x_test: np.ndarray,
                   y_test: np.ndarray, groups: Sequence[int] | None = None, d_train: np.ndarray | None = None,
                   d_test: np.ndarray | None = None) -> dict[str, float]:
    import time

    t0 = time.perf_counter()
    if model is None:  # the draft alone
        predicted = d_test
    else:
        model.train_matrix(x_train, y_train, groups, drafts=d_train)
        predicted = model.predict_matrix(x_test, drafts=d_test)
    return {**quality(predicted, y_test), "fit_s": time.perf_counter() - t0}


def evaluate(dataset: Dataset, specs: Sequence[ModelSpec], sizes: Sequence[int] = DEFAULT_SIZES,
             n_splits: int = 5, test_size: int | None = None, seed: int = 0, progress: bool = False) -> Evaluation:
    """Train every spec on ``n`` configs of ``dataset`` for each ``n`` in ``sizes`` and score it on held-out ones.

    Sizes that leave no room for the held-out set are skipped (logged).
    """
    test_size = test_size or default_test_size(len(dataset), sizes)
    usable = [n for n in sizes if n <= len(dataset) - test_size]
    if len(usable) < len(sizes):
        log.warning("%s: %d configs, %d held out: training sizes %s skipped", dataset.label, len(dataset),
                    test_size, sorted(set(sizes) - set(usable)))
    measured = dataset.measured
    matrices = {f: Featurizer(dataset.space, f).matrix(dataset.configs) for f in {s.features for s in specs}}
    drafts = drafts_of(dataset) if any(s.uses_draft for s in specs) else None
    if drafts is None and any(s.uses_draft for s in specs):
        log.warning("%s: the space has no analytical draft; the models that need it are skipped", dataset.label)
        specs = [s for s in specs if not s.uses_draft]
    jobs = [(k, split, n, spec) for k, split in enumerate(splits(len(dataset), test_size, n_splits, seed))
            for n in usable for spec in specs]
    bar = _bar(len(jobs), f"models on {dataset.label}", progress)
    result = Evaluation()
    for k, split, n, spec in jobs:
        x = matrices[spec.features]
        train = split.train[:n]
        d_train, d_test = (drafts[train], drafts[split.test]) if drafts is not None else (None, None)
        scores = _fit_and_score(spec.build(dataset.space, seed=k), x[train], [dataset.gflops[i] for i in train],
                                x[split.test], measured[split.test], None, d_train, d_test)
        result.rows.append({"layer": dataset.label, "model": spec.name, "n": n, "split": k,
                            "test": len(split.test), **scores})
        bar.update(1)
    bar.close()
    return result


def common_columns(datasets: Sequence[Dataset], features: str) -> tuple[list[str], list[np.ndarray]]:
    """The feature names every dataset's space has (in the first one's order), and each one's column indices."""
    names = [Featurizer(d.space, features).names for d in datasets]
    shared = [n for n in names[0] if all(n in other for other in names[1:])]
    return shared, [np.array([list(own).index(n) for n in shared], dtype=np.int64) for own in names]


def evaluate_transfer(target: Dataset, sources: Sequence[Dataset], specs: Sequence[ModelSpec],
                      sizes: Sequence[int] = (0, 16, 64, 128), n_splits: int = 5, test_size: int | None = None,
                      seed: int = 0, progress: bool = False) -> Evaluation:
    """Train on all of ``sources`` (other layers) plus ``n`` configs of ``target``; score on ``target``'s held-out.

    Only the features every layer has are used (a conv2d's per-loop tile
    features have no matmul counterpart; the band products and analytical
    features do). Each layer is its own group: targets are normalised per
    layer. The held-out sets are those :func:`evaluate` uses with the same
    ``seed``, ``n_splits`` and ``test_size``. Rows are named ``transfer:<model>``.
    """
    if not sources:
        raise ValueError("transfer needs at least one source layer")
    everything = [target, *sources]
    in_layer_sizes = [n for n in sizes if n > 0]
    test_size = test_size or default_test_size(len(target), in_layer_sizes or (len(target) // 2,))
    usable = [n for n in sizes if n <= len(target) - test_size]
    measured = target.measured
    result = Evaluation()
    xgb_specs = [s for s in specs if s.kind == "xgb"]
    all_drafts = [drafts_of(d) for d in everything]
    if any(d is None for d in all_drafts):
        xgb_specs = [s for s in xgb_specs if not s.uses_draft]
    columns = {f: common_columns(everything, f) for f in {s.features for s in xgb_specs}}
    jobs = [(k, split, n, spec) for k, split in enumerate(splits(len(target), test_size, n_splits, seed))
            for n in usable for spec in xgb_specs]
    bar = _bar(len(jobs), f"transfer to {target.label}", progress)
    full = {}
    for f, (_, cols) in columns.items():
        full[f] = [Featurizer(d.space, f).matrix(d.configs)[:, c] for d, c in zip(everything, cols)]
    for k, split, n, spec in jobs:
        x_target, *x_sources = full[spec.features]
        train = split.train[:n]
        x_train = np.vstack([*x_sources, x_target[train]])
        y_train = [g for d in sources for g in d.gflops] + [target.gflops[i] for i in train]
        groups = np.concatenate([np.full(len(d), i + 1) for i, d in enumerate(sources)] + [np.zeros(len(train))])
        d_train = d_test = None
        if spec.uses_draft:
            d_target, *d_sources = all_drafts
            d_train, d_test = np.concatenate([*d_sources, d_target[train]]), d_target[split.test]
        scores = _fit_and_score(spec.build(target.space, seed=k), x_train, y_train, x_target[split.test],
                                measured[split.test], groups, d_train, d_test)
        result.rows.append({"layer": target.label, "model": f"transfer:{spec.name}", "n": n, "split": k,
                            "test": len(split.test), **scores})
        bar.update(1)
    bar.close()
    return result


def _bar(total: int, label: str, progress: bool):
    """A progress bar over the fits (a silent one when ``progress`` is off)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label, unit="fit", dynamic_ncols=True, disable=not progress)
