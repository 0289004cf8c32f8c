"""Build a measurement dataset: sample layers, explore each one, store every measurement.

:func:`plan_tasks` picks the layers (the suite layers asked for, then layers
drawn from the shape prior, :mod:`tensorgym.dataset.priors`);
:func:`build_dataset` measures each of them along a search trajectory
(:mod:`tensorgym.dataset.explore`): the GA for ``1 - hop_share`` of the
layer's budget, hop walks from its best configs for the rest. Every
measurement goes through an :class:`~tensorgym.evaluator.Evaluator` into the
database the moment it exists.

**Resume.** A layer is filled up to ``per_task`` records of this target and
space. Running the same build again (same tasks, seed and database) skips the
full layers; in a layer that was interrupted the GA, deterministic for its
seed, reads its earlier trials back from the database for free, and the hop
walk measures only what is still missing.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..catalog import make_space
from ..database import Database
from ..errors import InvalidArgumentError
from ..evaluator import Evaluator
from ..measure.measurer import Measurer
from ..target import Target, resolve_target
from ..tuner import Trial, Tuner, TuningCallback
from ..workloads import Workload
from .explore import ga_trajectory, hop_walk
from .priors import ShapePrior

log = logging.getLogger(__name__)

DATASET_SPACE = "tiles"


@dataclass(frozen=True)
class TaskOutcome:
    """What the build holds for one layer after it ran."""

    workload: Workload
    records: int  # records of this layer, target and space in the database
    ok: int
    best_gflops: float
    measured: int  # compiled and timed by this run
    seconds: float
    skipped: bool  # already full before this run


def plan_tasks(n_sampled: int, *, include: Sequence[Workload] = (), exclude: Sequence[Workload] = (),
               prior: ShapePrior | None = None, seed: int = 0) -> list[Workload]:
    """The layers of a dataset: ``include`` (in order), then ``n_sampled`` distinct layers drawn from ``prior``,
    none of them in ``exclude`` (held-out layers, say).

    The draw depends only on ``seed`` and the prior, so the same arguments give the same plan.
    """
    prior = prior if prior is not None else ShapePrior()
    held_out = {wl.key for wl in exclude}
    included = [wl for wl in {wl.key: wl for wl in include}.values() if wl.key not in held_out]
    return included + prior.sample(n_sampled, np.random.default_rng(seed), exclude=[*included, *exclude])


def task_seed(seed: int, workload: Workload) -> int:
    """The exploration seed of one layer: fixed by the build seed and the layer's shape, not its position."""
    digest = hashlib.sha256(f"{seed}:{workload.key}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


class _BarCallback(TuningCallback):
    def __init__(self, bar):
        self.bar = bar

    def on_trial(self, trial: Trial) -> None:
        self.bar.update(1)
        self.bar.set_postfix_str(f"best {trial.best_gflops:.1f} GFLOP/s", refresh=False)


def build_dataset(tasks: Sequence[Workload], database: Database, *, per_task: int = 64, hop_share: float = 0.25,
                  seed: int = 0, target: Target | str | None = None, measurer: Measurer | None = None,
                  progress: bool = True) -> list[TaskOutcome]:
    """Measure ``per_task`` configs of every layer of ``tasks`` into ``database`` (see the module docs).

    Args:
        tasks: the layers (e.g. from :func:`plan_tasks`).
        database: where every record goes (and where a resumed build finds its earlier ones).
        per_task: records per layer.
        hop_share: the share of each layer's budget spent on hop walks after the GA (0: GA only).
        seed: the build seed (each layer explores with :func:`task_seed`).
        target: the machine (default: the local CPU).
        measurer: a shared measurer (default: one started here and stopped at the end).
        progress: a progress bar over all layers' measurements.
    """
    if not isinstance(per_task, int) or per_task < 1:
        raise InvalidArgumentError(f"per_task must be a positive number of measurements, got {per_task!r}")
    if not 0.0 <= hop_share <= 1.0:
        raise InvalidArgumentError(f"hop_share must be in [0, 1], got {hop_share!r}")
    if not tasks:
        raise InvalidArgumentError("the dataset has no layer to measure")
    target = resolve_target(target)
    own_measurer = measurer is None
    measurer = measurer or Measurer(target)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(tasks) * per_task, desc="dataset", unit="config", dynamic_ncols=True)
    outcomes = []
    try:
        for i, workload in enumerate(tasks):
            if bar is not None:
                bar.set_description(f"dataset {i + 1}/{len(tasks)} {workload.label}")
            outcomes.append(_explore_task(workload, database, target, measurer, per_task, hop_share,
                                          task_seed(seed, workload), _BarCallback(bar) if bar is not None else None))
            if bar is not None:
                bar.update((i + 1) * per_task - bar.n)
    finally:
        if bar is not None:
            bar.close()
        if own_measurer:
            measurer.close()
    return outcomes


def _explore_task(workload: Workload, database: Database, target: Target, measurer: Measurer, per_task: int,
                  hop_share: float, seed: int, callback: TuningCallback | None) -> TaskOutcome:
    t0 = time.monotonic()
    space = make_space(DATASET_SPACE, workload, target)
    evaluator = Evaluator(space, database, measurer)

    def count() -> int:
        return database.count(workload.key, target.fingerprint, space.name)

    skipped = count() >= per_task
    if not skipped:
        rng = np.random.default_rng(seed)
        ga_budget = per_task - int(round(hop_share * per_task))
        if ga_budget > 0:
            ga_trajectory(Tuner(evaluator, budget=ga_budget, callback=callback, label=workload.label), seed)
        missing = per_task - count()
        if missing > 0:
            starts = database.best(workload.key, target.fingerprint, space.name, k=8)
            hop_walk(Tuner(evaluator, budget=missing, callback=callback, label=workload.label), rng, starts)
    records = database.records(workload.key, target.fingerprint, space.name)
    ok = [r for r in records if r.ok]
    outcome = TaskOutcome(workload, len(records), len(ok), max((r.score for r in ok), default=0.0),
                          evaluator.measured, time.monotonic() - t0, skipped)
    log.info("dataset: %s: %d records (%d ok, %d measured now) in %.1f s", workload.label, outcome.records,
             outcome.ok, outcome.measured, outcome.seconds)
    return outcome
