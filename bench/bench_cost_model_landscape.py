"""Does the cost model find the good configs? Cost models scored on this CPU's shipped landscapes.

A landscape holds every config of a bounded sub-space of a layer's ``tiles`` space, measured, so the
true top 10 % is known. For each shipped layer of the CPU folder (``--cpu``, default this machine's):

1. **Held-out ranking** (:mod:`tensorgym.agents.model_landscape`): every model is trained on ``n``
   configs drawn at random (``--sizes``, ``--seeds`` permutations, the same configs for every model)
   and scored on all the other configs of the landscape: recall of the true top 10 % within the
   model's top 10 % (``rec10``), Spearman overall and inside the true top quartile (``rho top25``),
   the best config among the model's top 1 and top 10 % against the best there is. Means with 95 %
   intervals (Student's t over seeds). The models: random scores (the floor), the analytical draft
   alone, the GA's XGBoost as Ansor trains it (``ansor/generic``), DGD's seed 000 model
   (``ansor/af``), the GA's and DGD's default (``log-shallow/both``), the set-up that recalls the true
   top 10 % best here, which the agents take when asked (``ansor-shallow/all``: ``model="ansor-shallow",
   features="all"``), and the best of the transfer set-ups (pre-trained on the *other* landscapes, never
   the scored one).
   Every other variant tried is scored at ``n`` = 128 (``--variants``).
2. **What re-measuring achieves**: one recorded timing sample per config scored as if it were a
   model's prediction of the medians (optimistic: one session), and the spread between configs that
   differ only in ``unroll`` yet unroll the same loops (the same code timed twice, in effect).
3. **Batches**: the GA and DGD run on the landscape backend (``--agent-seeds``, ``--budget``) with the
   agents' default model and the opt-in one; per round, what the model predicted for the batch against what the
   batch measured (Spearman, recall of the batch's best 10 %, the share of the batch in the space's
   true top 10 %), and the best found against the optimum.

Writes the report (``--out``) and the raw numbers (``--json``, default the report's name with .json: its
``summary`` holds the headline figures, which ``bench_learning.py`` reads: per layer the recall at
``n`` = 128 and the Spearman inside the true top quartile of the default and the opt-in set-ups, whether the
target is met, and the batches' predicted against measured; ``results`` holds per layer the metrics of every
(model, n, seed) as ``rows`` ``{"keys", "values"}``, the re-sample ceiling per seed, and every agent run's
rounds).
**Does the better model make the search better?** ``--search DEFAULT OPT_IN`` compares instead two
``compare`` runs of the GA and DGD on the landscapes (the folders holding their ``compare.json``), one
with the agents' default model and one with ``model=ansor-shallow, features=all``, as
``bench/bench_learning.py`` writes them: the mean best at 64..512 trials with 95 % intervals, the
paired difference per seed, the share of the optimum and the agents' compute, into ``--search-out``::

    python bench/bench_learning.py --agents ga,dgd --agent-option ga:model=ansor-shallow \
        --agent-option ga:features=all --agent-option dgd:model=ansor-shallow --agent-option dgd:features=all \
        --headline-trials 512 --out work/cm-search/optin --report-dir work/cm-search/optin/reports
    python bench/bench_cost_model_landscape.py --search work/learning-amd-epyc-zen4-avx512-2c/leaderboard \
        work/cm-search/optin/leaderboard

**On the full-space samples** (``--on samples``): the same held-out ranking on each layer's uniform sample of
the *whole* tiles space (``samples/`` beside the landscapes; 2,000 configs), where good configs are rare, as in
the space a user tunes; the target is scored there. The agents' batches need a closed space, so that part runs
on landscapes only::

    python bench/bench_cost_model_landscape.py --on samples --agent-seeds 0 \
        --out bench/reports/landscapes/cost_model_samples.txt

Runs the layers in ``--jobs`` processes (default 2): about 6 minutes on 2 cores for four layers::

    python bench/bench_cost_model_landscape.py

``--parts DIR`` keeps each layer's results, so the work can be done a few layers at a time (``--layers``)
and the report assembled by a last run over all of them, which reuses what is there::

    python bench/bench_cost_model_landscape.py --parts work/cm-parts --layers R5,C7
    python bench/bench_cost_model_landscape.py --parts work/cm-parts --layers M3,Y9
    python bench/bench_cost_model_landscape.py --parts work/cm-parts
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import math
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from tensorgym.agents.code_features import has_code_features
from tensorgym.agents.dgd import DGDAgent
from tensorgym.agents.ga import GAAgent
from tensorgym.agents.model_eval import ModelSpec
from tensorgym.agents.model_landscape import (
    LANDSCAPE_SIZES, EnsembleSpec, TransferSpec, batch_rounds, evaluate_landscape, landscape_dataset, noise_ceiling,
)
from tensorgym.baselines.stats import mean_ci
from tensorgym.catalog import make_agent
from tensorgym.cli.args import int_list
from tensorgym.landscape import Landscape, LandscapeEvaluator, cpu_folder, shipped_landscapes
from tensorgym.landscape.shipped import SAMPLES
from tensorgym.target import resolve_target
from tensorgym.text import format_table
from tensorgym.tuner import Tuner

from report_header import emit, header

OUT = Path(__file__).resolve().parent / "reports" / "landscapes" / "cost_model.txt"
SEARCH_OUT = OUT.with_name("cost_model_search.txt")
SEARCH_POINTS = (64, 128, 256, 512)  # trial budgets the search comparison reads
TARGET_N, TARGET_RECALL = 128, 0.6
# The set-up that recalls the true top 10 % best of those scored here. The GA and DGD take it when asked
# (model="ansor-shallow", features="all"); their default stays what the recorded leaderboards ran.
OPT_IN = ("ansor-shallow", "all")
CURVE_SIZES, CURVE_SEEDS = (1024, 2048), 5  # how far more data takes the opt-in model
TRIAL_POINTS = (128, 256, 512)  # where the agents' best found is read
WARMUP = 64  # the random configs both agents measure first (GA: num_warmup_sample; DGD: initial_samples)


def _xgb(name: str, features: str, **options: Any) -> ModelSpec:
    return ModelSpec(name, features, "xgb", tuple(options.items()))


def agents_default() -> tuple[str, str]:
    """(set-up, feature set) the GA and DGD use by default (the two agree; checked)."""
    ga = (GAAgent.default_model, inspect.signature(GAAgent).parameters["features"].default)
    dgd = (DGDAgent.default_model, inspect.signature(DGDAgent).parameters["features"].default)
    if ga != dgd:
        raise SystemExit(f"the GA's default model {ga} is not DGD's {dgd}: say which one this benchmark reports")
    return ga


def _name(model: tuple[str, str]) -> str:
    return f"{model[0]}/{model[1]}"


def agent_models() -> list[tuple[str, str]]:
    """The agents' default (set-up, features) and the opt-in one, in that order (one if they are the same)."""
    return list(dict.fromkeys([agents_default(), OPT_IN]))


