"""Ansor's evolutionary search with an XGBoost cost model (the ``ga`` agent; seed 000's baseline).

Each round (TVM v0.9 ``SketchPolicy::SearchOneRound``, constants of seed 000
notes A.2.1):

1. retrain the cost model on every measurement of the run (from scratch);
2. build an initial population of ``population`` configs: 80 % fresh random
   ones from the space, 20 % (``init_measured_ratio``) the best correctly
   measured configs so far (fewer if fewer exist; the rest are random);
3. evolve it for ``generations`` generations. Each generation is scored by
   the model; the ``2 * batch_size`` best-scored configs not measured yet are
   kept across generations. The next generation is drawn by roulette
   selection (probability proportional to ``max(score, 0)``); each child is,
   with probability ``crossover_prob``, the uniform cross-over of its parent
   with a second roulette-drawn parent, and then, with probability
   ``mutation_prob``, mutated by one rule (a failed mutation drops the child);
4. measure a batch of ``batch_size`` configs: the first
   ``batch_size - int(eps_greedy * batch_size)`` (61 of 64) are the model's best
   unmeasured configs, the last ``int(eps_greedy * batch_size)`` (3) are random
   members of the initial population (Ansor's ``PickStatesWithEpsGreedy``).
   When fewer trials remain than a batch holds, the batch is cut to its first
   ``remaining`` configs, so the budget is respected exactly.

Until ``num_warmup_sample`` measurements exist, the model is not trusted and
its scores are uniform random numbers, as in Ansor. Ansor waits for 100
samples; with the 128-trial budgets of the benchmarks that would leave the
model one batch, so the default here is 64: the first batch is random and
every later one is model-guided (the same 64 random samples DGD starts from).

Mutation rules and Ansor's CPU weights, mapped onto the knobs of the
``tiles`` space:

=================  ======  ==================================================
Ansor rule          weight  here
=================  ======  ==================================================
MutateTileSize       0.90  move a divisor between two levels of one loop
                           (below)
MutateAutoUnroll     0.04  ``unroll`` takes another of its choices
MutateComputeLoc.    0.05  ``cache_write`` flips: the output tile is
                           accumulated in a local buffer computed at S1, or
                           in the output itself (the compute location of the
                           cache-write stage is what Ansor's rule moves)
MutateParallel       0.01  the space always parallelises the fused S0 band,
                           so the granularity of the parallel loop changes
                           instead: a divisor moves between levels 0 and 1 of
                           one spatial loop
=================  ======  ==================================================

On a CUDA target the tiles space is Ansor's GPU sketch, and Ansor's GPU weights apply:
``MutateTileSize`` 0.90, ``MutateAutoUnroll`` 0.10. In a template space (``cutlass``)
the one rule ``knob`` gives a random knob another of its values. A child outside the
space (beyond a GPU's thread, shared-memory or register limits, or a combination of
template knobs that does not exist) is dropped, as Ansor drops invalid states.

``MutateTileSize`` (Ansor): pick a loop of extent > 1, randomly permute its
levels; the first level ``src`` in that order whose tile is > 1 gives a random
divisor (> 1) of its tile to the next level ``dst`` in the order (cyclically).
If ``dst`` is the innermost level, only divisors that keep it <= the space's
``max_innermost`` (64) qualify; if none does, the next ``src`` is tried.

Cross-over is not in Ansor (its evolutionary search only mutates). The
issue asks for one, so a simple per-loop uniform cross-over is added: the
child takes each knob (a loop's whole tile vector, ``unroll``,
``cache_write``) from either parent with probability 1/2. Tile vectors are
valid per loop, so every child is valid. ``crossover_prob=0`` gives stock
Ansor.

Resuming: the search is deterministic for a seed and its decisions depend
only on measured values, which a re-run reads back from the database; and
because a short batch is the prefix of the full one, a run with budget ``k``
makes exactly the first ``k`` trials of the same run with any budget ``N >=
k``. A run interrupted after ``k`` trials and restarted with the same seed
and database therefore replays its ``k`` trials for free and goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.factors import divisors
from tensorgym.spaces.base import Space
from tensorgym.tuner import Tuner

from .base import SearchAgent
from .cost_model import FEATURE_SETS, CostModel

log = logging.getLogger(__name__)

# Ansor's CPU mutation weights (tile_size .90, auto_unroll .04, compute_location .05, parallel .01).
ANSOR_CPU_MUTATION_WEIGHTS: dict[str, float] = {
    "tile_size": 0.90, "unroll": 0.04, "compute_location": 0.05, "parallel": 0.01,
}
# Ansor's GPU mutation weights (tile_size .90, auto_unroll .10): the tiles space of a CUDA target.
ANSOR_GPU_MUTATION_WEIGHTS: dict[str, float] = {"tile_size": 0.90, "unroll": 0.10}
# Template spaces (cutlass) have no tiles: a mutation gives one knob another of its values.
KNOB_MUTATION_WEIGHTS: dict[str, float] = {"knob": 1.0}


# -- mutation and cross-over (pure functions of a config) ---------------------------------
def mutate_tile_size(space: Space, config: Config, rng: np.random.Generator,
                     levels: Sequence[int] | None = None, spatial_only: bool = False) -> Config | None:
    """Ansor's MutateTileSize on one random loop (see the module docs); None if no move exists.

    ``levels`` restricts the levels taking part (``(0, 1)`` for the parallel rule).
    """
    loops = [lp for lp in space.loops if lp.extent > 1 and (not spatial_only or lp.kind == "spatial")]
    if not loops:
        return None
    loop = loops[int(rng.integers(len(loops)))]
    tiles = list(config[loop.name])
    last = len(tiles) - 1
    candidates = list(range(len(tiles))) if levels is None else [lv for lv in levels if lv <= last]
    if len(candidates) < 2:
        return None
    order = [candidates[i] for i in rng.permutation(len(candidates))]
    for k, src in enumerate(order):
        if tiles[src] <= 1:
            continue
        dst = order[(k + 1) % len(order)]
        factors = divisors(tiles[src])[1:]
        if dst == last:
            factors = tuple(f for f in factors if f * tiles[dst] <= space.max_innermost)
            if not factors:
                continue
        factor = factors[int(rng.integers(len(factors)))]
        tiles[src] //= factor
        tiles[dst] *= factor
        return config.replace(**{loop.name: tuple(tiles)})
    return None


def mutate_unroll(space: Space, config: Config, rng: np.random.Generator) -> Config | None:
    """Another ``auto_unroll_max_step`` choice."""
    others = [u for u in space.unroll_choices if u != config["unroll"]]
    if not others:
        return None
    return config.replace(unroll=others[int(rng.integers(len(others)))])


def mutate_compute_location(space: Space, config: Config, rng: np.random.Generator) -> Config | None:
    """Move the output's accumulation between a local buffer at S1 and the output (``cache_write``)."""
    return config.replace(cache_write=1 - config["cache_write"])


