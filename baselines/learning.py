"""What learning contributes to a search, with statistics: agents against random search and against their ablations.

:func:`analyse` takes the results of ``compare`` runs (env -> agent -> one
:class:`~tensorgym.tuner.TuningResult` per seed) and reports, per env:

* each agent's best GFLOP/s after each trial budget (``@128``, ``@512``:
  :meth:`TuningResult.best_at`), after each point of tuning clock, and its
  final best re-timed at the end; each as the mean over seeds with a 95 %
  interval (:func:`.stats.mean_ci`);
* each agent against the reference (``random``) at every budget, and with
  the final bests re-timed: the ratio of means with a bootstrap interval,
  Welch's and Mann-Whitney's p-values, and whether the agent is *above* it
  (higher mean, 95 % intervals that do not overlap, Welch p < 0.05);
* each learned agent against its ablation (``ga`` vs ``ga-random-model``,
  ``dgd`` vs ``dgd-random-model``): what the cost model contributes, by the
  best at each budget and by methodology score seed by seed (the two draw
  the same initial sample, so a paired interval of the difference resolves
  what separate intervals cannot); for DGD also the walks' mean moves and
  restarts beside the ablation's, where a model that saves trials shows
  even when the bests tie;
* the trials each run needs to reach the reference's mean best at the
  largest budget (``None``: never within its budget);
* seed 000's time-based headline: DGD's best after ``dgd_seconds`` of tuning
  clock against the GA's best after the largest budget (or after
  ``headline_trials`` trials of the runs named by ``headline_ga``, e.g. the GA
  at 1,000 trials), the ratio of means with its interval (a DGD run whose
  clock ended earlier is capped by its budget, and the report says so), and
  the run-to-run variability of both as seed 000 defines it (Eq. 1:
  ``(max - min) / max`` of the runs' bests);
* with ``optima`` (a landscape's true optimum per env), each agent's best as
  a fraction of it;
* with ``references`` (what each env's methodology scores are measured
  against: on a landscape, its whole space and true optimum), each run's own
  score (:func:`.methodology.seed_scores`; their mean is the score of the
  mean curve) and each agent's mean score with its 95 % interval over seeds:
  the report's headline table, agents by envs;
* how well the models predicted while searching: the mean per-round Spearman
  from each run's prediction log, and for the GA the mean GFLOP/s of the
  model's picks against the eps-greedy random picks of the same rounds.

Across envs it checks the targets: GA and DGD above random, and above their
ablations, by score (separate 95 % intervals; against the ablation also seed
by seed: the difference's interval above 0); above random at the largest
budget, and at every budget, on at least ``need`` envs; each above its
ablation at the largest budget on as many; and the geometric mean over envs
of DGD@2min / GA@largest >= 0.95. Nothing here favours an agent: a worse agent
gets a ratio below 1 and ``above: false``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tensorgym.catalog import ABLATIONS
from tensorgym.text import format_table, slug
from tensorgym.tuner import TuningResult

from .methodology import Reference, seed_scores
from .stats import compare_runs, geomean, intervals_overlap, mean_ci, p_text, paired_by_seed, paired_text

HEADLINE_RATIO = 0.95


def _stat(values: Sequence[float | None]) -> dict[str, Any]:
    mean, low, high = mean_ci(values)
    return {"mean": mean, "ci": [low, high], "values": [v for v in values], "n": len(values)}


def trials_to_reach(result: TuningResult, threshold: float) -> int | None:
    """The first trial whose best-so-far reaches ``threshold`` GFLOP/s (None: never)."""
    if threshold <= 0:
        return None
    for trial in result.trials:
        if trial.best_gflops >= threshold:
            return trial.index
    return None


def _predictions(runs: Sequence[TuningResult]) -> dict[str, Any]:
    rhos, model_means, random_means = [], [], []
    for run in runs:
        log = run.extra.get("predictions") or {}
        if log.get("mean_rho") is not None:
            rhos.append(log["mean_rho"])
        for entry in log.get("log", []):
            if entry.get("guided") and entry.get("model_mean") is not None and entry.get("random_mean") is not None:
                model_means.append(entry["model_mean"])
                random_means.append(entry["random_mean"])
    return {"mean_rho": _stat(rhos), "model_pick_gflops": float(np.mean(model_means)) if model_means else None,
            "random_pick_gflops": float(np.mean(random_means)) if random_means else None,
            "rounds_compared": len(model_means)}


def _walks(runs: Sequence[TuningResult]) -> dict[str, Any] | None:
    """A DGD walk's mean moves, restarts and random starts per run (None: the runs are not DGD's). What a model buys
    a descent shows here before it shows in the best: a model that ends hop sets sooner leaves trials for more."""
    walks = [r.extra for r in runs if "moves" in r.extra and "restarts" in r.extra]
    if not walks:
        return None
    return {key: float(np.mean([w.get(key, 0) for w in walks])) for key in ("moves", "restarts", "random_starts")}


def _paired_scores(learned: Mapping[str, Any], ablation: Mapping[str, Any]) -> dict[str, Any]:
    """The learned agent's methodology score minus its ablation's, seed by seed (the seeds both ran): the two draw
    the same initial sample, so what the seeds share cancels."""
    return paired_by_seed(dict(zip(learned["seeds"], learned["score"]["values"])),
                          dict(zip(ablation["seeds"], ablation["score"]["values"]))).to_json()


def variability(values: Sequence[float | None]) -> float | None:
    """Seed 000's run-to-run variability (its Eq. 1): ``(max - min) / max`` of the runs' bests (None: no runs)."""
    kept = [float(v) for v in values if v is not None]
    if not kept or max(kept) <= 0:
        return None
    return (max(kept) - min(kept)) / max(kept)


def analyse(results: Mapping[str, Mapping[str, Sequence[TuningResult]]], budgets: Sequence[int] = (128, 512),
            time_points: Sequence[float] = (60.0, 120.0, 180.0, 240.0, 300.0), reference: str = "random",
            dgd: str = "dgd", ga: str = "ga", dgd_seconds: float = 120.0, need: int = 2,
            labels: Mapping[str, str] | None = None, *, headline_dgd: str | None = None,
            headline_ga: str | None = None, headline_trials: int | None = None,
            optima: Mapping[str, float] | None = None,
            references: Mapping[str, Reference] | None = None) -> dict[str, Any]:
    """The report as data (see the module docs); ``results``: env -> agent -> runs (one per seed).

    ``headline_dgd`` / ``headline_ga``: the runs the headline compares (default ``dgd`` and ``ga``: runs with a longer
    budget can be kept under other names, e.g. ``"ga@1000"``); ``headline_trials``: the GA's trials there (default:
    the largest budget). ``optima``: env -> the true optimum's GFLOP/s, for the fraction-of-optimum figures.
    ``references``: env -> what its methodology scores are measured against (a landscape's
    :func:`~.methodology.exhaustive_reference`: the true optimum), for each run's score and the headline table.
    """
    budgets = sorted(int(b) for b in budgets)
    top = budgets[-1]
    headline_dgd = headline_dgd or dgd
    headline_ga = headline_ga or ga
    ga_trials = int(headline_trials or top)
    time_points = sorted({float(t) for t in time_points} | {float(dgd_seconds)})
    envs: dict[str, Any] = {}
    for env_id, by_agent in results.items():
        ref_runs = list(by_agent.get(reference, []))
        score_ref = (references or {}).get(env_id)
        ref_best = {b: [r.best_at(trials=b) for r in ref_runs] for b in budgets}
        threshold = float(np.mean(ref_best[top])) if ref_runs else 0.0
        agents: dict[str, Any] = {}
        for agent, runs in by_agent.items():
            runs = list(runs)
            entry: dict[str, Any] = {"seeds": [r.seed for r in runs]}
            for b in budgets:
                values = [r.best_at(trials=b) for r in runs]
                entry[f"@{b}"] = _stat(values)
                if optima and optima.get(env_id):
                    entry[f"opt@{b}"] = _stat([None if v is None else v / optima[env_id] for v in values])
                if agent != reference and ref_runs:
                    entry[f"vs_{reference}@{b}"] = compare_runs(values, ref_best[b]).to_json()
            for t in time_points:
                entry[f"@{t:g}s"] = _stat([r.best_at(seconds=t) for r in runs])
            retimed = [r.extra.get("remeasured_gflops") for r in runs]
            entry["re-timed"] = _stat(retimed)
            if agent != reference and ref_runs:
                entry[f"re-timed_vs_{reference}"] = compare_runs(
                    retimed, [r.extra.get("remeasured_gflops") for r in ref_runs]).to_json()
            entry["score"] = _stat(seed_scores(runs, score_ref))
            entry["clock_s"] = _stat([r.trials[-1].elapsed_s if r.trials else None for r in runs])
            reach = [trials_to_reach(r, threshold) for r in runs]
            entry[f"to_{reference}@{top}"] = {"values": reach, "reached": sum(v is not None for v in reach),
                                              "median": float(np.median([v for v in reach if v is not None]))
                                              if any(v is not None for v in reach) else None}
            entry["predictions"] = _predictions(runs)
            entry["walk"] = _walks(runs)
            agents[agent] = entry
        ablations = {}
        for learned, ablation in ABLATIONS.items():
            if learned in by_agent and ablation in by_agent:
                ablations[learned] = {f"@{b}": compare_runs([r.best_at(trials=b) for r in by_agent[learned]],
                                                            [r.best_at(trials=b) for r in by_agent[ablation]]).to_json()
                                      for b in budgets}
                ablations[learned]["score_paired"] = _paired_scores(agents[learned], agents[ablation])
        headline = None
        if headline_dgd in by_agent and headline_ga in by_agent:
            dgd_runs = by_agent[headline_dgd]
            dgd_values = [r.best_at(seconds=dgd_seconds) for r in dgd_runs]
            ga_values = [r.best_at(trials=ga_trials) for r in by_agent[headline_ga]]
            capped = sum(1 for r in dgd_runs if r.trials and r.trials[-1].elapsed_s < dgd_seconds)
            headline = {**compare_runs(dgd_values, ga_values).to_json(), "dgd_runs_capped_by_budget": capped,
                        "variability": {"dgd_at_seconds": variability(dgd_values),
                                        "dgd_at_trials": variability([r.best_at(trials=ga_trials) for r in dgd_runs]),
                                        "ga_at_trials": variability(ga_values)}}
        envs[env_id] = {"label": (labels or {}).get(env_id, ""), "threshold": threshold, "agents": agents,
                        "ablations": ablations, "headline": headline,
                        "optimum": (optima or {}).get(env_id)}

    def above(agent: str, key: str = f"vs_{reference}@{top}") -> list[str]:
        """Envs where ``agent``'s mean is above the reference's and the 95 % intervals do not overlap."""
        out = []
        for env_id, env in envs.items():
            cmp = env["agents"].get(agent, {}).get(key)
            if cmp and cmp["separated"] and cmp["mean_a"] > cmp["mean_b"]:
                out.append(env_id)
        return out

    def above_by_score(agent: str, other: str = reference) -> list[str]:
        """Envs where ``agent``'s mean score is above ``other``'s and their 95 % intervals do not overlap."""
        out = []
        for env_id, env in envs.items():
            mine, theirs = env["agents"].get(agent, {}).get("score"), env["agents"].get(other, {}).get("score")
            if mine and theirs and mine["mean"] is not None and theirs["mean"] is not None \
                    and mine["mean"] > theirs["mean"] and intervals_overlap(mine["ci"], theirs["ci"]) is False:
                out.append(env_id)
        return out

    def above_ablation_paired(agent: str) -> list[str]:
        """Envs where ``agent``'s score minus its ablation's, seed by seed, has a 95 % interval above 0."""
        return [env_id for env_id, env in envs.items()
                if (env["ablations"].get(agent, {}).get("score_paired") or {}).get("above")]

    def above_everywhere(agent: str) -> list[str]:
        """Envs where ``agent`` is above the reference at every budget."""
        sets = [set(above(agent, f"vs_{reference}@{b}")) for b in budgets]
        return [e for e in envs if all(e in s for s in sets)]

    def above_ablation(agent: str) -> list[str]:
        out = []
        for env_id, env in envs.items():
            cmp = env["ablations"].get(agent, {}).get(f"@{top}")
            if cmp and cmp["separated"] and cmp["mean_a"] > cmp["mean_b"]:
                out.append(env_id)
        return out

    # Landscape runs have nothing re-timed at the end (the landscape is the measurement).
    retimed_anywhere = any(agent["re-timed"]["mean"] is not None for env in envs.values()
                           for agent in env["agents"].values())
    ratios = [r["headline"]["ratio"] for r in envs.values() if r["headline"]]
    headline_geomean = geomean(ratios)
    enough = min(need, len(envs))
    every = "@" + ",".join(str(b) for b in budgets)
    scored = any(agent["score"]["mean"] is not None for env in envs.values() for agent in env["agents"].values())
    targets = {
        **{f"{a} above {other} by score": {"envs": (won := above_by_score(a, other)), "met": len(won) >= enough}
           for a in (ga, dgd) for other in (reference, ABLATIONS[a])
           if scored and any(other in env["agents"] for env in envs.values())},
        **{f"{a} above {ABLATIONS[a]} by score, paired by seed": {
            "envs": (won := above_ablation_paired(a)), "met": len(won) >= enough}
           for a in (ga, dgd) if scored and any(a in env["ablations"] for env in envs.values())},
        f"{ga} above {reference}@{top}": {"envs": above(ga), "met": len(above(ga)) >= enough},
        f"{dgd} above {reference}@{top}": {"envs": above(dgd), "met": len(above(dgd)) >= enough},
        **{f"{a} above {reference}{every}": {"envs": above_everywhere(a), "met": len(above_everywhere(a)) >= enough}
           for a in (ga, dgd) if len(budgets) > 1},
        **{f"{a} above {ABLATIONS[a]}@{top}": {"envs": above_ablation(a), "met": len(above_ablation(a)) >= enough}
           for a in (ga, dgd) if any(a in env["ablations"] for env in envs.values())},
        **{f"{a} above {reference}, final bests re-timed": {
            "envs": above(a, f"re-timed_vs_{reference}"),
            "met": len(above(a, f"re-timed_vs_{reference}")) >= min(need, len(envs))} for a in (ga, dgd)
           if retimed_anywhere},
        f"{dgd}@{dgd_seconds:g}s / {ga}@{ga_trials}": {"geomean": headline_geomean, "met": headline_geomean is not None
                                                       and headline_geomean >= HEADLINE_RATIO},
    }
    return {"settings": {"budgets": budgets, "time_points": list(time_points), "reference": reference,
                         "dgd_seconds": dgd_seconds, "need": need, "headline_dgd": headline_dgd,
                         "headline_ga": headline_ga, "headline_trials": ga_trials}, "envs": envs, "targets": targets}


# -- text ----------------------------------------------------------------------------------
def _ci(stat: Mapping[str, Any], digits: int = 1) -> str:
    if stat["mean"] is None:
        return "-"
    low, high = stat["ci"]
    text = f"{stat['mean']:.{digits}f}"
    return text + (f" [{low:.{digits}f}, {high:.{digits}f}]" if low is not None else "")


def _percent(stat: Mapping[str, Any]) -> dict[str, Any]:
    """A fraction's statistic in per cent."""
    def scale(v: float | None) -> float | None:
        return None if v is None else 100.0 * v

    return {**stat, "mean": scale(stat["mean"]), "ci": [scale(c) for c in stat["ci"]]}