def main_specs() -> list[ModelSpec | TransferSpec]:
    """The models scored at every training size (see the module docs)."""
    specs: list[ModelSpec | TransferSpec] = [
        ModelSpec("random", "generic", "random"), ModelSpec("draft only", "af", "draft"),
        _xgb("ansor/generic", "generic", setup="ansor"), _xgb("ansor/af", "af", setup="ansor")]
    specs += [_xgb(_name(model), model[1], setup=model[0]) for model in agent_models()]
    setup, features = OPT_IN
    specs.append(TransferSpec(f"transfer warm {setup}/{features}", features, "warm", (("setup", setup),)))
    return specs


def variant_specs() -> list[ModelSpec | TransferSpec | EnsembleSpec]:
    """Every other set-up tried, scored at n = 128 only: targets, weights, objectives, depths, features, ensembles,
    transfer."""
    d4, d6 = {"max_depth": 4}, {"max_depth": 6}
    return [
        _xgb("ansor/both", "both", setup="ansor"),
        _xgb("ansor/all", "all", setup="ansor"),
        _xgb("log-shallow/all", "all", setup="log-shallow"),
        _xgb("ansor-shallow/both", "both", setup="ansor-shallow"),
        _xgb("ansor-shallow/generic", "generic", setup="ansor-shallow"),
        _xgb("ansor-shallow d3/all", "all", setup="ansor-shallow", xgb_params={"max_depth": 3}),
        _xgb("ansor-shallow d6/all", "all", setup="ansor-shallow", xgb_params=d6),
        _xgb("ansor-shallow eta 0.05/all", "all", setup="ansor-shallow", xgb_params={**d4, "eta": 0.05}),
        _xgb("ansor-shallow lambda 5/all", "all", setup="ansor-shallow", xgb_params={**d4, "lambda": 5.0}),
        _xgb("normalised unweighted d4/all", "all", setup="ansor", weights="none", xgb_params=d4),
        _xgb("rank target d4/all", "all", setup="log-shallow", target="rank"),
        _xgb("log d6/all", "all", setup="log-shallow", xgb_params=d6),
        _xgb("pairwise d6/all", "all", setup="ansor", objective="pairwise", xgb_params=d6),
        _xgb("ndcg d6/all", "all", setup="ansor", objective="ndcg", xgb_params=d6),
        _xgb("ansor-shallow + draft prior/all", "all", setup="ansor-shallow", prior="draft"),
        _xgb("subsample 0.8/all", "all", setup="ansor-shallow",
             xgb_params={**d4, "subsample": 0.8, "colsample_bytree": 0.8}),
        EnsembleSpec("bag of 5 subsample 0.8/all", (_xgb("member", "all", setup="ansor-shallow", xgb_params={
            **d4, "subsample": 0.8, "colsample_bytree": 0.8}),) * 5),
        EnsembleSpec("rank average ansor-shallow + log-shallow/all", (
            _xgb("a", "all", setup="ansor-shallow"), _xgb("b", "all", setup="log-shallow"))),
        TransferSpec("transfer warm log-shallow/all", "all", "warm", (("setup", "log-shallow"),)),
        TransferSpec("transfer pooled x10 ansor-shallow/all", "all", "pooled", (("setup", "ansor-shallow"),), 10.0),
        TransferSpec("transfer pooled x1 ansor-shallow/all", "all", "pooled", (("setup", "ansor-shallow"),), 1.0),
    ]


