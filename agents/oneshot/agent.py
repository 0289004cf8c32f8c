"""The ``one-shot`` agent (seed 004): search the predictor's landscape once, measure only its top k.

No measurement guides the search. The agent (seed 004 §3.5):

1. refuses a predictor trained on another machine
   (:class:`~tensorgym.agents.oneshot.model.TargetMismatch`);
2. searches the space with the predictor as the only score, with seed 004's
   code-generation constants: **simulated annealing** (512 parallel walkers,
   at most 160 steps, each walker proposes a random 1-hop neighbour accepted
   with probability ``exp((new - old) / T)``, ``T`` falling linearly from 1
   to 0, stopping when the top k has not changed for 50 steps) and a
   **genetic algorithm** (population 512, 120 generations, the 96 best kept
   as elites, the others children of two roulette-drawn parents by uniform
   cross-over per knob (a loop's whole tile vector is one knob, so children
   stay valid), each knob of a child re-drawn with probability 0.1);
3. takes the ``k`` best-predicted distinct configs among *all* configs the
   two searches visited (seed 004 does not say whether the final population
   or all visited states; all visited states lose nothing);
4. measures exactly those ``k`` (fewer only if the budget is smaller), in one
   batch through the Tuner, and keeps the best measured one.

**Several predictors** (``model=[a.pt, b.pt]``, e.g. one reading every feature and one reading the
operator-independent ones only): each runs its own search, and the ``k`` measured configs are their
top lists interleaved rank by rank (the best of each, then the second of each, ...; a config two
lists share is measured once). Where the predictors disagree about a layer none of them has seen,
the batch covers each one's best guesses instead of betting it on one; with one predictor it is
seed 004's top k.

``optimizer="sa"`` or ``"ga"`` runs one search (seed 004's one-shot-sa and
one-shot-ga), ``"sa+ga"`` both. ``"exhaustive"`` scores every config of a
bounded space (a landscape's benchmark sub-space holds a few thousand: one
batch of predictions costs less than the searches, and finds the predictor's
true top k instead of the top of what the walkers happened to visit). The
default, ``"auto"``, is exhaustive on a bounded space of at most
:data:`EXHAUSTIVE_MAX` configs and both searches elsewhere. Every search keeps
to the space's bounds; a config the space refuses is never measured.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError
from tensorgym.factors import factorizations
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.strategy import GeneratorStrategy, Search, SearchHistory

from ..base import SearchAgent
from .features import BatchFeaturizer
from .model import load_predictor

log = logging.getLogger(__name__)

OPTIMIZERS = ("auto", "sa+ga", "sa", "ga", "exhaustive")
MAX_HOP_TRIES = 8  # random (coordinate, direction) draws before a walker stays put for a step
EXHAUSTIVE_MAX = 65_536  # a bounded space up to this size is scored whole by "auto"


class PredictedLandscape:
    """The predictor's scores of one space's configs, cached; remembers the best it scored.

    Configs are handled as *genomes* inside (tuples of their knob values, in the featurizer's
    :attr:`~tensorgym.agents.oneshot.features.BatchFeaturizer.genome` order): building a
    :class:`~tensorgym.config.Config` for each of the hundred thousand candidates of a search
    would cost more than predicting them.
    """

    def __init__(self, predictor, space: TilesSpace, keep: int):
        self.predictor = predictor
        self.featurizer = BatchFeaturizer(space)
        self.names = self.featurizer.genome
        self.scores: dict[tuple, float] = {}
        self.keep = keep
        self._top: list[tuple[float, tuple]] = []  # the ``keep`` best, best first

    def genome(self, config: Config) -> tuple:
        return tuple(config[name] for name in self.names)

    def config(self, genome: tuple) -> Config:
        return Config(dict(zip(self.names, genome)))

    def __len__(self) -> int:
        return len(self.scores)

    def __call__(self, configs: list[Config]) -> np.ndarray:
        """Predicted scores of ``configs``."""
        return self.score_genomes([self.genome(c) for c in configs])

    def score_of(self, config: Config) -> float | None:
        """The score of ``config`` if it was scored."""
        return self.scores.get(self.genome(config))

    def score_genomes(self, genomes: list[tuple]) -> np.ndarray:
        """Predicted scores of configs given as genomes."""
        new = list(dict.fromkeys(g for g in genomes if g not in self.scores))
        if new:
            scores = self.predictor.predict(self.featurizer.features(self.featurizer.genome_knobs(new)))
            self.scores.update(zip(new, scores.tolist()))
            best_new = np.argsort(-scores)[:self.keep]
            merged = self._top + [(float(scores[i]), new[i]) for i in best_new]
            self._top = heapq.nlargest(self.keep, merged, key=lambda item: item[0])
        return np.array([self.scores[g] for g in genomes])

    def top(self, k: int | None = None) -> list[Config]:
        """The ``k`` (at most ``keep``) best-scored configs seen that the space accepts, best first."""
        space = self.featurizer.space
        valid = [c for c in (self.config(g) for _, g in self._top) if space.is_valid(c)]
        return valid[:k]

    def top_genomes(self) -> set[tuple]:
        return {g for _, g in self._top}


def interleaved(lists: Sequence[Sequence[Config]], k: int) -> list[Config]:
    """The first ``k`` distinct configs of ``lists`` taken rank by rank (each list's first, then each one's
    second, ...)."""
    out: dict[Config, None] = {}
    for rank in range(max((len(each) for each in lists), default=0)):
        for each in lists:
            if rank < len(each) and len(out) < k:
                out.setdefault(each[rank])
    return list(out)


class OneShotAgent(SearchAgent, GeneratorStrategy):
    """Seed 004's One-Shot Tuner over the ``tiles`` space (see the module docs).

    Args:
        model: a predictor file written by ``tensorgym oneshot train``, or a list of them (see the module docs).
        k: configs measured (seed 004: 64; default 32).
        optimizer: ``"auto"`` (default), ``"sa+ga"``, ``"sa"``, ``"ga"`` or ``"exhaustive"`` (see the module docs).
        sa_steps, sa_batch, sa_early_stop: simulated annealing (160, 512 walkers, 50).
        ga_population, ga_steps, ga_mutation, ga_elites: the GA (512, 120, 0.1, 96).
    """

    name = "one-shot"
    spaces = ("tiles",)

    def __init__(self, model: str | Path | Sequence[str | Path] | None = None, *, k: int = 32, optimizer: str = "auto",
                 sa_steps: int = 160, sa_batch: int = 512, sa_early_stop: int = 50, ga_population: int = 512,
                 ga_steps: int = 120, ga_mutation: float = 0.1, ga_elites: int = 96):
        if model is None:
            raise InvalidArgumentError("the one-shot agent needs a trained predictor: --model PATH on the command "
                                       "line, model= in Python (train one with `tensorgym oneshot train`)")
        if not isinstance(k, int) or k < 1:
            raise InvalidArgumentError(f"k must be a positive number of measurements, got {k!r}")
        if optimizer not in OPTIMIZERS:
            raise InvalidArgumentError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        if min(sa_steps, sa_batch, sa_early_stop, ga_population, ga_steps) < 1 or not 0 <= ga_elites < ga_population:
            raise InvalidArgumentError("search sizes must be positive and ga_elites smaller than ga_population")
        if not 0.0 <= ga_mutation <= 1.0:
            raise InvalidArgumentError(f"ga_mutation must be in [0, 1], got {ga_mutation!r}")
        paths = [model] if isinstance(model, (str, Path)) else list(model)
        if not paths:
            raise InvalidArgumentError("give at least one predictor file")
        self.model_path = ", ".join(map(str, paths))
        self.predictors = [load_predictor(path) for path in paths]
        self.predictor = self.predictors[0]
        self.k, self.optimizer = k, optimizer
        self.sa_steps, self.sa_batch, self.sa_early_stop = sa_steps, sa_batch, sa_early_stop
        self.ga_population, self.ga_steps, self.ga_mutation, self.ga_elites = (ga_population, ga_steps,
                                                                               ga_mutation, ga_elites)

    def spawn(self) -> "OneShotAgent":
        """A copy for one more run that shares the (read-only) predictors instead of copying the networks."""
        predictors, self.predictors, self.predictor = self.predictors, [], None
        try:
            twin = super().spawn()
        finally:
            self.predictors, self.predictor = predictors, predictors[0]
        twin.predictors, twin.predictor = predictors, predictors[0]
        return twin

    def search(self, history: SearchHistory, rng: np.random.Generator) -> Search:
        space = history.space
        for predictor in self.predictors:
            predictor.check_target(space.target.fingerprint, self.model_path)
        t0 = time.monotonic()
        landscapes = [self.predicted(space, rng, predictor) for predictor in self.predictors]
        landscape = landscapes[0]
        budget = self.k if self.asked is None else min(self.k, self.asked)
        candidates = interleaved([each.top(budget) for each in landscapes], budget)
        search_s = time.monotonic() - t0
        records = yield candidates
        measured = [r.score for r in records]
        best_rank = int(np.argmax(measured)) + 1 if measured and max(measured) > 0 else None
        info = self.predictor.info
        return {"k": self.k, "optimizer": self.optimizer_for(space), "search_seconds": search_s,
                "configs_scored": sum(len(each) for each in landscapes), "best_predicted_rank": best_rank,
                "predicted_gflops": [float(z * info.label_std + info.label_mean) for z in landscape(candidates)]}

    def optimizer_for(self, space: TilesSpace) -> str:
        """The search :meth:`predicted` runs over ``space`` (``"auto"`` resolved; see the module docs)."""
        if self.optimizer != "auto":
            return self.optimizer
        bounded = getattr(space, "bounds", None) is not None and space.tiling.count() <= EXHAUSTIVE_MAX
        return "exhaustive" if bounded else "sa+ga"

    def predicted(self, space: TilesSpace, rng: np.random.Generator, predictor=None) -> PredictedLandscape:
        """Run the searches over the landscape of ``predictor`` (default: the first); the landscape holds every
        config they visited."""
        # Kept beyond k: a few of the best-scored may be refused by the space (a GA child over a device limit).
        landscape = PredictedLandscape(predictor or self.predictor, space, 2 * self.k)
        optimizer = self.optimizer_for(space)
        if optimizer == "exhaustive":
            if getattr(space, "bounds", None) is None:
                raise InvalidArgumentError(f"optimizer='exhaustive' scores every config of a bounded space; the "
                                           f"tiles space of {space.workload.label} is unbounded (use 'auto')")
            landscape.score_genomes([landscape.genome(c) for c in space.configs()])
        if "sa" in optimizer:
            self._anneal(space, landscape, rng)
        if "ga" in optimizer:
            self._evolve(space, landscape, rng)
        return landscape

    # -- simulated annealing ----------------------------------------------------------------
    def _anneal(self, space: TilesSpace, landscape: PredictedLandscape, rng: np.random.Generator) -> None:
        walkers = space.sample_many(rng, self.sa_batch)
        scores = landscape(walkers)
        top = landscape.top_genomes()
        unchanged = 0
        for step in range(self.sa_steps):
            temperature = 1.0 - step / self.sa_steps
            proposals = [self._random_hop(space, c, rng) for c in walkers]
            proposed = landscape(proposals)
            accept = np.exp(np.minimum(0.0, proposed - scores) / max(temperature, 1e-4)) > rng.random(len(walkers))
            walkers = [p if a else w for p, w, a in zip(proposals, walkers, accept)]
            scores = np.where(accept, proposed, scores)
            now = landscape.top_genomes()
            unchanged = unchanged + 1 if now == top else 0
            top = now
            if unchanged >= self.sa_early_stop:
                break

    @staticmethod
    def _random_hop(space: TilesSpace, config: Config, rng: np.random.Generator) -> Config:
        """A random 1-hop neighbour (or the config itself if the draws keep leaving the space)."""
        for _ in range(MAX_HOP_TRIES):
            target = space.hop(config, int(rng.integers(len(space.coordinates))), 1 if rng.random() < 0.5 else -1)
            if target is not None:
                return target
        return config

    # -- genetic algorithm ------------------------------------------------------------------
    def _evolve(self, space: TilesSpace, landscape: PredictedLandscape, rng: np.random.Generator) -> None:
        if space.bounds is not None:  # a bounded space lists its own tilings; factorisations would leave it
            choices = [tuple(space.tiling.tilings_of(lp.name)) for lp in space.loops]
        else:
            choices = [tuple(factorizations(lp.extent, space.levels[lp.name], space.max_innermost))
                       for lp in space.loops]
        scalars = space.scalar_knobs  # in the genome's order: loops, unroll, cache_write
        choices += [tuple(scalars.get("unroll", space.unroll_choices)), tuple(scalars.get("cache_write", (0, 1)))]
        n_knobs = len(choices)
        population = [landscape.genome(c) for c in space.sample_many(rng, self.ga_population)]
        for _ in range(self.ga_steps):
            scores = landscape.score_genomes(population)
            order = np.argsort(-scores)
            elites = [population[i] for i in order[:self.ga_elites]]
            weights = scores - scores.min() + 1e-9
            n_children = self.ga_population - len(elites)
            parents = rng.choice(len(population), size=(n_children, 2), p=weights / weights.sum())
            from_second = rng.random((n_children, n_knobs)) < 0.5  # uniform cross-over per knob
            mutate = rng.random((n_children, n_knobs)) < self.ga_mutation
            children = []
            for (a, b), cross, mutation in zip(parents, from_second, mutate):
                first, second = population[a], population[b]
                child = [second[i] if cross[i] else first[i] for i in range(n_knobs)]
                for i in np.flatnonzero(mutation):  # each knob re-drawn with probability ga_mutation
                    child[i] = choices[i][int(rng.integers(len(choices[i])))]
                children.append(tuple(child))
            population = elites + children
        landscape.score_genomes(population)