def _ratio(cmp: Mapping[str, Any] | None) -> str:
    if not cmp or cmp["ratio"] is None:
        return "-"
    low, high = cmp["ratio_ci"]
    return f"{cmp['ratio']:.2f}" + (f" [{low:.2f}, {high:.2f}]" if low is not None else "")


def _score_headline(report: Mapping[str, Any]) -> list[str]:
    """The headline table: each agent's methodology score on each env, mean [95 % interval] over seeds (empty
    without scores). Runs kept under another name for a longer budget (``ga@1000``) are left to the tables below."""
    envs = report["envs"]
    agents = list(dict.fromkeys(a for env in envs.values() for a, entry in env["agents"].items()
                                if "@" not in a and entry.get("score", {}).get("mean") is not None))
    if not agents:
        return []
    reference = report["settings"]["reference"]
    cells = [[agent] + [_ci(envs[e]["agents"][agent]["score"], 2) if agent in envs[e]["agents"] else "-"
                        for e in envs] for agent in agents]
    lines = [f"\n== headline: methodology score against the true optimum, mean [95 % interval] over seeds "
             f"(0: {reference} search's expected curve, 1: the optimum from the first trial) ==",
             format_table(cells, ["agent", *(envs[e]["label"] or e for e in envs)])]
    paired = [[f"{learned} - {ablation}"] + [paired_text(envs[e]["ablations"].get(learned, {}).get("score_paired"))
                                             for e in envs]
              for learned, ablation in ABLATIONS.items()
              if any(envs[e]["ablations"].get(learned, {}).get("score_paired") for e in envs)]
    if paired:
        lines += ["\nwhat the model adds: the score minus the ablation's, seed by seed (both draw the same initial "
                  "sample); mean [95 % interval], seeds won / paired, Wilcoxon signed-rank p",
                  format_table(paired, ["difference", *(envs[e]["label"] or e for e in envs)])]
    return lines