# -- one layer ------------------------------------------------------------------------------------
def twin_spread(landscape: Landscape, space) -> dict[str, Any]:
    """|log2 ratio| between configs that differ only in ``unroll`` and unroll the same loops (the same code),
    both in the top quartile: what timing the same kernel twice gives, in effect."""
    from tensorgym.agents.code_features import code_features

    if not has_code_features(space):
        return {}
    scores = np.asarray(landscape.scores)
    q75 = np.quantile(scores, 0.75)
    groups: dict[str, dict[int, int]] = {}
    for i, config in enumerate(landscape.configs):
        rest = {k: v for k, v in config.items() if k != "unroll"}
        groups.setdefault(json.dumps(rest, sort_keys=True, default=list), {})[int(config["unroll"])] = i
    ratios = []
    for members in groups.values():
        rows = list(members.values())
        for a in range(len(rows)):
            for b in range(a + 1, len(rows)):
                i, j = rows[a], rows[b]
                same = np.array_equal(code_features(space, landscape.configs[i])[:5],
                                      code_features(space, landscape.configs[j])[:5])
                if same and min(scores[i], scores[j]) >= q75:
                    ratios.append(abs(math.log2(scores[i] / scores[j])))
    if not ratios:
        return {}
    return {"pairs": len(ratios), "median_abs_log2": float(np.median(ratios)),
            "median_pct": float(2 ** np.median(ratios) - 1)}


def run_agent(agent: str, landscape: Landscape, space, budget: int, seed: int, setup: str,
              features: str) -> dict[str, Any]:
    """One run of ``agent`` on the landscape backend; its per-round prediction log joined with the truth."""
    search = make_agent(agent, model=setup, features=features)
    tuner = Tuner(LandscapeEvaluator(landscape, seed=seed, space=space), budget=budget)
    t0 = time.perf_counter()
    extra = tuner.run(search, seed) or {}
    result = tuner.result(agent, seed, **extra)
    configs = [t.config for t in result.trials]
    rounds = batch_rounds(extra.get("predictions", {}).get("log", []), configs, landscape)
    truth = np.array([landscape.scores[landscape.index_of(c)] for c in configs])
    ranked = np.sort(landscape.scores)[::-1]
    in_top = truth >= ranked[math.ceil(0.1 * len(ranked)) - 1]
    best = float(truth.max())  # the true median of the best config found
    return {"agent": agent, "model": f"{setup}/{features}", "seed": seed, "rounds": rounds,
            "warmup_top": float(in_top[:WARMUP].mean()), "after_warmup_top": float(in_top[WARMUP:].mean()),
            "best_at": {str(n): float(truth[:n].max() / np.max(landscape.scores)) for n in TRIAL_POINTS
                        if n <= len(truth)},
            "best_true": best, "best_measured": result.best_gflops, "optimum": float(np.max(landscape.scores)),
            "seconds": time.perf_counter() - t0}


def layer_task(task: dict[str, Any]) -> dict[str, Any]:
    """Everything of one layer (runs in a worker process): the evaluations, the ceilings, the agents' runs."""
    logging.basicConfig(level=logging.WARNING)
    samples = task.get("on") == "samples"
    paths = {s.layer: s.sample if samples else s.path for s in shipped_landscapes()
             if s.cpu == task["cpu"] and s.space == "tiles"}
    layer = task["layer"]
    landscape = Landscape.load(paths[layer])
    space = landscape.space()
    data = landscape_dataset(landscape, space, label=layer)
    t0 = time.perf_counter()
    ranked = np.sort(landscape.scores)[::-1]
    out: dict[str, Any] = {"layer": layer, "label": landscape.workload_label, "configs": len(landscape),
                           "failed": int((~landscape.ok).sum()), "optimum": float(ranked[0]),
                           "top10_threshold": float(ranked[math.ceil(0.1 * len(landscape)) - 1])}
    if task["part"] == "models":
        others = [landscape_dataset(Landscape.load(p), label=name) for name, p in paths.items()
                  if name != layer and name in task["sources"]]
        seeds = range(task["seeds"])
        rows = evaluate_landscape(data, main_specs(), task["sizes"], seeds, others).rows
        if task["variants"] and TARGET_N in task["sizes"]:
            rows += evaluate_landscape(data, variant_specs(), (TARGET_N,), seeds, others).rows
        setup, features = OPT_IN
        curve = [n for n in CURVE_SIZES if n < len(data) - 10] if task["curve"] else []
        rows += [dict(r, curve=True) for r in evaluate_landscape(
            data, [_xgb(f"{setup}/{features}", features, setup=setup)], curve, range(CURVE_SEEDS)).rows]
        out["rows"] = rows
        out["noise_ceiling"] = noise_ceiling(landscape, seeds)
        out["twins"] = twin_spread(landscape, space)
    else:
        runs = []
        for agent in ("ga", "dgd"):
            for setup, features in agent_models():
                for seed in range(task["agent_seeds"]):
                    runs.append(run_agent(agent, landscape, space, task["budget"], seed, setup, features))
        out["runs"] = runs
    out["seconds"] = time.perf_counter() - t0
    return out


