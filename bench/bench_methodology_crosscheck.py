"""Cross-check of tensorgym's methodology score against the ``autotuning-methodology`` package, on shipped landscapes.

The methodology score against the true optimum is only trusted once it agrees with the
``autotuning-methodology`` package on at least one exported T4 landscape: the same numbers, or the
difference explained. This runs a few agents for N seeds on a shipped landscape through the normal
:class:`~tensorgym.tuner.Tuner` over :class:`~tensorgym.landscape.LandscapeEvaluator`, and scores the
same runs twice:

* **tensorgym**: :func:`baselines.methodology.exhaustive_reference` (true optimum, random search
  without replacement over the whole space) and :func:`~baselines.methodology.score_runs`: the
  agents' mean best-so-far over trials ``1..budget`` and over the tuning clock ``tpf..budget*tpf``;
* **the package** (1.1.0), on the landscape exported with :func:`tensorgym.landscape.write_t4`:
  the runs are written as the package writes Kernel Tuner's runs (``runner.write_results``, each
  evaluation a T4 result whose ``times`` add up to the tuner's clock), and then scored by the
  package's own entry point ``report_experiments.get_strategy_scores`` on an experiments file with
  its default settings (cutoff 0.95, start 0.01, resolution 1000, confidence 0.95): the route
  that finds the runs "in the cache" and runs no tuner. The package's classes (``RandomSearchCalculatedBaseline``,
  ``StochasticOptimizationAlgorithm``) are then called directly on the same data for its score over
  function evaluations (which ``get_strategy_scores`` does not report) and for a step-by-step
  decomposition of the difference: each step swaps one ingredient of the package's score for
  tensorgym's, so the steps add up exactly to the difference.

The runs use ``noise="none"``: the package looks every best-so-far value up in the space's sorted
values (``get_indices_in_distribution`` asserts it is there), which a value drawn from the recorded
samples is not. Besides ``random``, ``ga`` and ``dgd``, two made-up agents pin the scale: ``top5``
draws uniformly from the best 5 % of the configs (near 1), ``bottom50`` from the worse half (below 0).

    flock /tmp/tensorgym-cpu.lock python bench/bench_methodology_crosscheck.py [--layers R5 M3] [--seeds 20]
        [--budget 512] [--agents random ga dgd top5 bottom50] [--cpu FOLDER] [--report PATH]

Writes the report (default ``bench/reports/landscapes/methodology_crosscheck.txt``) and prints it. About 6
minutes with the defaults, nearly all of it the GA's and DGD's own compute.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as _dt
import io
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from tensorgym.baselines import methodology
from tensorgym.catalog import make_agent
from tensorgym.landscape import Landscape, LandscapeEvaluator, write_t4
from tensorgym.landscape.export import t4_document
from tensorgym.landscape.shipped import cpu_folder, shipped_landscapes
from tensorgym.strategy import SearchStrategy
from tensorgym.tuner import Tuner, TuningResult

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REPORT = ROOT / "bench" / "reports" / "landscapes" / "methodology_crosscheck.txt"
# The package's "all" objective time keys, in its schema's order (experiments.json).
TIME_KEYS = ["compilation", "runtimes", "framework", "search_algorithm", "validation"]
OBJECTIVE = "GFLOP/s"
# The package's defaults (experiments_defaults.json).
CUTOFF, CUTOFF_START, RESOLUTION, CONFIDENCE = 0.95, 0.01, 1000, 0.95


# -- the runs ----------------------------------------------------------------------------------------------------
class ChargedEvaluator(LandscapeEvaluator):
    """A landscape evaluator that remembers the wall seconds it charged each record, in the order it answered."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.charged: list[float] = []

    def evaluate(self, configs):
        records = super().evaluate(configs)
        self.charged += [r.wall_s for r in records]
        return records


class SliceStrategy(SearchStrategy):
    """Draws distinct configs uniformly from a fixed set of the landscape's rows first, then from the others."""

    def __init__(self, name: str, first: list, rest: list, batch_size: int = 16):
        self.name, self.first, self.rest, self.batch_size = name, first, rest, batch_size

    def start(self, space, rng, seed=0, database=None) -> None:
        super().start(space, rng, seed, database)
        order = [self.first[i] for i in rng.permutation(len(self.first))]
        self.order = order + [self.rest[i] for i in rng.permutation(len(self.rest))]

    def ask(self, n=None):
        size = self.batch_size if n is None else min(self.batch_size, n)
        batch, self.order = self.order[:size], self.order[size:]
        return batch


def make_strategy(name: str, landscape: Landscape) -> SearchStrategy:
    if name not in ("top5", "bottom50"):
        return make_agent(name)
    ranked = [landscape.configs[i] for i in np.argsort(-landscape.scores, kind="stable")]
    cut = max(1, round(0.05 * len(ranked))) if name == "top5" else len(ranked) // 2
    first, rest = (ranked[:cut], ranked[cut:]) if name == "top5" else (ranked[-cut:], ranked[:-cut])
    return SliceStrategy(name, first, rest)


