"""Measure every config of a benchmark space: the job that makes a landscape.

It goes through the normal :class:`~tensorgym.evaluator.Evaluator`, so every kernel is
validated against NumPy, faults become records with a status, each record is committed
before the next kernel is timed, and a kernel several times slower than the fastest one
known is timed short (one sample: an honest bound, far from the optimum anyway). Running the
job again resumes: configs the database holds are not measured again.

The configs are measured in a fixed shuffled order (``order_seed``), so that a landscape cut
short is a uniform random sample of the space rather than one corner of it, and chunks of a
long job (``limit``, ``time_limit``) can run between other work on a 2-core machine.

A landscape can be measured in several *rounds* (:func:`measure_rounds`): every config is measured
again, in another shuffled order, into a database of its own per round (:func:`round_path`).
A virtual machine's speed drops for seconds to minutes at a time, unseen by the contention
monitor (no other process runs); one pass records such a slowdown as a slow config, and the ranking
it gives does not reproduce. Rounds taken minutes apart see different slowdowns, and the export
keeps each config's median over the rounds (:func:`tensorgym.landscape.export.combine_rounds`).
Whether a few rounds are enough depends on how far apart the space's configs are against how far
one config moves between measurements: ``bench/bench_landscape_rounds.py`` reads the rounds'
databases and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Config
from ..database import Database
from ..evaluator import Evaluator
from ..measure.measurer import Measurer
from ..record import Record
from ..spaces.base import Space

BATCH = 16  # configs per evaluator call: built in parallel, then timed one by one


@dataclass(frozen=True)
class MeasuringProgress:
    """Where a landscape measurement stands: configs in the space, held before, measured now, still missing."""

    total: int
    held_before: int
    measured_now: int
    missing: int
    seconds: float

    @property
    def done(self) -> bool:
        return self.missing == 0


def measuring_order(space: Space, order_seed: int = 0) -> list[Config]:
    """Every config of ``space`` in the order a landscape measures them (a seeded shuffle)."""
    configs = space.configs()
    order = np.random.default_rng(order_seed).permutation(len(configs))
    return [configs[i] for i in order]


def measure_landscape(space: Space, database: Database, measurer: Measurer, *, limit: int | None = None,
                      time_limit: float | None = None, order_seed: int = 0, progress: bool = True,
                      on_record: Callable[[Record], None] | None = None,
                      desc: str | None = None) -> MeasuringProgress:
    """Measure the configs of ``space`` that ``database`` does not hold yet (at most ``limit`` of them, and
    no new batch after ``time_limit`` seconds); see the module docs."""
    return measure_configs(space, measuring_order(space, order_seed), database, measurer, limit=limit,
                           time_limit=time_limit, progress=progress, on_record=on_record,
                           desc=desc or f"landscape {space.workload.label}")


def sample_order(space: Space, count: int, seed: int = 0) -> list[Config]:
    """``count`` distinct configs drawn uniformly from the whole of ``space`` (the tiles space's own sampler,
    one factorisation per loop and one value per knob, each uniform), the same list for the same space and seed:
    the full-space sample that tells how hard the space is, measured beside a landscape."""
    return space.sample_many(np.random.default_rng(seed), count)


def measure_configs(space: Space, configs: list[Config], database: Database, measurer: Measurer, *,
                    limit: int | None = None, time_limit: float | None = None, progress: bool = True,
                    on_record: Callable[[Record], None] | None = None, desc: str = "measuring") -> MeasuringProgress:
    """Measure, in their order, the ``configs`` that ``database`` does not hold yet (at most ``limit`` of them,
    and no new batch after ``time_limit`` seconds)."""
    evaluator = Evaluator(space, database, measurer)
    missing = [c for c in configs if evaluator.lookup(c) is None]
    held = len(configs) - len(missing)
    todo = missing if limit is None else missing[:max(0, limit)]
    start = time.monotonic()
    bar = _progress_bar(len(configs), held, desc, progress)
    measured = 0
    try:
        for i in range(0, len(todo), BATCH):
            if time_limit is not None and time.monotonic() - start > time_limit:
                break
            batch = todo[i:i + BATCH]
            for record in evaluator.evaluate(batch):
                if on_record is not None:
                    on_record(record)
            measured += len(batch)
            bar.update(len(batch))
            if bar.disable is False:
                best = evaluator.incumbent_s()
                if best:
                    bar.set_postfix_str(f"best {space.workload.flops / best / 1e9:.1f} GFLOP/s")
    finally:
        bar.close()
    still = sum(evaluator.lookup(c) is None for c in missing)
    return MeasuringProgress(total=len(configs), held_before=held, measured_now=measured, missing=still,
                             seconds=time.monotonic() - start)


def round_path(db_path: str | Path, round_no: int) -> Path:
    """The database of measuring round ``round_no`` (1: ``db_path`` itself; then ``<stem>-round<N><suffix>``)."""
    path = Path(db_path)
    if round_no < 1:
        raise ValueError(f"rounds count from 1, got {round_no}")
    return path if round_no == 1 else path.with_name(f"{path.stem}-round{round_no}{path.suffix or '.db'}")


def measure_rounds(space: Space, db_path: str | Path, measurer: Measurer, *, rounds: int = 1,
                   limit: int | None = None, time_limit: float | None = None,
                   progress: bool = True) -> list[MeasuringProgress]:
    """Measure ``space`` in ``rounds`` rounds, round ``r`` into :func:`round_path` ``(db_path, r)`` in the
    shuffled order of seed ``r - 1``; a round starts once the one before it is complete. ``limit`` and
    ``time_limit`` bound this call's work over all rounds. Returns the progress of the rounds it reached."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    start, measured, out = time.monotonic(), 0, []
    for round_no in range(1, rounds + 1):
        left_s = None if time_limit is None else time_limit - (time.monotonic() - start)
        left_n = None if limit is None else max(0, limit - measured)
        with Database(round_path(db_path, round_no)) as database:
            state = measure_landscape(space, database, measurer, limit=left_n, time_limit=left_s,
                                      order_seed=round_no - 1, progress=progress and left_n != 0,
                                      desc=None if rounds == 1 else
                                      f"landscape {space.workload.label} round {round_no}/{rounds}")
        measured += state.measured_now
        out.append(state)
        if not state.done:
            break
    return out


def _progress_bar(total: int, held: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=held, desc=desc, unit="config",
                disable=not enabled, smoothing=0.05, dynamic_ncols=True)
