"""The compare board: every run's result, and the statistics the tables show (mean and range or 95 % interval).

An env is a layer or a network (a layer is a network of one task), and its
runs are read the same way. Per env x agent (a network's agents are its task
schedulers), the best GFLOP/s after N measurements and after T seconds of
tuning clock (:meth:`TuningResult.best_at`; a network's GFLOP/s are its
layers' FLOPs over its estimated latency), the final best, the final best
re-timed at the end, and the number of measurements needed to reach 95 % of
the run's own final best; each as the mean and min-max over seeds. Then
the field's methodology score (:mod:`.methodology`) of each agent's mean
best-so-far curve against random search (0) and the best known result (1),
over trials (``score``) and over tuning clock (``score(t)``), and the area
under each run's best-so-far curve as a fraction of the best known's (``AUC``).
With the reference agent among the agents (round-robin, a network's baseline
scheduler), ``to-RR``: the trials a run needed to reach the final of the
reference's run *of the same seed*, and ``%RR``: that as a share of the
reference's trials (GTA's headline). The vendor libraries are extra rows (a
network's: PyTorch's weighted sum over its layers). Where an env's best winner
was timed against a vendor in one process (:mod:`.compare`'s ``paired_vendor``),
that vendor's entry holds it (``"paired"``), and :meth:`Leaderboard.paired_vendor_lines`
gives one line per env. Trial and time points
default to 25, 50 and 100 % of the budget and of the shortest run's clock.
:mod:`.render` turns a board into text, Markdown, CSV, JSON, plots and an
HTML page; :mod:`.compare` fills one.

**On landscapes** (``compare --backend landscape``: every config of each env's
benchmark space was measured, :mod:`tensorgym.landscape`) the true optimum is
known, and the board uses it: ``%opt``, each run's final best as a share of the
optimum, and the methodology score against the optimum, with random search's
baseline drawn without replacement from the whole space
(:func:`.methodology.exhaustive_reference`) instead of from the random runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorgym.tuner import TuningResult

from . import methodology
from .stats import PairedDifference, paired_by_seed

DEFAULT_TRIAL_POINTS = (16, 32, 64, 128)
DEFAULT_TIME_POINTS = (60.0, 120.0)
REACH_FRACTION = 0.95
METHODOLOGY_METRICS = ("score", "score(t)", "AUC")
FRACTIONS = (0.25, 0.5, 1.0)  # the points of a board given none: shares of the budget, of the shortest run's clock
REFERENCE = "round-robin"  # the agent other runs are asked to reach (to-RR, %RR) when it is on the board


@dataclass(frozen=True)
class Stat:
    """Mean and range of one metric over seeds (``values`` may hold None: not reached)."""

    values: tuple[float | None, ...]

    @property
    def known(self) -> list[float]:
        return [v for v in self.values if v is not None]

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.known)) if self.known else None

    @property
    def min(self) -> float | None:
        return min(self.known) if self.known else None

    @property
    def max(self) -> float | None:
        return max(self.known) if self.known else None

    @property
    def ci95(self) -> tuple[float | None, float | None]:
        """Student's t 95 % interval of the mean over seeds ((None, None) with fewer than 2 known values)."""
        from .stats import mean_ci

        _, low, high = mean_ci(self.values)
        return low, high

    def format_ci(self, digits: int = 1) -> str:
        """``mean [low, high]``: the mean and its 95 % interval (``[n/m]`` when some seeds have no value)."""
        if not self.known:
            return "-"
        low, high = self.ci95
        text = f"{self.mean:.{digits}f}"
        if low is not None:
            text += f" [{low:.{digits}f}, {high:.{digits}f}]"
        if len(self.known) < len(self.values):
            text += f" [{len(self.known)}/{len(self.values)}]"
        return text

    def format(self, digits: int = 1) -> str:
        if not self.known:
            return "-"
        text = f"{self.mean:.{digits}f}"
        if len(self.values) > 1:
            text += f" ({self.min:.{digits}f}-{self.max:.{digits}f})"
        if len(self.known) < len(self.values):
            text += f" [{len(self.known)}/{len(self.values)}]"
        return text

    def to_json(self) -> dict[str, Any]:
        low, high = self.ci95
        return {"mean": self.mean, "min": self.min, "max": self.max, "ci95": [low, high], "values": list(self.values)}