@dataclasses.dataclass
class Run:
    result: TuningResult  # best-so-far in the landscape's recorded GFLOP/s (the T4 file's values)
    charged: list[float]  # the wall seconds the evaluator charged each trial
    compute_s: float  # real seconds the run took


def run_agent(landscape: Landscape, name: str, seed: int, budget: int) -> Run:
    evaluator = ChargedEvaluator(landscape, seed=seed, noise="none")
    tuner = Tuner(evaluator, budget=budget)
    start = time.perf_counter()
    strategy = make_strategy(name, landscape)
    extra = tuner.run(strategy, seed) or {}
    result = tuner.result(name, seed, **extra)
    if len(evaluator.charged) != len(result.trials):
        raise RuntimeError(f"{name}: {len(evaluator.charged)} records charged for {len(result.trials)} trials")
    return Run(recorded(result, landscape), evaluator.charged, time.perf_counter() - start)


def recorded(result: TuningResult, landscape: Landscape) -> TuningResult:
    """``result`` with each trial's GFLOP/s and best-so-far the landscape's recorded value (with ``noise="none"``
    the tuner's differ from them only by recomputing GFLOP/s from the 6-digit latency)."""
    scores, best, trials = landscape.scores, 0.0, []
    for t in result.trials:
        gflops = float(scores[landscape.index_of(t.config)]) if t.status == "ok" else None
        best = max(best, gflops or 0.0)
        trials.append(dataclasses.replace(t, gflops=gflops, best_gflops=best))
    return dataclasses.replace(result, trials=trials, best_gflops=best)


def t4_trajectory(run: Run, landscape: Landscape, document: dict) -> list[dict]:
    """The run as the package's ``write_results`` takes a Kernel Tuner run: one T4 result per evaluation, in order,
    times in seconds. ``compilation`` + ``runtimes`` + ``validation`` are the wall seconds the evaluator charged
    (the build's share of its batch, the samples, the rest of the run) and ``search_algorithm`` the agent's own
    time before the result: so the cumulative time of evaluation i is the tuner's clock at trial i."""
    out, previous = [], 0.0
    for trial, wall in zip(run.result.trials, run.charged):
        row = landscape.index_of(trial.config)
        samples = list(landscape.samples[row]) if landscape.ok[row] else []
        run_s = float(landscape.run_s[row])
        times = {"compilation": max(0.0, wall - run_s), "runtimes": samples, "framework": 0.0,
                 "search_algorithm": max(0.0, trial.elapsed_s - previous - wall),
                 "validation": max(0.0, run_s - sum(samples))}
        previous = trial.elapsed_s
        exported = document["results"][row]
        out.append({"configuration": exported["configuration"], "times": times,
                    "invalidity": exported["invalidity"], "correctness": exported["correctness"],
                    "measurements": exported["measurements"], "objectives": [OBJECTIVE]})
    clock = np.cumsum([sum(sum(v) if isinstance(v, list) else v for v in e["times"].values()) for e in out])
    drift = float(np.max(np.abs(clock - [t.elapsed_s for t in run.result.trials])))
    if drift > 1e-6:
        raise RuntimeError(f"the T4 times add up to the tuner's clock only within {drift:.3g} s")
    return out