def render(report: Mapping[str, Any]) -> str:
    """The report as text: one table per env, then the ablations, the headline and the targets."""
    settings = report["settings"]
    budgets, reference = settings["budgets"], settings["reference"]
    top = budgets[-1]
    lines = _score_headline(report)
    for env_id, env in report["envs"].items():
        lines.append(f"\n== {env_id} {('(' + env['label'] + ')') if env['label'] else ''}: best GFLOP/s, mean "
                     f"[95 % interval] over seeds; ratio to {reference} [bootstrap 95 %], Welch p ==")
        optimum = env.get("optimum")
        retimed = any(entry["re-timed"]["mean"] is not None for entry in env["agents"].values())
        header = (["agent", "n"] + [f"@{b}" for b in budgets] + ([f"%opt@{top}"] if optimum else [])
                  + [f"/{reference}@{top}", "p"] + (["re-timed", f"re-timed/{reference}"] if retimed else [])
                  + [f"@{settings['dgd_seconds']:g}s", f"trials to {reference}@{top}", "model rho"])
        cells = []
        for agent, entry in env["agents"].items():
            cmp = entry.get(f"vs_{reference}@{top}")
            reach = entry[f"to_{reference}@{top}"]
            reach_text = (f"{reach['median']:.0f} ({reach['reached']}/{len(reach['values'])})"
                          if reach["median"] is not None else f"- (0/{len(reach['values'])})")
            rho = entry["predictions"]["mean_rho"]
            opt = [_ci(_percent(entry[f"opt@{top}"]), 0)] if optimum else []
            cells.append([agent, str(len(entry["seeds"]))] + [_ci(entry[f"@{b}"]) for b in budgets] + opt
                         + [_ratio(cmp), p_text(cmp["p_welch"]) if cmp else "-"]
                         + ([_ci(entry["re-timed"]), _ratio(entry.get(f"re-timed_vs_{reference}"))] if retimed else [])
                         + [_ci(entry[f"@{settings['dgd_seconds']:g}s"]), reach_text,
                            f"{rho['mean']:.2f}" if rho["mean"] is not None else "-"])
        lines.append(format_table(cells, header))
        for learned, by_budget in env["ablations"].items():
            parts = [f"@{b}: x{_ratio(c)} (Welch p {p_text(c['p_welch'])})" for b, c in
                     ((b, by_budget[f"@{b}"]) for b in budgets)]
            lines.append(f"model contribution, {learned} / {ABLATIONS[learned]}: " + "; ".join(parts))
        for learned, ablation in ABLATIONS.items():
            walk, blind = (env["agents"].get(a, {}).get("walk") for a in (learned, ablation))
            if walk and blind:
                lines.append(f"{learned} walks: {walk['moves']:.1f} moves and {walk['restarts']:.1f} restarts a run "
                             f"({walk['random_starts']:.1f} from random configs); {ablation}: {blind['moves']:.1f}"
                             f" and {blind['restarts']:.1f} ({blind['random_starts']:.1f})")
        ga_pred = env["agents"].get("ga", {}).get("predictions", {})
        if ga_pred.get("rounds_compared"):
            lines.append(f"ga rounds: the model's picks measured {ga_pred['model_pick_gflops']:.1f} GFLOP/s on "
                         f"average, the eps-greedy random picks {ga_pred['random_pick_gflops']:.1f} "
                         f"({ga_pred['rounds_compared']} rounds)")
        if env["headline"]:
            h = env["headline"]
            capped = (f"; {h['dgd_runs_capped_by_budget']} DGD run(s) ended before that clock (capped by budget)"
                      if h["dgd_runs_capped_by_budget"] else "")
            trials = settings.get("headline_trials", top)
            var = h.get("variability") or {}

            def pct(value: float | None) -> str:
                return "-" if value is None else f"{100 * value:.1f} %"

            runs = f"{settings.get('headline_dgd', 'dgd')}, {settings.get('headline_ga', 'ga')}"
            lines.append(f"dgd@{settings['dgd_seconds']:g}s / ga@{trials} (runs: {runs}): {_ratio(h)} "
                         f"(Welch p {p_text(h['p_welch'])}){capped}")
            if var:
                lines.append(f"variability (max - min) / max over seeds: dgd@{settings['dgd_seconds']:g}s "
                             f"{pct(var['dgd_at_seconds'])}, dgd@{trials} {pct(var['dgd_at_trials'])}, "
                             f"ga@{trials} {pct(var['ga_at_trials'])}")
    lines.append("\n== targets ==")
    for name, target in report["targets"].items():
        detail = (f"envs: {', '.join(target['envs']) or 'none'}" if "envs" in target
                  else f"geomean {target['geomean']:.2f}" if target.get("geomean") is not None else "no data")
        lines.append(f"{'MET    ' if target['met'] else 'NOT MET'} {name}: {detail}")
    return "\n".join(lines)


