"""Does a landscape rank search methods as live runs do? Separated pairs, their order, Kendall's tau.

A landscape is a benchmark of search: its verdicts are worth something only where they agree with
what the same agents do live, in the whole space, on the machine. :func:`agreement` compares the
two at each trial count:

* a pair of agents is **separated live** when their 95 % intervals of the mean best (over seeds,
  :func:`~tensorgym.baselines.stats.mean_ci`) do not overlap: live says one is better;
* such a pair is **inverted** when the landscape's means order it the other way: the landscape
  would tell a user the opposite of what the machine shows. The target is none;
* **Kendall's tau** of the agents' means, live against the landscape: +1 the same order, -1 reversed.

Pairs that live does not separate say nothing either way: their order on the landscape is not wrong,
only not confirmed.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .stats import intervals_overlap, mean_ci

Bests = Mapping[str, Mapping[int, Sequence[float]]]  # agent -> trials -> each seed's best GFLOP/s


@dataclass(frozen=True)
class PairVerdict:
    """Two agents at one trial count: live, where the landscape puts them, and whether it inverts them."""

    better: str  # live's better agent (higher mean)
    worse: str
    trials: int
    live_means: tuple[float, float]  # (better, worse)
    separated: bool  # the live 95 % intervals do not overlap
    landscape_means: tuple[float, float] | None  # (better, worse) on the landscape; None: not run there

    @property
    def inverted(self) -> bool:
        """Separated live, and ordered the other way on the landscape."""
        return (self.separated and self.landscape_means is not None
                and self.landscape_means[0] < self.landscape_means[1])


@dataclass(frozen=True)
class Agreement:
    """Every pair of agents at every trial count, and Kendall's tau of the means per trial count."""

    pairs: tuple[PairVerdict, ...]
    tau: Mapping[int, float | None]

    @property
    def inverted(self) -> list[PairVerdict]:
        return [p for p in self.pairs if p.inverted]

    @property
    def separated(self) -> list[PairVerdict]:
        return [p for p in self.pairs if p.separated]


def agreement(live: Bests, landscape: Bests, trials: Sequence[int]) -> Agreement:
    """Compare the agents' bests live and on a landscape at each of ``trials`` (see the module docs).

    Agents missing on the landscape (or at a trial count) are compared live only; Kendall's tau is over the
    agents both have, None with fewer than two or where the means tie throughout.
    """
    from scipy.stats import kendalltau

    pairs: list[PairVerdict] = []
    tau: dict[int, float | None] = {}
    for n in trials:
        stats = {agent: mean_ci(runs[n]) for agent, runs in live.items() if n in runs and len(runs[n])}
        shown = {agent: mean_ci(runs[n])[0] for agent, runs in landscape.items() if n in runs and len(runs[n])}
        for a, b in itertools.combinations(sorted(stats), 2):
            better, worse = (a, b) if stats[a][0] >= stats[b][0] else (b, a)
            overlap = intervals_overlap(stats[better][1:], stats[worse][1:])
            on_landscape = (shown[better], shown[worse]) if better in shown and worse in shown else None
            pairs.append(PairVerdict(better, worse, n, (stats[better][0], stats[worse][0]), overlap is False,
                                     on_landscape))
        both = sorted(set(stats) & set(shown))
        value = None
        if len(both) >= 2:
            result = kendalltau([stats[a][0] for a in both], [shown[a] for a in both]).statistic
            value = None if result != result else float(result)  # NaN: a side's means all tie
        tau[n] = value
    return Agreement(tuple(pairs), tau)