# -- the package -------------------------------------------------------------------------------------------------
def quietly(function, *args, **kwargs):
    """Call the package without its console chatter and warnings (the report says what matters)."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def write_experiment(folder: Path, layer: str, device: str, t4_path: Path, agents: list[str], seeds: int) -> Path:
    """The experiments file (package defaults), the T1 input it insists on, and its folder layout."""
    t1 = folder / "T1.json"
    t1.write_text(json.dumps({"General": {"OutputFormat": "JSON"},
                              "KernelSpecification": {"KernelName": layer, "KernelFile": "landscape.c"}}))
    experiment = {
        "version": "1.2.0", "name": f"tensorgym-{layer}", "parent_folder": str(folder),
        "experimental_groups_defaults": {
            "applications": [{"name": layer, "folder": str(folder), "input_file": str(t1),
                              "objective_performance_keys": [OBJECTIVE], "minimization": False}],
            "gpus": [device], "pattern_for_full_search_space_filenames": {"regex": str(t4_path)},
            "autotuner": "KernelTuner", "stochastic": True, "repeats": seeds, "samples": 32,
            "minimum_fraction_of_budget_valid": 0.5, "minimum_number_of_valid_search_iterations": 1,
            "ignore_cache": False},
        "search_strategies": [{"name": a, "search_method": a, "display_name": a, "autotuner": "KernelTuner"}
                              for a in agents],
        "statistics_settings": {"cutoff_percentile": CUTOFF, "cutoff_percentile_start": CUTOFF_START,
                                "cutoff_type": "time", "objective_time_keys": ["all"]},
        "visualization_settings": {"plots": [{"scope": "aggregate", "style": "line"}], "resolution": RESOLUTION,
                                   "confidence_level": CONFIDENCE},
    }
    path = folder / "experiments.json"
    path.write_text(json.dumps(experiment, indent=1))
    return path


def results_description(folder: Path, layer: str, device: str, agent: str):
    from autotuning_methodology.caching import ResultsDescription

    return ResultsDescription(run_folder=folder / "run" / agent, application_name=layer, device_name=device,
                              group_name=agent, group_display_name=agent, stochastic=True,
                              objective_time_keys=list(TIME_KEYS), objective_performance_keys=[OBJECTIVE],
                              minimization=False)


def package_strategy_scores(folder: Path, experiment: Path, bag_seed: int) -> dict[str, dict[str, float]]:
    """``get_strategy_scores`` of the experiment (its runs already cached), the bagging seeded by ``bag_seed``."""
    from autotuning_methodology.report_experiments import get_strategy_scores

    np.random.seed(bag_seed)  # the package's BaggingRegressor draws from NumPy's global generator
    return quietly(get_strategy_scores, str(experiment))


@dataclasses.dataclass
class PackageView:
    """The package's objects for one landscape: its statistics, baseline, curves and ranges."""

    stats: Any
    baseline: Any
    curves: dict[str, Any]
    time_range: np.ndarray
    fevals_range: np.ndarray
    cutoff: tuple


def package_view(t4_path: Path, folder: Path, layer: str, device: str, agents: list[str]) -> PackageView:
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline
    from autotuning_methodology.curves import StochasticOptimizationAlgorithm
    from autotuning_methodology.searchspace_statistics import SearchspaceStatistics

    stats = quietly(SearchspaceStatistics, application_name=layer, device_name=device, minimization=False,
                    objective_time_keys=list(TIME_KEYS), objective_performance_keys=[OBJECTIVE],
                    full_search_space_file_path=t4_path)
    cutoff = stats.cutoff_point_fevals_time_start_end(CUTOFF_START, CUTOFF)
    fevals_start, fevals_end, time_start, time_end = cutoff
    curves = {a: StochasticOptimizationAlgorithm(results_description(folder, layer, device, a)) for a in agents}
    return PackageView(stats, RandomSearchCalculatedBaseline(stats), curves,
                       np.linspace(time_start, time_end, RESOLUTION), np.arange(fevals_start, fevals_end + 1), cutoff)


def joined(split: tuple) -> np.ndarray:
    """A curve the package returns split at its real stopping point, joined again (as ``report_experiments``)."""
    real, fictional = split[2], split[6]
    return np.concatenate([real, fictional]) if fictional.ndim > 0 and fictional.size else real


def package_time_curve(view: PackageView, agent: str) -> np.ndarray:
    """The package's curve over time: the bagged isotonic regression of the pooled runs' ranks (global RNG)."""
    dist = view.stats.objective_performances_total_sorted
    return joined(quietly(view.curves[agent].get_curve_over_time, view.time_range, dist=dist,
                          confidence_level=CONFIDENCE))


def package_time_curve_unbagged(view: PackageView, agent: str) -> np.ndarray:
    """The same curve without the bagging: the package's single isotonic fit (``indices_curve`` in
    ``get_curve_over_time``, which the bagged mean then replaces), held flat after its real stopping point."""
    from autotuning_methodology.curves import get_indices_in_distribution

    curve, dist, grid = view.curves[agent], view.stats.objective_performances_total_sorted, view.time_range
    times, values, stop, _, _ = quietly(curve._get_curve_over_time_values_in_range, grid, return_1d=True)
    indices = get_indices_in_distribution(values, dist)
    fitted = curve.get_isotonic_curve(times, indices, grid, ymin=np.min(indices), ymax=np.max(indices))
    out = dist[np.clip(np.round(fitted).astype(int), 0, dist.size - 1)]
    if stop < grid[-1]:
        index = int(np.nonzero(grid > stop)[0][0])
        out[index:] = out[index]
    return out


def package_fevals_curve(view: PackageView, agent: str) -> np.ndarray:
    """The package's curve over function evaluations: the rounded median rank of the runs at each evaluation."""
    dist = view.stats.objective_performances_total_sorted
    return joined(quietly(view.curves[agent].get_curve_over_fevals, view.fevals_range, dist=dist,
                          confidence_level=CONFIDENCE))


