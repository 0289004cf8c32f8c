"""How a dataset explores one layer: seed 004's exploration-based sampling, plus hop walks.

**Exploration-based code sampling** (seed 004, Algorithm 1's
EXPLORATION_BASED_CODE_SAMPLING): run a model-guided search on the layer and
keep every config it measures along its trajectory. Seed 004 ran AutoTVM's
simulated annealing with an XGBoost model; here it is the ``ga`` agent
(Ansor's evolutionary search with its XGBoost cost model), with smaller
rounds (:data:`DATASET_GA_OPTIONS`) so that a budget of 64 measurements holds
several model-guided rounds instead of the GA's one random warm-up batch.

**Hop walks** (:func:`hop_walk`) then spend the rest of the layer's budget on
1-hop neighbours of the best configs found (seed 000's move): from the best
correct config, measure an untried neighbour at random and move there if it
is faster; when a config's neighbourhood is spent, go on from the next best.
A trajectory of a GA seldom holds two configs one hop apart, and a replay
environment can only move between recorded neighbours; hop walks give it
the neighbourhoods of good configs, which is where a policy tunes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..catalog import make_agent
from ..record import Record
from ..tuner import Tuner

# The GA of the dataset: rounds of 16 measurements, the model trusted after the first (Ansor waits for 64,
# which with 64 measurements per layer would leave nothing but random samples), a population of 512
# (seed 004's search population) to keep each round's CPU time small next to its measurements.
DATASET_GA_OPTIONS = {"batch_size": 16, "num_warmup_sample": 16, "population": 512}


def ga_trajectory(tuner: Tuner, seed: int, **ga_options) -> dict:
    """Run the ``ga`` strategy (seeded by ``seed``) on ``tuner`` until its budget is spent; returns its facts."""
    return tuner.run(make_agent("ga", **{**DATASET_GA_OPTIONS, **ga_options}), seed)


def hop_walk(tuner: Tuner, rng: np.random.Generator, starts: Sequence[Record] = ()) -> int:
    """Measure 1-hop neighbours of the best configs until ``tuner`` is exhausted (see the module docs).

    ``starts`` are records to walk from (e.g. the layer's best recorded configs); configs the
    evaluator already holds are read for free and never measured again. Returns the number of
    configs measured.
    """
    space, evaluator = tuner.space, tuner.evaluator

    def known(config) -> Record | None:
        return tuner.seen(config) or evaluator.lookup(config)

    pool: dict = {r.config: r for r in starts if r.ok}  # correct configs to walk from
    spent: set = set()  # configs whose neighbourhood holds nothing new
    measured = 0
    current: Record | None = None
    while not tuner.exhausted:
        if current is None:
            ranked = sorted((r for c, r in pool.items() if c not in spent), key=lambda r: -r.score)
            if not ranked:  # nothing correct to walk from yet: a random config
                fresh = tuner.sample(rng, 1)
                if not fresh:
                    break
                records = tuner.measure(fresh)
                if not records:
                    break
                measured += 1
                if records[0].ok:
                    pool[records[0].config] = records[0]
                continue
            current = ranked[0]
        untried = [c for c in space.neighbours(current.config, 1) if known(c) is None]
        if not untried:
            spent.add(current.config)
            current = None
            continue
        records = tuner.measure([untried[int(rng.integers(len(untried)))]])
        if not records:
            break
        measured += 1
        record = records[0]
        if record.ok:
            pool[record.config] = record
            if record.score > current.score:
                current = record
    return measured
