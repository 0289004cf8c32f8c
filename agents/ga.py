"""Ansor's evolutionary search with an XGBoost cost model (the ``ga`` agent; seed 000's baseline).

Each round (TVM v0.9 ``SketchPolicy::SearchOneRound``, constants of seed 000
notes A.2.1):

1. retrain the cost model on every measurement of the run (from scratch);
2. build an initial population: ``population`` (2048) fresh random configs
   (Ansor's ``SampleInitPopulation`` keeps every distinct valid state of its
   first batch of ``population`` draws) plus the best correctly measured
   configs so far, at most ``init_measured_ratio`` (20 %) x ``population``
   of them;
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
``tiles`` space (in the ``mapping`` space the same rules act on the tiles of
the config's mapping candidate, cross-over pairs configs of one candidate, and
children that break the candidate's register rule are dropped; candidates
change through the random share of each population):

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

**Checked against TVM v0.9 line by line** (``SketchPolicyNode::Search``,
``SearchOneRound``, ``SampleInitPopulation``, ``EvolutionarySearch``,
``PickStatesWithEpsGreedy``, ``MutateTileSize``, ``XGBModel``): the
population, the measured share of it, the roulette, the mutation
probability, rules and weights, the out size (twice a batch), the eps-greedy
split (61 + 3 of 64, the 3 from 9 random members of the initial population,
measured configs skipped) and the cost model's training (Ansor's
throughput-weighted squared error, see :mod:`.cost_model`) follow it.
Deviations kept, and why:

* ``num_warmup_sample`` is 64, not Ansor's 100 (and the model is trusted
  from 64 samples on, where Ansor's test is ``> 100``): at Ansor's value a
  128-trial run would be random search plus mutations throughout, since the
  second batch would still be picked on random scores;
* cross-over (``crossover_prob``, 0.2): Ansor's paper describes cross-over,
  its released code leaves it as a TODO; here a per-knob uniform cross-over
  stands in: the child takes each knob (a loop's whole tile vector,
  ``unroll``, ``cache_write``) from either parent with probability 1/2. Tile
  vectors are valid per loop, so every child is valid. ``crossover_prob=0``
  gives stock Ansor;
* measured configs that failed are not put into the initial population
  (Ansor's sort by throughput puts them last, so they only enter when fewer
  than 409 configs were measured; their offspring would be scored low anyway);
* Ansor keeps retrying a failed mutation until the next generation is full;
  here four refills are tried (a tiles mutation fails only when a loop has
  no divisor to move, so the generation is full in practice).

**The model.** ``model`` names a :class:`~tensorgym.agents.cost_model.CostModel`
set-up: ``"log-shallow"`` (default: log throughput and shallow trees, which
rank held-out configs better than Ansor's own training, see
:mod:`.cost_model`), ``"ansor-shallow"`` (Ansor's target and weights with
shallow trees: with ``features="all"`` it recalls more of the true top 10 %
of the shipped landscapes, opt-in because the recorded leaderboards ran the
default), ``"ansor"`` (Ansor's XGBModel as TVM v0.9 trains it) or
``"draft"`` (boosted from the analytical draft); ``features`` defaults to
``"both"``; ``"all"`` adds the code features.
``GAAgent("generic", model="ansor")`` is stock Ansor, ``GAAgent("af",
model="ansor")`` seed 000's Ansor-AF. ``model="random"`` scores every config
uniformly at random (the ablation registered as ``ga-random-model``): the
same evolution and picks with blind scores, so the difference to ``ga`` is
what the model contributes. Each round's batch is scored by the model before
it is measured and logged in ``extra["predictions"]``
(:class:`~tensorgym.agents.model_quality.PredictionLog`): Spearman between
prediction and measurement, the measured value of the config the model liked
best, and the mean GFLOP/s of the model's picks against the eps-greedy
random picks of the same round.

Resuming: the search is deterministic for a seed and its decisions depend
only on measured values, which a re-run reads back from the database; and
because a short batch is the prefix of the full one, a run with budget ``k``
makes exactly the first ``k`` trials of the same run with any budget ``N >=
k``. A run interrupted after ``k`` trials and restarted with the same seed
and database therefore replays its ``k`` trials for free and goes on.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.factors import divisors
from tensorgym.checks import choice, integer, is_number, number
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.record import Record
from tensorgym.spaces.base import MAX_SAMPLES, Space
from tensorgym.strategy import GeneratorStrategy, Search, SearchHistory

from .base import SearchAgent
from .cost_model import FEATURE_SETS, MODELS, check_model_options, make_model
from .model_quality import PredictionLog

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
    """Ansor's rule weights for the space's target (CPU or GPU tiles, mapping); one knob rule for template spaces."""
    if space.name not in ("tiles", "mapping"):
        return dict(KNOB_MUTATION_WEIGHTS)
    return dict(ANSOR_GPU_MUTATION_WEIGHTS if space.target.kind == "cuda" else ANSOR_CPU_MUTATION_WEIGHTS)


def rules_view(space: Space, config: Config):
    """What the mutation rules read a config's loops, levels and choices from: the space itself, or, in a space
    whose mapping candidates have loop nests of their own (``mapping``), the config's candidate's tiling."""
    tiling_of = getattr(space, "tiling_of", None)
    return space if tiling_of is None else tiling_of(config)


def crossover(a: Config, b: Config, rng: np.random.Generator) -> Config:
    """Uniform cross-over per knob: each knob (a loop's tile vector, unroll, cache_write) from a or b."""
    picks = rng.random(len(a)) < 0.5
    return Config({knob: (b[knob] if pick else a[knob]) for knob, pick in zip(a, picks)})


def _measured(history: SearchHistory) -> tuple[list[Config], list[float]]:
    """The configs this run measured, in order, and their scores (GFLOP/s; failed: 0)."""
    return [r.config for r in history.records], [r.score for r in history.records]


# -- the agent ---------------------------------------------------------------------------------
class GAAgent(SearchAgent, GeneratorStrategy):
    """Ansor's evolutionary search guided by an online XGBoost cost model (see the module docs).

    Args:
        features: the cost model's features: ``"both"`` (default), ``"all"`` (both and the code features),
            ``"generic"`` (Ansor) or ``"af"`` (Ansor-AF).
        model: a :class:`~tensorgym.agents.cost_model.CostModel` set-up (``"log-shallow"``, the default;
            ``"ansor-shallow"``; ``"ansor"``; ``"draft"``) or ``"random"`` (random scores: the ablation); default
            :attr:`default_model`.
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
    spaces = ("tiles", "mapping", "cutlass")

    default_model = "log-shallow"

    def __init__(self, features: str = "both", *, model: str | None = None, population: int = 2048,
                 generations: int = 4, mutation_prob: float = 0.85, crossover_prob: float = 0.2, batch_size: int = 64,
                 eps_greedy: float = 0.05, init_measured_ratio: float = 0.2, num_warmup_sample: int = 64,
                 mutation_weights: Mapping[str, float] | None = None,
                 model_options: Mapping[str, Any] | None = None):
        choice("features", features, FEATURE_SETS)
        model = self.default_model if model is None else model
        choice("model", model, MODELS)
        population = integer("population", population, minimum=2, maximum=MAX_SAMPLES)
        generations = integer("generations", generations, minimum=0)
        batch_size = integer("batch_size", batch_size, minimum=1, maximum=MAX_SAMPLES)
        mutation_prob, crossover_prob, eps_greedy, init_measured_ratio = (
            number(name, p, minimum=0.0, maximum=1.0)
            for name, p in (("mutation_prob", mutation_prob), ("crossover_prob", crossover_prob),
                            ("eps_greedy", eps_greedy), ("init_measured_ratio", init_measured_ratio)))
        num_warmup_sample = integer("num_warmup_sample", num_warmup_sample, minimum=0)
        model_options = check_model_options(model_options)
        if mutation_weights is not None and not isinstance(mutation_weights, Mapping):
            raise InvalidTypeError(f"mutation_weights is a dict of rule -> weight, got "
                                   f"{type(mutation_weights).__name__}")
        if mutation_weights is not None:  # None: the space's own (default_mutation_weights), chosen in the search
            weights = dict(mutation_weights)
            unknown = set(weights) - set(MUTATIONS)
            if (unknown or not weights or not all(is_number(w) and math.isfinite(w) for w in weights.values())
                    or min(weights.values()) < 0 or sum(weights.values()) <= 0):
                raise InvalidArgumentError(f"mutation_weights maps rules {sorted(MUTATIONS)} to non-negative "
                                           f"weights (not all zero); got {weights}")
        self.features = features
        self.model = model
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
    def search(self, history: SearchHistory, rng: np.random.Generator) -> Search:
        space = history.space
        model = make_model(self.model, space, self.features, seed=int(rng.integers(2**31)), **self.model_options)
        self._model, self._rounds, self._model_rounds, self._predictions = model, 0, 0, PredictionLog()
        while not self.finishing:
            configs, values = _measured(history)
            trusted = len(configs) >= self.num_warmup_sample and len(configs) > 0
            if trusted and model.num_samples != len(configs):
                model.fit(configs, values)
            scorer = model.predict if trusted else (lambda pop: rng.random(len(pop)))
            batch, from_model = self._next_batch(history, rng, scorer, configs, values)
            if not batch:  # Ansor's retry_search_one_round_on_empty: fall back to random configs
                batch = history.sample(rng, self.batch_size)
                from_model = [False] * len(batch)
            if not batch:
                log.info("ga: the space has no unmeasured config left")
                break
            # What the model thought of the batch, before it is measured (a held-out test of the model).
            predicted = model.predict(batch) if trusted else None
            best_before = history.best.gflops if history.best is not None else 0.0
            start = len(history)
            records = yield batch
            if not records:
                break
            self._log_round(self._predictions, start, batch, from_model, records, predicted, best_before, trusted)
            self._rounds += 1
            self._model_rounds += trusted

    def summary(self) -> dict[str, Any]:
        model = self._model
        return {"model": model.describe(), "features": self.features, "rounds": self._rounds,
                "model_guided_rounds": self._model_rounds, "model_fits": model.fits, "population": self.population,
                "generations": self.generations, "batch_size": self.batch_size,
                "num_warmup_sample": self.num_warmup_sample, "predictions": self._predictions.to_json()}

    @staticmethod
    def _log_round(log: PredictionLog, start: int, batch: list[Config], from_model: list[bool],
                   records: list[Record], predicted: np.ndarray | None, best_before: float, trusted: bool) -> None:
        """One round of the prediction log: the model's picks and the eps-greedy random picks, as measured."""
        measured = {r.config: r.score for r in records}
        kept = [i for i, c in enumerate(batch) if c in measured]  # the budget may have cut the batch
        values = [measured[batch[i]] for i in kept]
        model_values = [measured[batch[i]] for i in kept if from_model[i]]
        random_values = [measured[batch[i]] for i in kept if not from_model[i]]
        facts: dict[str, Any] = {"guided": trusted, "model_picks": len(model_values),
                                 "model_mean": float(np.mean(model_values)) if model_values else None,
                                 "random_mean": float(np.mean(random_values)) if random_values else None}
        if predicted is None:
            log.add(start, [], [], best_before, best=float(max(values)) if values else None, **facts)
        else:
            log.add(start, predicted[kept], values, best_before, **facts)

    def _next_batch(self, history: SearchHistory, rng: np.random.Generator,
                    scorer: Callable[[list[Config]], np.ndarray],
                    configs: list[Config], values: list[float]) -> tuple[list[Config], list[bool]]:
        """One round: initial population, evolution, eps-greedy pick of ``batch_size`` unmeasured configs.

        Returns the picks in measuring order and, for each, whether the model picked it (or eps-greedy did).
        """
        n_measured = int(self.init_measured_ratio * self.population)
        best_first = [i for i in sorted(range(len(configs)), key=lambda i: -values[i]) if values[i] > 0][:n_measured]
        init = history.sample(rng, self.population) + [configs[i] for i in best_first]
        if not init:
            return [], []
        num_random = int(self.eps_greedy * self.batch_size)
        num_good = self.batch_size - num_random
        pool = [init[i] for i in rng.permutation(len(init))[:3 * num_random]] if num_random else []
        best = self._evolve(history, rng, init, scorer, out_size=2 * self.batch_size)

        picks: list[Config] = []
        from_model: list[bool] = []
        chosen: set[Config] = set()
        queues = ((iter(best), True), (iter(pool), False))
        while len(picks) < self.batch_size:
            order = queues if len(picks) < num_good else queues[::-1]
            config, source = next(order[0][0], None), order[0][1]
            if config is None:
                config, source = next(order[1][0], None), order[1][1]
            if config is None:
                break
            if config in chosen or history.seen(config) is not None:
                continue
            chosen.add(config)
            picks.append(config)
            from_model.append(source)
        return picks, from_model

    def _evolve(self, history: SearchHistory, rng: np.random.Generator, population: list[Config],
                scorer: Callable[[list[Config]], np.ndarray], out_size: int) -> list[Config]:
        """Ansor's EvolutionarySearch: the ``out_size`` best-scored unmeasured configs met, best first."""
        space = history.space
        weights = self.mutation_weights if self.mutation_weights is not None else default_mutation_weights(space)
        rule_names = list(weights)
        rule_p = np.array([weights[r] for r in rule_names]) / sum(weights.values())
        # Children are checked where the space constrains configs beyond the tiles' divisibility: a mapping
        # candidate's register rule, a GPU's thread, shared-memory and register limits, a template's combinations,
        # a benchmark space's bounds.
        # A bounded (benchmark) tiles space keeps only some of each level's divisors, which a tile move may leave.
        check_children = (hasattr(space, "tiling_of") or space.name != "tiles" or space.target.kind != "llvm"
                          or getattr(space, "bounds", None) is not None)
        best: dict[Config, float] = {}
        pop = list(population)
        for generation in range(self.generations + 1):
            scores = np.asarray(scorer(pop), dtype=np.float64)
            for config, score in zip(pop, scores):
                if history.seen(config) is None and score > best.get(config, -np.inf):
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
                    mate = pop[mates[i]]
                    if cross[i] and space.candidate_of(child) == space.candidate_of(mate):  # same knobs
                        child = crossover(child, mate, rng)
                    if mutate[i]:
                        child = MUTATIONS[rule_names[rules[i]]](rules_view(space, child), child, rng)
                        if child is None:
                            continue
                    if check_children and not space.is_valid(child):
                        continue
                    children.append(child)
            pop = children or pop
        ranked = sorted(best.items(), key=lambda kv: -kv[1])[:out_size]
        return [config for config, _ in ranked]


class GARandomModelAgent(GAAgent):
    """The ablation of :class:`GAAgent`: the same evolution with random scores in place of the cost model."""

    name = "ga-random-model"
    default_model = "random"