def package_baseline_reproduced(view: PackageView, draws: np.ndarray, rank_offset: int, smooth: bool) -> np.ndarray:
    """``RandomSearchCalculatedBaseline`` re-done here, its rank index moved by ``rank_offset``: the value at
    0-based index ``round(M (N + 1) / (M + 1)) + rank_offset`` of the ascending valid values, then (``smooth``)
    PCHIP through the distinct ``M`` evaluated on a uniform ``M`` grid. With offset 0 it must equal the package's."""
    from scipy.interpolate import PchipInterpolator

    dist = view.stats.objective_performances_total_sorted
    n = dist.size
    index = np.array([min(n - 1, round(m * (n + 1) / (m + 1))) for m in draws]) + rank_offset
    values = dist[np.clip(index, 0, n - 1)]
    if not smooth or draws.size <= 2:
        return values
    first = np.concatenate([[True], np.ediff1d(draws) > 0])
    if first.sum() < 2:
        return values
    return PchipInterpolator(draws[first], values[first])(np.linspace(draws[0], draws[-1], draws.size))


def package_draws_over_time(view: PackageView) -> np.ndarray:
    tpf = view.stats.get_time_per_feval("mean_per_feval")
    return np.array(np.round(np.maximum(view.time_range / tpf, 1)), dtype=int)


# -- tensorgym on any grid --------------------------------------------------------------------------------------
def time_curves(results: list[TuningResult], grid: np.ndarray) -> np.ndarray:
    """Each run's best-so-far at each time of ``grid`` (runs x grid)."""
    return np.array([[r.best_at(seconds=float(t)) for t in grid] for r in results])


def trials_curves(results: list[TuningResult], draws: np.ndarray) -> np.ndarray:
    """Each run's best-so-far after each number of trials of ``draws`` (runs x draws)."""
    return np.array([[r.best_at(trials=int(m)) for m in draws] for r in results])


def mean_standardised(curve, baseline, optimum) -> float:
    return float(np.mean(methodology.standardise(curve, baseline, optimum)))


def seed_spread(curves: np.ndarray, baseline: np.ndarray, optimum: float, resamples: int = 400) -> float:
    """The standard deviation of the score over bootstrap resamples of the runs (how much the seeds decide it)."""
    rng = np.random.default_rng(0)
    picks = rng.integers(len(curves), size=(resamples, len(curves)))
    return float(np.std([mean_standardised(curves[p].mean(axis=0), baseline, optimum) for p in picks]))


