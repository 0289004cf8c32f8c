"""Train seed 004's predictor on a measurement dataset (what ``tensorgym oneshot train`` runs).

Training follows seed 004 §3.3-3.4:

* **data**: every record of the ``tiles`` space measured on one target
  (default: this machine), grouped by layer; failed kernels and samples more
  than :data:`MAX_SLOWDOWN` (20x) slower than their layer's best are left
  out; 10 % of the samples are held out to report the test error;
* **label**: throughput (GFLOP/s), z-normalised over the training samples; or, with
  ``labels="relative"``, each sample's throughput as a share of its layer's best, z-normalised:
  layers differ in scale (a layer's optimum may be 2x another's), and a predictor that only has to
  rank the configs of one layer at a time learns nothing from that difference but noise;
* **oversampling**: each training sample is drawn with weight 1 / (samples
  in its label's histogram bin), 100 bins (``WeightedRandomSampler``): fast
  configs are rare, and these are the ones the search must recognise;
* **optimisation**: MSE, Adam (learning rate 1e-4, weight decay 5e-5, Table
  2's probable values), a cosine schedule over the epochs (200), batches of 512.

The input features are :mod:`tensorgym.agents.oneshot.features`; the model is
:mod:`tensorgym.agents.oneshot.model`. Training runs on the CPU with torch.

**From landscapes** (:func:`measurements_from_landscapes`): every correct config of each
landscape, with its recorded GFLOP/s, is a sample. A landscape names the CPU it was measured on, so
the predictor is stamped with that CPU's fingerprint, and landscapes of different CPUs are refused
together (:class:`~tensorgym.agents.oneshot.model.TargetMismatch`): one predictor learns one machine.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from tensorgym.config import Config
from tensorgym.database import Database
from tensorgym.errors import InvalidArgumentError
from tensorgym.landscape import Landscape
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.target import Target, resolve_target
from tensorgym.workloads import Workload

from .features import FEATURE_SETS, BatchFeaturizer, feature_names, ignored_features
from ..threads import torch_threads
from .model import OneShotPredictor, PredictorInfo, TargetMismatch, build_network, ignore_features

log = logging.getLogger(__name__)

MAX_SLOWDOWN = 20.0
EPOCHS = 200
BATCH_SIZE = 512
LEARNING_RATE = 1e-4
WEIGHT_DECAY = 5e-5
HISTOGRAM_BINS = 100
LABELS = ("gflops", "relative")

Measurements = Mapping[Workload, Sequence[tuple[Config, float | None]]]


def measurements_from_database(database: Database, target: Target | None = None) -> dict[Workload, list]:
    """``{workload: [(config, GFLOP/s or None), ...]}`` for every ``tiles`` record of ``target`` (default: here)."""
    fingerprint = resolve_target(target).fingerprint
    workloads = database.workloads()
    out: dict[Workload, list] = {}
    for record in database.records(target=fingerprint, space="tiles"):
        wl = workloads.get(record.workload)
        if wl is not None:
            out.setdefault(wl, []).append((record.config, record.gflops if record.ok else None))
    return out


def measurements_from_landscapes(landscapes: Iterable[Landscape]) -> tuple[dict[Workload, list], Target]:
    """``({workload: [(config, GFLOP/s or None), ...]}, target)``: every config of each ``tiles`` landscape with
    its recorded GFLOP/s (None: failed), and the CPU they were measured on.

    Raises :class:`TargetMismatch` for landscapes of different CPUs (the predictor is stamped with one) and
    :class:`InvalidArgumentError` for none, or one of another space.
    """
    out: dict[Workload, list] = {}
    target: Target | None = None
    for land in landscapes:
        if land.space_name != "tiles":
            raise InvalidArgumentError(f"the one-shot predictor learns the tiles space; {land.workload_label}'s "
                                       f"landscape is of the {land.space_name} space")
        if target is None:
            target = land.target
        elif land.fingerprint != target.fingerprint:
            raise TargetMismatch(f"the landscape of {land.workload_label} was measured on {land.cpu_label} "
                                 f"({land.fingerprint}), the others on {target.label} ({target.fingerprint}): a "
                                 f"predictor learns one machine's speed, train one per CPU")
        gflops = [float(g) if ok else None for g, ok in zip(land.scores.tolist(), land.ok.tolist())]
        out.setdefault(land.workload, []).extend(zip(land.configs, gflops))
    if target is None:
        raise InvalidArgumentError("give at least one landscape to train on")
    return out, target


def training_arrays(measurements: Measurements, target: Target, max_slowdown: float = MAX_SLOWDOWN,
                    labels: str = "gflops") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(features, label, task)`` of the samples kept (correct, at most ``max_slowdown`` x slower than their
    layer's best); ``label`` is GFLOP/s, or with ``labels="relative"`` the share of the layer's best;
    ``task`` numbers each sample's layer."""
    if labels not in LABELS:
        raise InvalidArgumentError(f"labels must be one of {LABELS}, got {labels!r}")
    xs, ys, tasks = [], [], []
    for i, (workload, samples) in enumerate(measurements.items()):
        good = [(c, g) for c, g in samples if g is not None and math.isfinite(g) and g > 0]
        if not good:
            continue
        best = max(g for _, g in good)
        kept = [(c, g) for c, g in good if g * max_slowdown >= best]
        featurizer = BatchFeaturizer(TilesSpace(workload, target))
        xs.append(featurizer([c for c, _ in kept]))
        ys.append(np.array([g / best if labels == "relative" else g for _, g in kept]))
        tasks.append(np.full(len(kept), i))
    if not xs:
        raise InvalidArgumentError("the dataset is empty: it holds no correct measurement of the tiles space on "
                                   "this target (build one with `tensorgym dataset build`)")
    return np.vstack(xs), np.concatenate(ys), np.concatenate(tasks)