# -- the report --------------------------------------------------------------------------------
def _ci(values: Sequence[float], digits: int = 2) -> str:
    mean, low, high = mean_ci(values)
    if mean is None:
        return "-"
    if low is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _group(rows: list[dict], layer: str, model: str, n: int, metric: str, curve: bool = False) -> list[float]:
    """The per-seed values of one metric of one (layer, model, n); ``curve``: of the larger-n rows."""
    return [r[metric] for r in rows if r["layer"] == layer and r["model"] == model and r["n"] == n
            and bool(r.get("curve")) == curve]


def report(results: list[dict], args: argparse.Namespace, target, cpu: str, seconds: float) -> str:
    layers = [r["layer"] for r in results if r.get("rows") is not None]
    by_layer = {r["layer"]: r for r in results if r.get("rows") is not None}
    runs = {r["layer"]: r["runs"] for r in results if r.get("runs") is not None}
    rows = [row for r in by_layer.values() for row in r["rows"]]
    default, opt_in = _name(agents_default()), _name(OPT_IN)
    samples = args.on == "samples"
    what = "full-space samples" if samples else "shipped landscapes"
    lines = header(f"Cost models on the {what}: recall of the true top 10 %", target)
    named = ", ".join(f"{layer} {by_layer[layer]['label']}" for layer in layers)
    lines += [f"{what}: tensorgym/data/landscapes/{cpu}/{SAMPLES + '/' if samples else ''} ({named})",
              f"models trained on n random configs (the same for every model), scored on every other config of "
              f"the {'sample' if samples else 'landscape'}; {args.seeds} seeds; mean [95 % interval]; "
              f"{seconds / 60:.1f} min of computing (one "
              f"core; the layers ran in {args.jobs} processes)",
              f"the GA's and DGD's model: {default} by default; {opt_in} when asked (model={OPT_IN[0]}, "
              f"features={OPT_IN[1]}; --model/--features on the command line), the best set-up found here", ""]
    lines.append("== the layers ==")
    cells = []
    for layer in layers:
        r = by_layer[layer]
        ceiling = r["noise_ceiling"]
        twins = r.get("twins") or {}
        cells.append([layer, r["label"], r["configs"], r["failed"], f"{r['optimum']:.1f}",
                      f"{r['top10_threshold']:.1f}", _ci([c["recall10"] for c in ceiling]),
                      _ci([c["top_quartile_spearman"] for c in ceiling]),
                      f"{twins['median_pct'] * 100:.0f} % ({twins['pairs']})" if twins else "-"])
    lines.append(format_table(cells, ["layer", "workload", "configs", "failed", "optimum", "top 10 % from",
                                      "re-sample rec10", "re-sample rho top25", "same-code twins differ"]))
    lines += ["re-sample: one recorded timing sample per config as the prediction of the median (one session: "
              "optimistic); same-code twins: median difference between top-quartile configs that differ only in "
              "unroll yet unroll the same loops (pairs): the noise between timings of one kernel, which bounds "
              "what any model can recall", ""]

    lines.append(f"== target: recall of the true top 10 % after {TARGET_N} training configs >= {TARGET_RECALL} ==")
    models = [s.name for s in main_specs()]
    cells = []
    for model in models:
        values = {layer: _group(rows, layer, model, TARGET_N, "recall10") for layer in layers}
        met = sum(1 for v in values.values() if v and np.mean(v) >= TARGET_RECALL)
        cells.append([model] + [_ci(values[layer]) for layer in layers] + [f"{met}/{len(layers)}"])
    lines.append(format_table(cells, ["model (rec10 @128)"] + layers + ["met"]))
    cells = []
    for model in models:
        cells.append([model] + [_ci(_group(rows, layer, model, TARGET_N, "top_quartile_spearman")) for layer in layers])
    lines += ["", format_table(cells, ["model (rho top25 @128)"] + layers), ""]
    lines += verdict(rows, layers, default, opt_in)

    for layer in layers:
        lines.append(f"== {layer} ({by_layer[layer]['label']}): every training size ==")
        cells = []
        for n in args.sizes:
            for model in models:
                if not _group(rows, layer, model, n, "recall10"):
                    continue
                cells.append([n, model] + [_ci(_group(rows, layer, model, n, m)) for m in
                                           ("recall10", "spearman", "top_quartile_spearman", "best_of_1",
                                            "best_of_10pct")])
        lines += [format_table(cells, ["n", "model", "rec10", "rho", "rho top25", "best@1", "best@10%"]), ""]

    curve = [r for r in rows if r.get("curve")]
    if curve:
        lines.append(f"== how far more data takes {opt_in} ({CURVE_SEEDS} seeds): rec10 / rho top25 ==")
        sizes = sorted({r["n"] for r in curve})
        cells = []
        for layer in layers:
            cells.append([layer] + [f"{_ci(_group(curve, layer, opt_in, n, 'recall10', True))} / "
                                    f"{_ci(_group(curve, layer, opt_in, n, 'top_quartile_spearman', True))}"
                                    for n in sizes])
        lines += [format_table(cells, ["layer"] + [f"n={n}" for n in sizes]), ""]

    variants = [s.name for s in variant_specs()]
    if any(_group(rows, layers[0], v, TARGET_N, "recall10") for v in variants):
        lines.append(f"== every variant tried, n = {TARGET_N}: rec10 / rho top25 (the models above for reference) ==")
        cells = []
        for model in [default, opt_in] + variants:
            cells.append([model] + [f"{_ci(_group(rows, layer, model, TARGET_N, 'recall10'))} / "
                                    f"{_ci(_group(rows, layer, model, TARGET_N, 'top_quartile_spearman'))}"
                                    for layer in layers])
        lines += [format_table(cells, ["model"] + layers), ""]

    if runs:
        lines += batch_sections(runs, [default, opt_in])
    return "\n".join(lines) + "\n"