def mutate_parallel(space: Space, config: Config, rng: np.random.Generator) -> Config | None:
    """Change the parallel granularity: move a divisor between levels 0 and 1 of a spatial loop."""
    return mutate_tile_size(space, config, rng, levels=(0, 1), spatial_only=True)


def mutate_knob(space: Space, config: Config, rng: np.random.Generator) -> Config | None:
    """Another value for one knob (a coordinate of the space with more than one value)."""
    coordinates = [c for c in space.coordinates if len(c.choices) > 1]
    if not coordinates:
        return None
    coord = coordinates[int(rng.integers(len(coordinates)))]
    others = [v for v in coord.choices if v != config[coord.knob]]
    return config.replace(**{coord.knob: others[int(rng.integers(len(others)))]})


MUTATIONS: dict[str, Callable[[Space, Config, np.random.Generator], Config | None]] = {
    "tile_size": mutate_tile_size,
    "unroll": mutate_unroll,
    "compute_location": mutate_compute_location,
    "parallel": mutate_parallel,
    "knob": mutate_knob,
}


def default_mutation_weights(space: Space) -> dict[str, float]:
    """Ansor's rule weights for the space's target (CPU or GPU tiles); one knob rule for template spaces."""
    if space.name != "tiles":
        return dict(KNOB_MUTATION_WEIGHTS)
    return dict(ANSOR_GPU_MUTATION_WEIGHTS if space.target.kind == "cuda" else ANSOR_CPU_MUTATION_WEIGHTS)