def oversampling_weights(labels: np.ndarray, bins: int = HISTOGRAM_BINS) -> np.ndarray:
    """Seed 004's inverse-frequency weights: 1 / (samples in the label's histogram bin)."""
    counts, edges = np.histogram(labels, bins=bins)
    index = np.clip(np.searchsorted(edges, labels, side="right") - 1, 0, bins - 1)
    return 1.0 / counts[index]


def _kendall(predicted: np.ndarray, measured: np.ndarray) -> float | None:
    if len(measured) < 3:
        return None
    from scipy.stats import kendalltau

    tau = kendalltau(predicted, measured).statistic
    return float(tau) if np.isfinite(tau) else None


def train_predictor(measurements: Measurements, target: Target | str | None = None, *, epochs: int = EPOCHS,
                    batch_size: int = BATCH_SIZE, learning_rate: float = LEARNING_RATE,
                    weight_decay: float = WEIGHT_DECAY, test_fraction: float = 0.1, seed: int = 0,
                    threads: int = 1, progress: bool = True, labels: str = "gflops",
                    oversample: bool = True, max_slowdown: float = MAX_SLOWDOWN,
                    feature_set: str = "all") -> OneShotPredictor:
    """Fit the predictor on ``measurements`` (``{workload: [(config, GFLOP/s or None), ...]}``) of ``target``.

    ``labels``: ``"gflops"`` (seed 004) or ``"relative"`` (the share of the layer's best; see the module
    docs); ``oversample``: seed 004's inverse-frequency oversampling (False: every sample once per epoch);
    ``feature_set``: ``"all"`` (seed 004's input) or ``"generic"`` (the operator-independent features only:
    :func:`~tensorgym.agents.oneshot.features.generic_feature_names`);
    ``threads``: torch CPU threads (see :func:`~tensorgym.agents.threads.torch_threads`).
    """
    import torch

    if not isinstance(epochs, int) or epochs < 1 or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError("epochs and batch_size must be positive integers")
    if not 0.0 <= test_fraction < 1.0:
        raise InvalidArgumentError(f"test_fraction must be in [0, 1), got {test_fraction}")
    target = resolve_target(target)
    if feature_set not in FEATURE_SETS:
        raise InvalidArgumentError(f"feature_set must be one of {FEATURE_SETS}, got {feature_set!r}")
    x, y, task = training_arrays(measurements, target, max_slowdown, labels)
    ignored = ignored_features(feature_set)
    if ignored:
        x = ignore_features(x, list(feature_names()), ignored)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    n_test = int(round(test_fraction * len(y))) if len(y) >= 20 else 0
    test, train = order[:n_test], order[n_test:]
    label_mean, label_std = float(y[train].mean()), float(y[train].std()) or 1.0
    z = (y - label_mean) / label_std

    torch.manual_seed(seed)
    with torch_threads(threads):
        network = _fit(x[train], z[train], epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
                       weight_decay=weight_decay, seed=seed, progress=progress, oversample=oversample)
    predictor = _report(network, x, y, z, task, test, train, target, label_mean, label_std, epochs)
    predictor.info.labels, predictor.info.ignored = labels, ignored
    return predictor