def verdict(rows: list[dict], layers: list[str], default: str, opt_in: str) -> list[str]:
    """Per layer at n = 128: the opt-in set-up against the agents' default, the best of everything scored, the
    target (met when the opt-in set-up, the better of the two, reaches it)."""
    lines = [f"verdict at n = {TARGET_N} (rec10 means; target {TARGET_RECALL}):"]
    for layer in layers:
        means = {r["model"]: float(np.mean(_group(rows, layer, r["model"], TARGET_N, "recall10")))
                 for r in rows if r["layer"] == layer and r["n"] == TARGET_N and not r.get("curve")}
        if default not in means or opt_in not in means:
            continue
        best = max(means, key=means.get)
        lines.append(f"  {layer}: {opt_in} (opt-in) {means[opt_in]:.2f} (default: {default} {means[default]:.2f}, "
                     f"{means[opt_in] - means[default]:+.2f}); best of all {len(means)} scored: {best} "
                     f"{means[best]:.2f}; target {'met' if means[opt_in] >= TARGET_RECALL else 'missed'}")
    return lines + [""]


def summary(results: list[dict]) -> dict[str, Any]:
    """The headline figures (the JSON report's ``summary``, which ``bench_learning.py`` shows): per layer the
    recall of the true top 10 % and the Spearman inside the true top quartile at n = 128 of the agents' default
    and the opt-in set-ups (mean and 95 % interval), whether the target is met, and the GA's and DGD's batches:
    predicted against measured."""
    default, opt_in = _name(agents_default()), _name(OPT_IN)
    by_layer = {r["layer"]: r for r in results if r.get("rows") is not None}
    rows = [row for r in by_layer.values() for row in r["rows"]]

    def figure(values: list[float]) -> dict[str, Any]:
        mean, low, high = mean_ci(values)
        return {"mean": mean, "ci": [low, high]}

    layers = {}
    for layer in by_layer:
        entry: dict[str, Any] = {}
        for model in (default, opt_in):
            entry[model] = {"recall10": figure(_group(rows, layer, model, TARGET_N, "recall10")),
                            "top_quartile_spearman": figure(_group(rows, layer, model, TARGET_N,
                                                                   "top_quartile_spearman"))}
        entry["met"] = bool((entry[opt_in]["recall10"]["mean"] or 0.0) >= TARGET_RECALL)
        layers[layer] = entry
    batches: dict[str, Any] = {}
    for r in results:
        for model in (default, opt_in):
            for agent in ("ga", "dgd"):
                chosen = [run for run in r.get("runs") or [] if run["agent"] == agent and run["model"] == model]
                guided = [e for run in chosen for e in run["rounds"] if e.get("rho") is not None]
                if not guided:
                    continue
                batches.setdefault(r["layer"], {}).setdefault(agent, {})[model] = {
                    "runs": len(chosen), "rounds": len(guided),
                    # Whole-batch means, weighted by batch size: what the model promised against what came back.
                    "predicted_gflops": _weighted([e.get("score", 0) * e.get("before", 0) for e in guided], guided),
                    "measured_gflops": _weighted([e.get("mean") for e in guided], guided),
                    "rho": figure([e["rho"] for e in guided if e["n"] >= 3]),
                    "recall10": figure([e["recall"] for e in guided if e.get("recall") is not None]),
                    "true_top10_share": figure([e["true_top"] for e in guided])}
    met = sum(e["met"] for e in layers.values())
    return {"target": f"recall of the true top 10 % after {TARGET_N} training configs >= {TARGET_RECALL}",
            "default": default, "opt_in": opt_in, "met": f"{met}/{len(layers)}", "layers": layers,
            "batches": batches}