def plot(results: Mapping[str, Mapping[str, Sequence[TuningResult]]], out_dir: str | Path,
         labels: Mapping[str, str] | None = None) -> list[Path]:
    """One PNG per env: best-so-far against trials, the mean over seeds and its 95 % interval per agent."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from scipy.stats import t

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for env_id, by_agent in results.items():
        fig = Figure(figsize=(9, 5.5), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        top = 0.0
        for i, (agent, runs) in enumerate(by_agent.items()):
            runs = [r for r in runs if r.trials]
            if not runs:
                continue
            n = max(len(r.trials) for r in runs)
            xs = np.arange(1, n + 1)
            curves = np.array([[r.best_at(trials=int(x)) for x in xs] for r in runs])
            mean = curves.mean(axis=0)
            top = max(top, float(mean.max()))
            style = "--" if agent in ABLATIONS.values() else "-"
            ax.plot(xs, mean, color=f"C{i % 10}", linestyle=style, label=f"{agent} (n={len(runs)})",
                    drawstyle="steps-post")
            if len(runs) > 1:
                half = t.ppf(0.975, len(runs) - 1) * curves.std(axis=0, ddof=1) / math.sqrt(len(runs))
                ax.fill_between(xs, mean - half, mean + half, color=f"C{i % 10}", alpha=0.15, step="post")
        label = (labels or {}).get(env_id, "")
        ax.set(xlabel="measurements", ylabel="best GFLOP/s so far (mean, 95 % interval)",
               title=f"{label} ({env_id})" if label else env_id)
        ax.grid(alpha=0.3)
        ax.set_ylim(0, 1.25 * top if top > 0 else 1.0)  # the means set the scale; wide intervals are clipped
        ax.legend(fontsize=8, loc="lower right")
        path = out / f"{slug(env_id)}.png"
        fig.savefig(path, dpi=110)
        paths.append(path)
    return paths