def trials_to_fraction(result: TuningResult, fraction: float = REACH_FRACTION) -> int | None:
    """Measurements the run needed to reach ``fraction`` of its own final best-so-far.

    The same as :meth:`TuningResult.trials_to_reach` for tensorgym's agents;
    for the MetaSchedule peer, whose ``best_gflops`` is a re-timing, it reads
    the timeline alone.
    """
    if not result.trials:
        return None
    final = result.trials[-1].best_gflops
    for trial in result.trials:
        if trial.best_gflops >= fraction * final > 0:
            return trial.index
    return None


@dataclass(frozen=True)
class LandscapeFacts:
    """What a board knows of an env's landscape: the true optimum and every config's throughput."""

    optimum_gflops: float
    scores: np.ndarray  # every config's recorded GFLOP/s (failed: 0)
    seconds_per_trial: float  # the space's mean wall seconds per measured config
    cpu: str  # where it was measured
    path: str = ""
    digest: str = ""  # of the file's bytes: what a run's resume key names (not the path, which moves)

    def to_json(self) -> dict[str, Any]:
        return {"optimum_gflops": self.optimum_gflops, "configs": int(self.scores.size),
                "seconds_per_trial": self.seconds_per_trial, "cpu": self.cpu, "path": self.path,
                "digest": self.digest}