def _fit(x, z, *, epochs: int, batch_size: int, learning_rate: float, weight_decay: float, seed: int,
         progress: bool, oversample: bool = True):
    """The training loop (see the module docs): standardisation, oversampling, Adam, cosine schedule, MSE."""
    import torch

    network = build_network(x.shape[1])
    network.mean.copy_(torch.as_tensor(x.mean(axis=0), dtype=torch.float32))
    std = x.std(axis=0)
    network.std.copy_(torch.as_tensor(np.where(std > 1e-9, std, 1.0), dtype=torch.float32))
    inputs = torch.as_tensor(x, dtype=torch.float32)
    labels = torch.as_tensor(z, dtype=torch.float32)
    sampler = torch.utils.data.WeightedRandomSampler(
        torch.as_tensor(oversampling_weights(z) if oversample else np.ones(len(z)), dtype=torch.double),
        num_samples=len(z),
        replacement=True, generator=torch.Generator().manual_seed(seed))
    optimiser = torch.optim.Adam(network.parameters(), lr=learning_rate, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=epochs)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=epochs, desc="one-shot predictor", unit="epoch", dynamic_ncols=True)
    loss_value = float("nan")
    for _ in range(epochs):
        network.train()
        drawn = torch.as_tensor(list(sampler))
        total, count = 0.0, 0
        for start in range(0, len(drawn), batch_size):
            batch = drawn[start:start + batch_size]
            optimiser.zero_grad()
            loss = torch.nn.functional.mse_loss(network(inputs[batch]), labels[batch])
            loss.backward()
            optimiser.step()
            total, count = total + loss.item() * len(batch), count + len(batch)
        schedule.step()
        loss_value = total / max(1, count)
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"train MSE {loss_value:.3f}", refresh=False)
    if bar is not None:
        bar.close()
    return network


def _report(network, x, y, z, task, test, train, target, label_mean, label_std, epochs) -> OneShotPredictor:
    """The predictor with its info and its held-out metrics."""
    info = PredictorInfo(target=target.fingerprint, target_label=target.label, feature_names=list(feature_names()),
                         label_mean=label_mean, label_std=label_std, tasks=int(len(np.unique(task))),
                         samples=int(len(y)), epochs=epochs)
    predictor = OneShotPredictor(network, info)
    metrics: dict = {"train_mse": float(np.mean((predictor.predict(x[train]) - z[train]) ** 2)),
                     "train_samples": int(len(train)), "test_samples": int(len(test))}
    if len(test):
        predicted = predictor.predict(x[test])
        metrics["test_mse"] = float(np.mean((predicted - z[test]) ** 2))
        taus = [_kendall(predicted[task[test] == t], y[test][task[test] == t]) for t in np.unique(task[test])]
        taus = [t for t in taus if t is not None]
        metrics["test_kendall_tau_mean"] = float(np.mean(taus)) if taus else None
    info.metrics = metrics
    log.info("one-shot predictor: %d samples of %d layers, metrics %s", len(y), info.tasks, metrics)
    return predictor