# -- one landscape -----------------------------------------------------------------------------------------------
def crosscheck(layer: str, landscape: Landscape, path: Path, agents: list[str], seeds: int, budget: int,
               bag_seeds: int, device: str) -> dict[str, Any]:
    runs: dict[str, list[Run]] = {}
    for agent in agents:
        runs[agent] = [run_agent(landscape, agent, seed, budget) for seed in range(seeds)]
        took = sum(r.compute_s for r in runs[agent])
        print(f"  {layer} {agent}: {seeds} runs of {budget} trials in {took:.1f} s", file=sys.stderr, flush=True)
    results = {a: [r.result for r in rs] for a, rs in runs.items()}
    values, tpf = landscape.scores, float(landscape.wall_s.mean())
    ref = methodology.exhaustive_reference(values, seconds_per_trial=tpf, trials=budget)
    if ref is None:
        raise RuntimeError(f"{layer}: no methodology score is defined on this landscape")
    tg = {a: methodology.score_runs(results[a], ref) for a in agents}
    # tensorgym's own ranges: the spread over seeds, and the score before the fix (median curve, value at rank)
    trials_axis, grid = np.arange(1, budget + 1), ref.time_grid()
    by_trials = {a: trials_curves(results[a], trials_axis) for a in agents}
    by_time = {a: time_curves(results[a], grid) for a in agents}
    spread = {a: (seed_spread(by_trials[a], ref.baseline_trials(), ref.optimum),
                  seed_spread(by_time[a], ref.baseline_time(), ref.optimum)) for a in agents}
    rank_trials = methodology.value_at_expected_rank(values, trials_axis)
    rank_time = methodology.value_at_expected_rank(values, grid / tpf)
    before = {a: (mean_standardised(np.median(by_trials[a], axis=0), rank_trials, ref.optimum),
                  mean_standardised(np.median(by_time[a], axis=0), rank_time, ref.optimum)) for a in agents}

    with tempfile.TemporaryDirectory(prefix=f"crosscheck-{layer}-") as tmp:
        folder = Path(tmp)
        t4_path = write_t4(landscape, folder / f"{layer}_{device}_T4.json")
        document = t4_document(landscape)
        for agent in agents:
            from autotuning_methodology.runner import write_results

            trajectories = [t4_trajectory(r, landscape, document) for r in runs[agent]]
            quietly(write_results, trajectories, results_description(folder, layer, device, agent))
        experiment = write_experiment(folder, layer, device, t4_path, agents, seeds)
        official = [package_strategy_scores(folder, experiment, seed) for seed in range(bag_seeds)]
        view = package_view(t4_path, folder, layer, device, agents)
        stats, baseline, optimum = view.stats, view.baseline, view.stats.total_performance_absolute_optimum()

        # The package's own score again from its classes, with the first bagging seed: the same numbers.
        np.random.seed(0)
        bagged = {a: package_time_curve(view, a) for a in agents}
        b_pkg_time = baseline.get_curve(view.time_range, "time")
        direct = {a: mean_standardised(bagged[a], b_pkg_time, optimum) for a in agents}

        # Over time: swap one ingredient of the package's score for tensorgym's at a time.
        draws_t = package_draws_over_time(view)
        reproduced = package_baseline_reproduced(view, draws_t, 0, smooth=True)
        b_shifted = package_baseline_reproduced(view, draws_t, -1, smooth=True)
        fractional = np.maximum(view.time_range / tpf, 1.0)
        b_rank_time = methodology.value_at_expected_rank(values, fractional)
        b_exact_time = methodology.expected_best_without_replacement(values, fractional)
        b_tg_time = methodology.expected_best_without_replacement(values, methodology.draws_by(view.time_range, tpf))
        time_steps = {}
        for a in agents:
            unbagged = package_time_curve_unbagged(view, a)
            mean_curve = time_curves(results[a], view.time_range).mean(axis=0)
            chain = [direct[a], mean_standardised(bagged[a], b_shifted, optimum),
                     mean_standardised(bagged[a], b_rank_time, optimum),
                     mean_standardised(unbagged, b_rank_time, optimum),
                     mean_standardised(mean_curve, b_rank_time, optimum),
                     mean_standardised(mean_curve, b_exact_time, optimum),
                     mean_standardised(mean_curve, b_tg_time, optimum), tg[a].time]
            time_steps[a] = chain

        # Over function evaluations (trials).
        fevals = view.fevals_range
        b_pkg_fevals = baseline.get_curve(fevals, "fevals")
        b_shifted_f = package_baseline_reproduced(view, fevals, -1, smooth=True)
        b_rank_fevals = methodology.value_at_expected_rank(values, fevals)
        b_tg_fevals = methodology.expected_best_without_replacement(values, fevals)
        fevals_steps = {}
        for a in agents:
            pkg_curve = package_fevals_curve(view, a)
            mean_curve = trials_curves(results[a], fevals).mean(axis=0)
            fevals_steps[a] = [mean_standardised(pkg_curve, b_pkg_fevals, optimum),
                               mean_standardised(pkg_curve, b_shifted_f, optimum),
                               mean_standardised(pkg_curve, b_rank_fevals, optimum),
                               mean_standardised(mean_curve, b_rank_fevals, optimum),
                               mean_standardised(mean_curve, b_tg_fevals, optimum), tg[a].trials]

        # The baselines side by side at a few numbers of draws (the package's without its PCHIP, which on a
        # non-uniform list of draws would evaluate elsewhere; on whole draws PCHIP passes through these points).
        n = stats.objective_performances_total_sorted.size
        probe = np.array([m for m in (1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512) if m <= n])
        package_probe = baseline._get_random_curve(probe, smoothing=False)
        baseline_rows = [(int(m), float(exact), float(at_rank), float(pkg), float(m * (n + 1) / (m + 1)),
                          min(n - 1, round(m * (n + 1) / (m + 1))))
                         for m, exact, at_rank, pkg in zip(probe,
                                                           methodology.expected_best_without_replacement(values, probe),
                                                           methodology.value_at_expected_rank(values, probe),
                                                           package_probe)]
        info = {
            "configs": len(landscape), "valid": int(landscape.ok.sum()), "optimum": optimum,
            "median": float(stats.total_performance_median()), "tpf": tpf,
            "pkg_tpf": float(stats.get_time_per_feval("mean_per_feval")),
            "median_time": float(stats.total_time_median()), "cutoff": view.cutoff,
            "reproduced_max_error": float(np.max(np.abs(reproduced - b_pkg_time))),
            "first_result_s": {a: float(np.median([r.trials[0].elapsed_s for r in results[a]])) for a in agents},
            "end_s": {a: float(np.median([r.trials[-1].elapsed_s for r in results[a]])) for a in agents},
            "time_grid": (float(grid[0]), float(grid[-1])),
        }
    return {"layer": layer, "path": path, "tg": tg, "spread": spread, "before": before, "official": official,
            "direct": direct, "time_steps": time_steps, "fevals_steps": fevals_steps,
            "baseline_rows": baseline_rows, "info": info,
            "compute_s": {a: sum(r.compute_s for r in rs) for a, rs in runs.items()}}