@dataclass
class Leaderboard:
    """The results of a :func:`compare` run and the table made of them."""

    env_ids: list[str]
    agents: list[str]
    seeds: list[int]
    budget: int | None
    time_budget: float | None = None
    trial_points: tuple[int, ...] | None = DEFAULT_TRIAL_POINTS  # None: FRACTIONS of the budget
    time_points: tuple[float, ...] | None = DEFAULT_TIME_POINTS  # None: FRACTIONS of the shortest run's clock
    results: dict[tuple[str, str], list[TuningResult]] = field(default_factory=dict)
    result_files: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    vendor: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # env id -> workload label
    cluster: dict[str, Any] = field(default_factory=dict)  # a Ray run's address and record writer's statistics
    landscapes: dict[str, LandscapeFacts] = field(default_factory=dict)  # env id -> its landscape (backend landscape)
    timing: dict[str, Any] = field(default_factory=dict)  # where a run's wall time went (simulated runs)

    @property
    def points(self) -> tuple[int, ...]:
        """The trial points that fit the budget."""
        if self.trial_points is None:
            return () if self.budget is None else tuple(dict.fromkeys(max(1, round(f * self.budget))
                                                                      for f in FRACTIONS))
        if self.budget is None:
            return tuple(self.trial_points)
        fitting = tuple(p for p in self.trial_points if p <= self.budget)
        return fitting or (self.budget,)

    @property
    def seconds(self) -> tuple[float, ...]:
        """The time points (seconds of tuning clock)."""
        if self.time_points is not None:
            return tuple(self.time_points)
        ends = [r.trials[-1].elapsed_s for runs in self.results.values() for r in runs if r.trials]
        return tuple(dict.fromkeys(round(f * min(ends), 1) for f in FRACTIONS)) if ends else ()

    @property
    def reference_columns(self) -> tuple[str, str] | None:
        """The names of the columns that read the reference agent's runs (``to-RR``, ``%RR``), if it is here."""
        if REFERENCE not in self.agents:
            return None
        short = "".join(word[0].upper() for word in REFERENCE.split("-"))
        return f"to-{short}", f"%{short}"

    def metric_names(self) -> list[str]:
        return ([f"@{p}" for p in self.points] + [f"@{seconds_label(t)}" for t in self.seconds]
                + ["final", *(["%opt"] if self.landscapes else ["re-timed"]), f"to{round(REACH_FRACTION * 100)}%"]
                + list(METHODOLOGY_METRICS) + list(self.reference_columns or ()))

    def stats(self, env_id: str, agent: str) -> dict[str, Stat]:
        runs = self.results.get((env_id, agent), [])
        out = {f"@{p}": Stat(tuple(r.best_at(trials=p) for r in runs)) for p in self.points}
        out.update({f"@{seconds_label(t)}": Stat(tuple(r.best_at(seconds=t) for r in runs)) for t in self.seconds})
        out["final"] = Stat(tuple(r.best_gflops for r in runs))
        out["re-timed"] = Stat(tuple(r.extra.get("remeasured_gflops") for r in runs))
        facts = self.landscapes.get(env_id)
        if facts is not None:
            out["%opt"] = Stat(tuple(100.0 * r.best_gflops / facts.optimum_gflops for r in runs))
        out[f"to{round(REACH_FRACTION * 100)}%"] = Stat(tuple(
            None if (n := trials_to_fraction(r)) is None else float(n) for r in runs))
        out.update(self.methodology_stats(env_id, agent))
        if self.reference_columns is not None:
            reach, share = [], []
            for r in runs:
                ref = self.reference_run(env_id, r.seed)
                n = r.trials_to_reach(1.0, ref.best_gflops) if ref is not None and ref.best_gflops else None
                reach.append(None if n is None else float(n))
                share.append(None if n is None or not ref.trials else 100.0 * n / len(ref.trials))
            to_ref, share_of_ref = self.reference_columns
            out[to_ref], out[share_of_ref] = Stat(tuple(reach)), Stat(tuple(share))
        return out

    def reference_run(self, env_id: str, seed: int) -> TuningResult | None:
        """The reference agent's run of ``seed`` on ``env_id``."""
        return next((r for r in self.results.get((env_id, REFERENCE), []) if r.seed == seed), None)

    def env_runs(self, env_id: str) -> dict[str, list[TuningResult]]:
        """Every agent's results on ``env_id``."""
        return {agent: self.results.get((env_id, agent), []) for agent in self.agents}

    def methodology_reference(self, env_id: str) -> methodology.Reference | None:
        """What ``env_id``'s methodology scores are measured against: its landscape's whole space and true optimum,
        or else the random runs and the best known (None without random runs)."""
        facts = self.landscapes.get(env_id)
        if facts is not None:
            trials = self.budget if self.budget is not None else min(
                (len(r.trials) for runs in self.env_runs(env_id).values() for r in runs if r.trials), default=0)
            return methodology.exhaustive_reference(facts.scores, facts.seconds_per_trial, trials)
        return methodology.reference(self.env_runs(env_id), self.budget)

    def methodology_stats(self, env_id: str, agent: str) -> dict[str, Stat]:
        """``score`` and ``score(t)`` (one value: the mean curve over seeds) and ``AUC`` (per seed)."""
        runs = self.results.get((env_id, agent), [])
        scores = methodology.score_runs(runs, self.methodology_reference(env_id))
        facts = self.landscapes.get(env_id)
        optimum = facts.optimum_gflops if facts is not None else methodology.best_known(self.env_runs(env_id))
        trials = self.budget if self.budget is not None else min(
            (len(r.trials) for results in self.env_runs(env_id).values() for r in results if r.trials), default=0)
        return {"score": Stat((scores.trials,)), "score(t)": Stat((scores.time,)),
                "AUC": Stat(tuple(methodology.area_under_curve(r, trials, optimum) for r in runs))}

    def seed_scores(self, env_id: str, agent: str) -> list[float | None]:
        """Each of ``agent``'s runs' own methodology score over trials: their mean is the ``score`` column, their
        spread its interval over seeds (:func:`.methodology.seed_scores`)."""
        return methodology.seed_scores(self.results.get((env_id, agent), []), self.methodology_reference(env_id))

    def paired_scores(self, env_id: str, agent: str, other: str) -> PairedDifference:
        """``agent``'s methodology score minus ``other``'s, seed by seed over the seeds both ran: for an agent and
        its ablation, which draw each seed's initial sample alike, this removes what the seeds share."""
        def by_seed(name: str) -> dict[int, float | None]:
            runs = self.results.get((env_id, name), [])
            return dict(zip((r.seed for r in runs), self.seed_scores(env_id, name)))

        return paired_by_seed(by_seed(agent), by_seed(other))

    def rows(self) -> list[dict[str, Any]]:
        """One row per env x agent, then one per vendor reference: the table as data."""
        out = []
        for env_id in self.env_ids:
            for agent in self.agents:
                runs = self.results.get((env_id, agent), [])
                out.append({"env": env_id, "workload": self.labels.get(env_id, ""), "agent": agent,
                            "seeds": [r.seed for r in runs], "stats": self.stats(env_id, agent)})
            for ref in self.vendor.get(env_id, []):
                if ref.get("gflops") is not None:
                    out.append({"env": env_id, "workload": self.labels.get(env_id, ""),
                                "agent": f"vendor: {ref['library']} {ref['layout']}".rstrip(), "seeds": [],
                                "stats": {"final": Stat((ref["gflops"],)),
                                          "re-timed": Stat((ref.get("remeasured_gflops"),))}})
        return out

    def paired_vendor(self, env_id: str) -> dict[str, Any] | None:
        """The vendor reference ``env_id``'s best winner was timed against in one process (its ``"paired"``
        entry: :func:`.compare.time_paired_vendor`'s figures, with the run's agent and seed), or None."""
        return next((ref for ref in self.vendor.get(env_id, []) if ref.get("paired")), None)

    def paired_vendor_lines(self) -> list[str]:
        """One line per env whose best winner was timed against a vendor in one process: the paired ratio
        (the kernel's GFLOP/s over the vendor's), its spread, the vendor's drift and the steal, and the ratio of
        the same process's separate timings."""
        lines = []
        for env_id in self.env_ids:
            ref = self.paired_vendor(env_id)
            if ref is not None:
                paired = ref["paired"]
                name = " ".join(str(part) for part in (ref.get("library"), ref.get("layout")) if part)
                lines.append(f"{env_id}: best kernel ({paired.get('agent')} seed {paired.get('seed')}, "
                             f"{paired.get('space')} space) / {name}, {paired_text(paired)}")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": {"env_ids": self.env_ids, "agents": self.agents, "seeds": self.seeds, "budget": self.budget,
                         "time_budget": self.time_budget, "trial_points": list(self.points),
                         "time_points": list(self.seconds)},
            "rows": [{**r, "stats": {k: s.to_json() for k, s in r["stats"].items()}} for r in self.rows()],
            "methodology": {env_id: _reference_json(self.methodology_reference(env_id)) for env_id in self.env_ids},
            **({"cluster": self.cluster} if self.cluster else {}),
            **({"landscapes": {e: f.to_json() for e, f in self.landscapes.items()}} if self.landscapes else {}),
            **({"timing": self.timing} if self.timing else {}),
            "vendor": self.vendor, "errors": self.errors,
            "result_files": {f"{e}/{a}": files for (e, a), files in self.result_files.items()},
        }


def paired_text(paired: Mapping[str, Any]) -> str:
    """A kernel timed against a vendor in one process, as the kernel's speed over the vendor's:
    ``paired in one process: 0.97x (spread 1.2 %, vendor drift +0.4 %, steal 0.0 %); timed apart: 0.95x``."""
    drift, steal = paired.get("vendor_drift"), paired.get("steal")
    drift_text = "unknown" if drift is None else f"{100 * drift:+.1f} %"
    steal_text = "unknown" if steal is None else f"{100 * steal:.1f} %"
    return (f"paired in one process: {paired['speedup']:.2f}x (spread {100 * paired['spread']:.1f} %, vendor drift "
            f"{drift_text}, steal {steal_text}); timed apart: {paired['speedup_apart']:.2f}x")


def seconds_label(t: float) -> str:
    return f"{t:g}s"


def _reference_json(ref: methodology.Reference | None) -> dict[str, Any] | None:
    if ref is None:
        return None
    return {"best_known_gflops": ref.optimum, "random_sample_size": int(ref.sample.size),
            "random_seconds_per_trial": ref.seconds_per_trial, "trials": ref.trials,
            "optimum": "true (the whole space was measured)" if ref.exhaustive else "best known"}