def _weighted(values: list[float | None], rounds: list[dict]) -> float | None:
    pairs = [(v, e["n"]) for v, e in zip(values, rounds) if v is not None]
    total = sum(n for _, n in pairs)
    return sum(v * n for v, n in pairs) / total if total else None


def batch_sections(runs: dict[str, list[dict]], models: list[str]) -> list[str]:
    """The GA's and DGD's batches: per round what the model predicted against what was measured."""
    lines = ["== what the model predicts for a batch against what the batch measured (landscape backend) ==",
             "predicted: the model's mean score for the batch x the best GFLOP/s measured before it (the scores are "
             "throughput / best measured); measured: the batch's mean; rho: Spearman of the two within the batch; "
             "rec: the batch's best 10 % among the 10 % it predicted best; top10: share of the batch in the space's "
             "true top 10 %", ""]
    for layer, layer_runs in runs.items():
        for agent in ("ga", "dgd"):
            for model in models:
                chosen = [r for r in layer_runs if r["agent"] == agent and r["model"] == model]
                if not chosen:
                    continue
                first = chosen[0]
                guided = [e for e in first["rounds"] if e.get("rho") is not None]
                shown = guided[:4] + (guided[-1:] if len(guided) > 4 else [])
                lines.append(f"-- {layer} {agent} with {model}, seed {first['seed']}: rounds 1-4 and the last "
                             f"of {len(guided)} model-scored rounds --")
                cells = [[e["trial"], e["n"], _num(e.get("score", 0) * e.get("before", 0)), _num(e.get("mean")),
                          _num(e.get("rho")), _num(e.get("recall")), _num(e.get("true_top")), _num(e.get("best"))]
                         for e in shown]
                lines.append(format_table(cells, ["trial", "n", "predicted", "measured", "rho", "rec", "top10",
                                                  "best"]))
                rhos = [e["rho"] for r in chosen for e in r["rounds"] if e.get("rho") is not None and e["n"] >= 3]
                recs = [e["recall"] for r in chosen for e in r["rounds"] if e.get("recall") is not None]
                tops = [e["true_top"] for r in chosen for e in r["rounds"] if e.get("rho") is not None]
                points = sorted({int(n) for r in chosen for n in r["best_at"]})
                best = ", ".join(f"{_ci([r['best_at'].get(str(n)) for r in chosen], 3)} at {n}" for n in points)
                lines.append(f"   over {len(chosen)} seeds: rho {_ci(rhos)}, rec {_ci(recs)}, top10 of the "
                             f"model-scored batches {_ci(tops)}; of all trials after the {WARMUP} random ones "
                             f"{_ci([r['after_warmup_top'] for r in chosen])} (the random ones "
                             f"{_ci([r['warmup_top'] for r in chosen])}); best found (true median / optimum) {best}")
                lines.append("")
    return lines


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def _signature(task: dict[str, Any]) -> dict[str, Any]:
    """What a saved part must have been computed with to be reused: the task, the models, the agents' default and
    the opt-in set-up (the larger-n curve's model)."""
    return {**task, "sizes": list(task["sizes"]), "models": [s.name for s in main_specs() + variant_specs()],
            "default": list(agents_default()), "opt_in": list(OPT_IN)}


def _part_path(folder: str, task: dict[str, Any]) -> Path:
    return Path(folder) / f"{task['cpu']}-{task['layer']}-{task['part']}.json"


def _load_part(folder: str, task: dict[str, Any]) -> dict[str, Any] | None:
    """A part saved by an earlier run with the same settings (None: none, or other settings)."""
    path = _part_path(folder, task)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return data["result"] if data.get("signature") == json.loads(json.dumps(_signature(task))) else None


def _save_part(folder: str, task: dict[str, Any], result: dict[str, Any]) -> None:
    path = _part_path(folder, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"signature": _signature(task), "result": result}, default=str))