# -- the report --------------------------------------------------------------------------------------------------
def layer_report(check: dict[str, Any], agents: list[str], seeds: int, budget: int) -> list[str]:
    info, official = check["info"], check["official"]
    fs, fe, ts, te = info["cutoff"]
    lines = [
        f"== {check['layer']}: {check['path'].relative_to(ROOT)}",
        f"   {info['configs']} configs ({info['valid']} correct); optimum {info['optimum']:.3f} GFLOP/s, median "
        f"{info['median']:.3f}; mean {info['tpf']:.4f} s per config (the package's mean_per_feval: "
        f"{info['pkg_tpf']:.4f}), median {info['median_time']:.4f} s",
        f"   tensorgym's ranges: trials 1..{budget}; time {info['time_grid'][0]:.3f}..{info['time_grid'][1]:.1f} s "
        f"({methodology.TIME_GRID_POINTS} points)",
        f"   the package's ranges (cutoff {CUTOFF}, start {CUTOFF_START}): evaluations {fs}..{fe}; time "
        f"{ts:.3f}..{te:.1f} s ({RESOLUTION} points; evaluations x the median seconds per config)",
        "",
        "   agent      tensorgym (+- sd over seeds)     | autotuning-methodology 1.1.0",
        "              trials          time             | get_strategy_scores  bagging seeds    | its classes: "
        "evals   time",
    ]
    for a in agents:
        scores = [o[a]["score"] for o in official]
        tg, sd = check["tg"][a], check["spread"][a]
        bag = f"{min(scores):+.3f}..{max(scores):+.3f}"
        lines.append(f"   {a:<10} {tg.trials:+.3f} +- {sd[0]:.3f}  {tg.time:+.3f} +- {sd[1]:.3f}   | "
                     f"{official[0][a]['score']:+.3f} (err {official[0][a]['error']:.3f})  {bag:<16} | "
                     f"{check['fevals_steps'][a][0]:+.3f}  {check['direct'][a]:+.3f}")
    lines += [
        "",
        "   Over time, from the package's score to tensorgym's, one ingredient at a time (each column after the first",
        "   is the change that swap makes; they add up to the last column):",
        "   agent      package | rank-1   interp.  no-bag   mean val exact E floor   | = tg on its range | range   "
        "| = tensorgym",
    ]
    for a in agents:
        c = check["time_steps"][a]
        d = np.diff(c)
        lines.append(f"   {a:<10} {c[0]:+.3f}  | {d[0]:+.3f}   {d[1]:+.3f}   {d[2]:+.3f}   {d[3]:+.3f}   {d[4]:+.3f}  "
                     f"{d[5]:+.3f}  | {c[6]:+.3f}            | {d[6]:+.3f}  | {c[7]:+.3f}")
    lines += [
        "",
        "   Over evaluations (trials), the same way (the package's curve: the median rank at each evaluation):",
        "   agent      package | rank-1   interp.  mean val exact E  | = tg on its range | range   | = tensorgym",
    ]
    for a in agents:
        c = check["fevals_steps"][a]
        d = np.diff(c)
        lines.append(f"   {a:<10} {c[0]:+.3f}  | {d[0]:+.3f}   {d[1]:+.3f}   {d[2]:+.3f}   {d[3]:+.3f}  "
                     f"| {c[4]:+.3f}            | {d[4]:+.3f}  | {c[5]:+.3f}")
    lines += [
        "",
        "   tensorgym before this cross-check (median curve against the value at the expected rank), same runs:",
        "   agent      trials   time",
    ]
    for a in agents:
        lines.append(f"   {a:<10} {check['before'][a][0]:+.3f}   {check['before'][a][1]:+.3f}")
    lines += [
        "",
        "   Random search's best of M draws without replacement (GFLOP/s): tensorgym's exact expectation, the value",
        "   at the expected rank M(N+1)/(M+1) (1-based, the paper's eq. 6), and the package's (that rank read as a",
        "   0-based index):",
        "   M      exact E    at rank    package    expected rank  package index",
    ]
    for m, exact, at_rank, pkg, rank, index in check["baseline_rows"]:
        lines.append(f"   {m:<6} {exact:8.3f}   {at_rank:8.3f}   {pkg:8.3f}   {rank:13.2f}  {index}")
    first = ", ".join(f"{a} {info['first_result_s'][a]:.2f} s" for a in agents)
    end = ", ".join(f"{a} {info['end_s'][a]:.0f} s" for a in agents)
    lines += [
        "",
        f"   Median clock at the first result: {first}; at the last: {end}.",
        f"   The package's time baseline re-done here (PCHIP included) differs from its own by at most "
        f"{info['reproduced_max_error']:.2g} GFLOP/s.",
        "   Compute: " + ", ".join(f"{a} {s:.1f} s" for a, s in check["compute_s"].items()),
        "",
    ]
    return lines