def crossover(a: Config, b: Config, rng: np.random.Generator) -> Config:
    """Uniform cross-over per knob: each knob (a loop's tile vector, unroll, cache_write) from a or b."""
    picks = rng.random(len(a)) < 0.5
    return Config({knob: (b[knob] if pick else a[knob]) for knob, pick in zip(a, picks)})


def _measured(tuner: Tuner, first: int) -> tuple[list[Config], list[float]]:
    """The configs of ``tuner.trials[first:]``, in order, and their scores (GFLOP/s; failed: 0)."""
    records = [tuner.seen(trial.config) for trial in tuner.trials[first:]]
    return [r.config for r in records], [r.score for r in records]


# -- the agent ---------------------------------------------------------------------------------
class GAAgent(SearchAgent):
    """Ansor's evolutionary search guided by an online XGBoost cost model (see the module docs).

    Args:
        features: the cost model's features, ``"generic"`` (Ansor) or ``"af"`` (Ansor-AF).
        population: configs per generation (Ansor: 2048).
        generations: evolution steps per round (Ansor: 4).
        mutation_prob: probability that a child is mutated (Ansor: 0.85).
        crossover_prob: probability that a child is a cross-over of two parents (not in Ansor).
        batch_size: measurements per round (Ansor: 64).
        eps_greedy: share of each batch drawn at random (Ansor: 0.05, i.e. 3 of 64).
        init_measured_ratio: share of the initial population taken from the best measured configs (0.2).
        num_warmup_sample: measurements before the model's scores are trusted (Ansor: 100; here 64).
        mutation_weights: rule -> weight (default: Ansor's CPU or GPU weights for the tiles space of
            the target, the ``knob`` rule for template spaces).
        model_options: keyword arguments of :class:`~tensorgym.agents.cost_model.CostModel`.
    """

    name = "ga"
    spaces = ("tiles", "cutlass")

    def __init__(self, features: str = "generic", *, population: int = 2048, generations: int = 4,
                 mutation_prob: float = 0.85, crossover_prob: float = 0.2, batch_size: int = 64,
                 eps_greedy: float = 0.05, init_measured_ratio: float = 0.2, num_warmup_sample: int = 64,
                 mutation_weights: Mapping[str, float] | None = None,
                 model_options: Mapping[str, Any] | None = None):
        if features not in FEATURE_SETS:
            raise ValueError(f"features must be one of {FEATURE_SETS}, got {features!r}")
        if population < 2 or generations < 0 or batch_size < 1:
            raise ValueError("population must be >= 2, generations >= 0 and batch_size >= 1")
        for name, p in (("mutation_prob", mutation_prob), ("crossover_prob", crossover_prob),
                        ("eps_greedy", eps_greedy), ("init_measured_ratio", init_measured_ratio)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {p}")
        if num_warmup_sample < 0:
            raise ValueError(f"num_warmup_sample must be >= 0, got {num_warmup_sample}")
        if mutation_weights is not None:
            weights = dict(mutation_weights)
            unknown = set(weights) - set(MUTATIONS)
            if unknown or not weights or min(weights.values()) < 0 or sum(weights.values()) <= 0:
                raise ValueError(f"mutation_weights maps rules {sorted(MUTATIONS)} to non-negative weights "
                                 f"(not all zero); got {weights}")
        self.features = features
        self.population = int(population)
        self.generations = int(generations)
        self.mutation_prob = float(mutation_prob)
        self.crossover_prob = float(crossover_prob)
        self.batch_size = int(batch_size)
        self.eps_greedy = float(eps_greedy)
        self.init_measured_ratio = float(init_measured_ratio)
        self.num_warmup_sample = int(num_warmup_sample)
        self.mutation_weights = None if mutation_weights is None else dict(mutation_weights)
        self.model_options = dict(model_options or {})

    # -- the search ------------------------------------------------------------------------
    def search(self, tuner: Tuner, rng: np.random.Generator, seed: int) -> dict[str, Any]:
        space = tuner.space
        model = CostModel(space, self.features, seed=int(rng.integers(2**31)), **self.model_options)
        first = len(tuner.trials)  # the trials of this search are tuner.trials[first:]
        rounds = model_rounds = 0
        while not tuner.exhausted:
            configs, values = _measured(tuner, first)
            trusted = len(configs) >= self.num_warmup_sample and len(configs) > 0
            if trusted and model.num_samples != len(configs):
                model.fit(configs, values)
            scorer = model.predict if trusted else (lambda pop: rng.random(len(pop)))
            batch = self._next_batch(tuner, rng, scorer, configs, values)
            if not batch:  # Ansor's retry_search_one_round_on_empty: fall back to random configs
                batch = tuner.sample(rng, self.batch_size)
            if not batch:
                log.info("ga: the space has no unmeasured config left")
                break
            if not tuner.measure(batch):
                break
            rounds += 1
            model_rounds += trusted
        return {"features": self.features, "rounds": rounds, "model_guided_rounds": model_rounds,
                "model_fits": model.fits, "population": self.population, "generations": self.generations,
                "batch_size": self.batch_size, "num_warmup_sample": self.num_warmup_sample}

    def _next_batch(self, tuner: Tuner, rng: np.random.Generator, scorer: Callable[[list[Config]], np.ndarray],
                    configs: list[Config], values: list[float]) -> list[Config]:
        """One round: initial population, evolution, eps-greedy pick of ``batch_size`` unmeasured configs."""
        n_measured = int(self.init_measured_ratio * self.population)
        best_first = [i for i in sorted(range(len(configs)), key=lambda i: -values[i]) if values[i] > 0][:n_measured]
        init = tuner.sample(rng, self.population - len(best_first)) + [configs[i] for i in best_first]
        if not init:
            return []
        num_random = int(self.eps_greedy * self.batch_size)
        num_good = self.batch_size - num_random
        pool = [init[i] for i in rng.permutation(len(init))[:3 * num_random]] if num_random else []
        best = self._evolve(tuner, rng, init, scorer, out_size=2 * self.batch_size)

        picks: list[Config] = []
        chosen: set[Config] = set()
        queues = (iter(best), iter(pool))
        while len(picks) < self.batch_size:
            order = queues if len(picks) < num_good else queues[::-1]
            config = next(order[0], None)
            if config is None:
                config = next(order[1], None)
            if config is None:
                break
            if config in chosen or tuner.seen(config) is not None:
                continue
            chosen.add(config)
            picks.append(config)
        return picks

    def _evolve(self, tuner: Tuner, rng: np.random.Generator, population: list[Config],
                scorer: Callable[[list[Config]], np.ndarray], out_size: int) -> list[Config]:
        """Ansor's EvolutionarySearch: the ``out_size`` best-scored unmeasured configs met, best first."""
        space = tuner.space
        weights = self.mutation_weights if self.mutation_weights is not None else default_mutation_weights(space)
        rule_names = list(weights)
        rule_p = np.array([weights[r] for r in rule_names]) / sum(weights.values())
        best: dict[Config, float] = {}
        pop = list(population)
        for generation in range(self.generations + 1):
            scores = np.asarray(scorer(pop), dtype=np.float64)
            for config, score in zip(pop, scores):
                if tuner.seen(config) is None and score > best.get(config, -np.inf):
                    best[config] = float(score)
            if len(best) > 4 * out_size:  # keep the dict small; only the top out_size matter
                best = dict(sorted(best.items(), key=lambda kv: -kv[1])[:out_size])
            if generation == self.generations:
                break
            weights = np.maximum(scores, 0.0)
            p = weights / weights.sum() if weights.sum() > 0 else None
            children: list[Config] = []
            attempts = 0
            while len(children) < self.population and attempts < 4:
                attempts += 1
                need = self.population - len(children)
                parents = rng.choice(len(pop), size=need, p=p)
                mates = rng.choice(len(pop), size=need, p=p)
                cross = rng.random(need) < self.crossover_prob
                mutate = rng.random(need) < self.mutation_prob
                rules = rng.choice(len(rule_names), size=need, p=rule_p)
                for i in range(need):
                    child = pop[parents[i]]
                    if cross[i]:
                        child = crossover(child, pop[mates[i]], rng)
                    if mutate[i]:
                        child = MUTATIONS[rule_names[rules[i]]](space, child, rng)
                    if child is None or not space.is_valid(child):  # a GPU's limits, a template's combinations
                        continue
                    children.append(child)
            pop = children or pop
        ranked = sorted(best.items(), key=lambda kv: -kv[1])[:out_size]
        return [config for config, _ in ranked]