def _columns(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows of one set of keys as ``{"keys": [...], "values": [[...], ...]}`` (each key written once)."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return {"keys": keys, "values": [[row.get(k) for k in keys] for row in rows]}


def _rounded(value: Any, digits: int = 4) -> Any:
    """``value`` with every float to ``digits`` significant digits (the raw numbers' file stays small)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v, digits) for v in value]
    return value


# -- does the better model make the search better? ----------------------------------------------------------
def _board_runs(folder: str) -> tuple[dict[tuple[str, str], list[dict]], dict[str, Any]]:
    """The runs of one ``compare`` folder: (env, agent) -> run JSONs in seed order; and its ``compare.json``."""
    board = Path(folder) / "compare.json"
    data = json.loads(board.read_text())
    runs: dict[tuple[str, str], list[dict]] = {}
    for key, files in data.get("result_files", {}).items():
        env_id, agent = key.rsplit("/", 1)
        # As compare wrote them (absolute, or relative to where it ran); else beside compare.json.
        paths = [Path(f) if Path(f).exists() else board.parent / "results" / Path(f).parent.name / Path(f).name
                 for f in files]
        loaded = [json.loads(p.read_text()) for p in paths if p.exists()]
        runs[(env_id, agent)] = sorted(loaded, key=lambda r: r["seed"])
    return runs, data


def _best_at(run: dict, k: int) -> float | None:
    trials = run["trials"]
    return float(trials[k - 1]["best_gflops"]) if len(trials) >= k else None


def search_report(default_dir: str, opt_in_dir: str, target) -> str:
    """GA and DGD with the agents' default model against the opt-in one, on the same layers and seeds."""
    default_runs, _ = _board_runs(default_dir)
    opt_runs, opt_board = _board_runs(opt_in_dir)
    optima = {e: f["optimum_gflops"] for e, f in opt_board["landscapes"].items()}
    envs = [e for e in opt_board["settings"]["env_ids"] if e in optima]
    lines = header("Does the better cost model make the search better? GA and DGD with ansor-shallow/all against "
                   "their default log-shallow/both, on the landscapes", target)
    lines += [f"default runs: {default_dir}; opt-in runs: {opt_in_dir} (model=ansor-shallow, features=all)",
              "best GFLOP/s measured after N trials, mean [95 % interval] over the seeds; %opt: the final best as a "
              "share of the landscape's true optimum (the median of each config's samples: a run's measured best can "
              "lie above it); diff: opt-in minus default, paired by seed; @64 is the same by construction (both agents "
              "measure 64 random configs per seed before their model scores anything); compute: the run's wall "
              "seconds (the agent's model fits and search and the tuning loop: answering from a landscape costs next "
              "to nothing)", ""]
    cells, diffs, wins = [], [], {}
    seconds: dict[tuple[str, str], list[float]] = {}
    ratios: dict[tuple[str, int], list[float]] = {}
    for env_id in envs:
        for agent in ("ga", "dgd"):
            pair = {"default": default_runs.get((env_id, agent), []), "opt-in": opt_runs.get((env_id, agent), [])}
            if not pair["default"] or not pair["opt-in"]:
                continue
            for which, runs in pair.items():
                model = runs[0]["extra"].get("model", "?")
                seconds.setdefault((agent, which), []).extend(r["wall_s"] for r in runs)
                cells.append([env_id, agent, f"{which}: {model}", len(runs)]
                             + [_ci([_best_at(r, k) for r in runs], 1) for k in SEARCH_POINTS]
                             + [_ci([100 * r["best_gflops"] / optima[env_id] for r in runs], 1),
                                _ci([r["wall_s"] for r in runs], 1)])
            by_seed = {r["seed"]: r for r in pair["default"]}
            paired = [(by_seed[r["seed"]], r) for r in pair["opt-in"] if r["seed"] in by_seed]
            row = [env_id, agent, len(paired)]
            for k in SEARCH_POINTS:
                delta = [b - a for a, b in ((_best_at(d, k), _best_at(o, k)) for d, o in paired)
                         if a is not None and b is not None]
                mean, low, high = mean_ci(delta)
                better = low is not None and low > 0
                worse = high is not None and high < 0
                wins.setdefault((agent, k), []).append("better" if better else "worse" if worse else "same")
                row.append(f"{_ci(delta, 2)}{' +' if better else ' -' if worse else ''}")
                ratios.setdefault((agent, k), []).append(
                    float(np.mean([_best_at(o, k) for _, o in paired]) / np.mean([_best_at(d, k) for d, _ in paired])))
            diffs.append(row)
    lines.append(format_table(cells, ["env", "agent", "model", "n"] + [f"@{k}" for k in SEARCH_POINTS]
                              + ["%opt", "compute s/run"]))
    lines += ["", "paired difference, opt-in minus default (GFLOP/s; +: the interval lies above 0, -: below)",
              format_table(diffs, ["env", "agent", "seeds"] + [f"@{k}" for k in SEARCH_POINTS]), ""]
    lines.append("per agent and budget: layers where the opt-in model is better / the same / worse (paired intervals); "
                 "geometric mean over layers of the ratio of mean bests")
    cells = []
    for agent in ("ga", "dgd"):
        for k in SEARCH_POINTS:
            outcome = wins.get((agent, k), [])
            if not outcome:
                continue
            geo = math.exp(np.mean(np.log(ratios[(agent, k)])))
            cells.append([agent, k, f"{outcome.count('better')} / {outcome.count('same')} / {outcome.count('worse')}",
                          f"{geo:.4f}"])
    lines.append(format_table(cells, ["agent", "trials", "better / same / worse", "geomean ratio"]))
    guided = [o for (agent, k), outcome in wins.items() if k > WARMUP for o in outcome]
    lines += [f"after the warm-up ({len(guided)} layer x agent x budget cells at 128-512 trials): the opt-in model "
              f"better in {guided.count('better')}, worse in {guided.count('worse')}, the same within the paired "
              f"intervals in {guided.count('same')}; better at every budget on every layer: "
              f"{'yes' if guided and guided.count('better') == len(guided) else 'no'}", ""]
    cells = []
    for agent in ("ga", "dgd"):
        if (agent, "default") in seconds and (agent, "opt-in") in seconds:
            a, b = seconds[(agent, "default")], seconds[(agent, "opt-in")]
            cells.append([agent, len(a), f"{sum(a):.0f}", _ci(a, 2), f"{sum(b):.0f}", _ci(b, 2),
                          f"{np.mean(b) / np.mean(a):.2f}"])
    lines += ["compute, all layers and seeds: total seconds and seconds per run (default | opt-in)",
              format_table(cells, ["agent", "runs", "default total s", "default s/run", "opt-in total s",
                                   "opt-in s/run", "ratio"])]
    lines += ["the wall seconds as each run recorded them; the two sets ran at different times on the same machine, "
              "2 runs at a time"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", default=None, help="the landscapes' CPU folder (default: this machine's)")
    parser.add_argument("--layers", default=None, help="comma-separated layers (default: every shipped one)")
    parser.add_argument("--seeds", type=int, default=20, help="random training sets per size (default: 20)")
    parser.add_argument("--sizes", type=int_list, default=LANDSCAPE_SIZES,
                        help="training sizes (default: 32,64,128,256)")
    parser.add_argument("--no-variants", dest="variants", action="store_false", help="skip the variants at n = 128")
    parser.add_argument("--no-curve", dest="curve", action="store_false", help="skip n = 1024 and 2048")
    parser.add_argument("--on", choices=("landscapes", "samples"), default="landscapes",
                        help="score the models on the shipped landscapes or on the full-space samples beside them")
    parser.add_argument("--agent-seeds", type=int, default=3, help="GA and DGD runs per model and layer (0: none)")
    parser.add_argument("--budget", type=int, default=512, help="trials of each GA and DGD run (default: 512)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default: 2)")
    parser.add_argument("--parts", default=None,
                        help="a folder keeping each layer's results: a later run with the same settings reuses them "
                             "(run a few layers at a time, then all of them to assemble the report)")
    parser.add_argument("--out", default=str(OUT), help="the report (default: bench/reports/landscapes/cost_model.txt)")
    parser.add_argument("--json", default=None, help="the raw numbers (default: the report's path with .json)")
    parser.add_argument("--search", nargs=2, metavar=("DEFAULT", "OPT_IN"), default=None,
                        help="compare instead the GA's and DGD's runs of two compare folders: the agents' default "
                             "model, then the opt-in one (see the module docs)")
    parser.add_argument("--search-out", default=str(SEARCH_OUT),
                        help="the search comparison (default: bench/reports/landscapes/cost_model_search.txt)")
    args = parser.parse_args(argv)
    if args.on == "samples" and args.agent_seeds:
        parser.error("the agents' batches run on landscapes only: add --agent-seeds 0 to --on samples")
    target = resolve_target(None)
    if args.search:
        emit(search_report(*args.search, target), args.search_out)
        return 0
    cpu = args.cpu or cpu_folder(target)
    shipped = [s for s in shipped_landscapes() if s.cpu == cpu and s.space == "tiles"]
    if not shipped:
        print(f"no landscapes shipped for {cpu}; CPUs with landscapes: "
              f"{', '.join(sorted({s.cpu for s in shipped_landscapes()})) or 'none'}", file=sys.stderr)
        return 2
    layers = [t.strip() for t in args.layers.split(",")] if args.layers else [s.layer for s in shipped]
    unknown = sorted(set(layers) - {s.layer for s in shipped})
    if unknown:
        print(f"no landscape of {', '.join(unknown)} for {cpu}; shipped: {', '.join(s.layer for s in shipped)}",
              file=sys.stderr)
        return 2
    every = [s.layer for s in shipped]
    base = {"cpu": cpu, "on": args.on, "seeds": args.seeds, "sizes": tuple(args.sizes), "variants": args.variants,
            "curve": args.curve, "sources": every, "agent_seeds": args.agent_seeds, "budget": args.budget}
    tasks = [dict(base, layer=layer, part="models") for layer in layers]
    if args.agent_seeds > 0:
        tasks += [dict(base, layer=layer, part="agents") for layer in layers]
    saved = {i: _load_part(args.parts, task) for i, task in enumerate(tasks)} if args.parts else {}
    todo = [task for i, task in enumerate(tasks) if saved.get(i) is None]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = iter(list(pool.map(layer_task, todo)))
    results = [saved[i] if saved.get(i) is not None else next(done) for i in range(len(tasks))]
    if args.parts:
        for task, result in zip(tasks, results):
            _save_part(args.parts, task, result)
    seconds = sum(r["seconds"] for r in results)
    emit(report(results, args, target, cpu, seconds), args.out)
    json_path = Path(args.json) if args.json else Path(args.out).with_suffix(".json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    raw = [{**r, "rows": _columns(r["rows"])} if "rows" in r else r for r in results]
    json_path.write_text(json.dumps(_rounded({"settings": dict(vars(args)) | {"cpu": cpu, "layers": layers},
                                              "summary": summary(results), "results": raw}),
                                    default=str, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