EXPLANATION = """\
How the two scores differ, and why
----------------------------------
Both standardise a curve C against random search B and the true optimum O, P = (C - B) / (O - B), and
average P over an x range. O is the same number in both (the landscape's best GFLOP/s, which is the T4
file's best value), and so is the seconds per configuration that turns time into draws for the baseline
(the mean of the recorded wall seconds; the package's "mean_per_feval", equal to it when no config
failed). The runs are the same runs: each evaluation's T4 times, written for the package, add up to the
tuner's clock. The step tables change one ingredient of the package's score to tensorgym's at a time,
left to right, and the changes add up exactly to the difference between the two scores:

rank-1    The package's baseline is one rank too good. It takes the expected rank of the best of M draws
          without replacement, r = M(N+1)/(M+1) (the paper's eq. 6; 1-based: M = 1 gives (N+1)/2, the
          median), rounds it and reads it as a 0-based index into the ascending values
          (baseline.py, _redwhite_index). So it reports the next value up. Its own Monte Carlo baseline
          (simulate=True) sides with the 1-based rank (tests/test_methodology_crosscheck.py). This matters
          most where the values are sparse, near the top, and for agents whose curve is far below
          the baseline there (bottom50: +1.0 on R5).
interp.   The package rounds the number of draws at each time (round(t / tpf)) and the rank, then
          smooths with PCHIP; tensorgym interpolates between ranks. The two agree at whole ranks (the
          test); here they differ by about 0.01 at most (0.05 to 0.07 for bottom50).
no-bag    The package's curve over time is not its isotonic fit but the mean of a bagged ensemble of
          isotonic fits (sklearn's BaggingRegressor on NumPy's global generator), so its score is
          random: the "bagging seeds" column spans up to about 0.02, and this step is about 0.01 at most.
mean val  The package fits one isotonic (monotone least-squares) regression of the *ranks* of all runs'
          best-so-far values, pooled, against time: the mean rank, rounded, mapped back to a value.
          tensorgym averages the *values* over runs. Over evaluations the package takes the median
          rank at each evaluation instead: the same mismatch tensorgym had (below), so this step is
          large there (-0.05 to -0.13 for random, ga and dgd).
exact E   tensorgym's baseline is the exact expected best of M draws without replacement,
          sum_k v_(k) C(k-1, M-1) / C(N, M). The package's is the value at the expected rank, which is
          the expectation only where the values are evenly spaced. On these landscapes the upper tail
          is spread out, so the exact expectation is higher for most M (R5, M = 16: 154.8 against 149.4
          GFLOP/s), and scores drop: by 0.06 to 0.17 for random, ga and dgd. Each pair is consistent in
          its own terms: the package works in ranks (the expected rank of the best is exactly
          M(N+1)/(M+1), and its isotonic curve estimates the mean rank), tensorgym in GFLOP/s. They
          differ wherever GFLOP/s is not linear in rank.
floor     (over time) At t seconds random search has finished floor(t / tpf) draws in tensorgym; the
          package rounds. The change is about 0.02 at most (0.09 for bottom50 on M3).
range     The package scores over its cutoff window. The window opens at the time random search needs
          to get 1 % of the way from the median to the optimum (2 evaluations) and closes at the time it
          needs for 95 % of the way, converted with the *median* seconds per config, at 1000 points.
          tensorgym scores over the comparison's budget: 1..budget trials, or tpf..budget*tpf seconds at
          256 points. This is the largest difference for the learning agents. On M3 the package's window
          ends at 126 evaluations (32 s), while GA and DGD are still leaving their random start, so the
          package scores them about 0.13 and 0.00; tensorgym, over 512 trials, about 0.64 and 0.56. For
          an agent below random, P falls without bound as B nears O, so the longer range scores
          bottom50 far lower (-12 and -31, against the package's -7 and -10).

The package's "error" is the standard deviation of P over its time points. It is not a spread over seeds:
a curve that climbs from -1 to 1 has a large "error" however repeatable it is. tensorgym's "+-" is the
bootstrap standard deviation of the score over the 20 seeds.

The bug this found in tensorgym, fixed in baselines/methodology.py
--------------------------------------------------------------------
Before this cross-check, C was the *median* over runs of the best-so-far. B was the value at the
expected rank on a landscape, and the exact expected best (with replacement) on a sample. A median curve
scored against an expectation does not put random search at 0. The best of M random draws is skewed:
most runs end near the top, a few lag far below, so its median sits above its mean. On these very runs,
random search scored +0.38 / +0.37 on R5 and +0.19 / +0.18 on M3 (the "before" table), and every agent
was lifted alike. Now C is the mean over runs, B is random search's exact expected best, and over time B
counts floor(t / tpf) draws. P is linear in C, so random search scores 0 in expectation. In
tests/test_methodology.py, 4000 random runs on a skewed 8-config landscape score 0.00 +- 0.02 over trials
and over time, where the old definition gives more than 0.3. Here random search scores +0.08 +- 0.12
(R5) and +0.04 +- 0.09 (M3) over trials. The package has the same mismatch over evaluations (the median
rank against the expected rank): its score of random search over evaluations is +0.24 (R5) and +0.22
(M3). Over time it fits the mean rank, so it does not have the mismatch there.

Two differences the shipped landscapes do not exercise, because every config ran correctly (tested in
tests/test_methodology_crosscheck.py):
* Failed configs. tensorgym counts them as 0 GFLOP/s, at the bottom of the N values random search draws
  from. The package drops them from the values (its N is the correct configs only) yet counts them in
  the draws M, so with failures its baseline is higher still.
* Time per draw. With failures, the package takes mean(valid) + fraction_invalid * mean(invalid). That is
  not the mean over all configs: it overstates the time per draw by fraction_invalid * mean(valid).

Verdict
-------
Where the definitions agree, the numbers are the same:
* the package's classes, called directly on the runs, give exactly what its get_strategy_scores gives
  (the "its classes: time" column);
* its baseline, re-done here, matches its own to 0 GFLOP/s;
* at every whole rank, tensorgym's value at the expected rank is the package's baseline one value down
  (test);
* changing the ingredients one at a time carries the package's score exactly to tensorgym's.

Every difference is accounted for:
* two flaws of the package: the rank is off by one, and the curve is a random bagged mean;
* one flaw of tensorgym's, now fixed: the median curve;
* three choices of tensorgym's, each documented in baselines/methodology.py: mean GFLOP/s and the exact
  expectation rather than ranks, finished draws over time, and the comparison's budget as the range.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", nargs="+", default=["R5", "M3"])
    parser.add_argument("--agents", nargs="+", default=["random", "ga", "dgd", "top5", "bottom50"])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("--bag-seeds", type=int, default=5, help="seeds of the package's bagging to report")
    parser.add_argument("--cpu", default=None, help="CPU folder of the shipped landscapes (default: this machine's)")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT)
    args = parser.parse_args(argv)

    import autotuning_methodology  # noqa: F401 - fail early, with the import's own message
    from importlib.metadata import version

    from tensorgym.target import resolve_target

    cpu = args.cpu or cpu_folder()
    shipped = {s.layer: s.path for s in shipped_landscapes() if s.cpu == cpu and s.space == "tiles"}
    missing = [layer for layer in args.layers if layer not in shipped]
    if missing:
        parser.error(f"no shipped tiles landscape of {', '.join(missing)} for {cpu} (shipped: {sorted(shipped)})")
    started = time.perf_counter()
    checks = [crosscheck(layer, Landscape.load(shipped[layer]), shipped[layer], args.agents, args.seeds,
                         args.budget, args.bag_seeds, cpu) for layer in args.layers]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    lines = [
        "Methodology score: tensorgym (baselines/methodology.py) against autotuning-methodology "
        f"{version('autotuning_methodology')}, on shipped landscapes",
        f"command: python bench/bench_methodology_crosscheck.py {' '.join(argv if argv is not None else sys.argv[1:])}"
        .rstrip(),
        f"commit: {commit}{' (with uncommitted changes)' if dirty else ''}",
        f"CPU: {resolve_target(None).label} (landscapes of {cpu})",
        f"date: {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}",
        f"runs: {', '.join(args.agents)} x {args.seeds} seeds x {args.budget} trials, Tuner over LandscapeEvaluator "
        "(noise none, batch clock); the same runs scored by both",
        f"package settings: cutoff_percentile {CUTOFF}, cutoff_percentile_start {CUTOFF_START}, resolution "
        f"{RESOLUTION}, confidence_level {CONFIDENCE}, objective_time_keys all, objective {OBJECTIVE} (maximised)",
        f"wall time: {time.perf_counter() - started:.0f} s",
        "",
        "Scores: 0 = random search, 1 = the true optimum from the first point on, < 0 worse than random.",
        "tensorgym: score_runs(exhaustive_reference(...)) over trials and over time. The package: "
        "get_strategy_scores (its only score, over",
        "time; 'error' = its std over time points), first bagging seed, and the range over the bagging seeds; "
        "then its classes called",
        "directly: over evaluations (its plots' other x axis) and over time again (must equal get_strategy_scores).",
        "",
    ]
    for check in checks:
        lines += layer_report(check, args.agents, args.seeds, args.budget)
    lines += EXPLANATION.splitlines()
    text = "\n".join(lines) + "\n"
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text)
    print(text)
    for check in checks:  # the package's classes, called here, must give its entry point's numbers
        for a in args.agents:
            if abs(check["direct"][a] - check["official"][0][a]["score"]) > 5e-4:
                print(f"WARNING: {check['layer']} {a}: the package's classes give {check['direct'][a]:.4f}, "
                      f"get_strategy_scores {check['official'][0][a]['score']:.3f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
