"""Offline evaluation of the cost models: do they rank held-out configs of a layer, and the good ones?

For each layer the dataset is the configs the ``random`` agent draws with the
given seeds (``--seeds``, ``--n`` per seed), read from ``--db``; the random
runs of ``bench/bench_learning.py`` are such a dataset, and ``--collect``
measures whatever is missing first (the random agent with that seed and
budget, resumable). Every model set-up (``--setups`` x ``--features``) is
trained on ``n`` configs (``--sizes``) and scored on held-out ones, over
``--splits`` random splits whose held-out set is shared by every model and
size (:mod:`tensorgym.agents.model_eval`): Spearman and Kendall overall,
Spearman within the measured top quartile, recall of the true top 10 % and
top 1 % within the predicted top 10 %, and the true quality of the predicted
best (``best_of_1``) and of the best among the predicted top 10 %.

``random`` is chance level. ``--transfer`` adds models trained on the other
layers' datasets (features they share; plus ``n`` configs of the layer
itself). ``--retest K`` times K dataset configs again and scores the first
measurement as if it were a model's prediction of the second: the noise
ceiling, the best any model can do on this machine.

Prints the tables and the issue's target (recall of the true top 10 % within
the predicted top 10 % >= 0.6 after 128 training configs); writes
``cost_model.csv``, ``cost_model.json`` and ``plots/<layer>.png`` to ``--out``.

Smoke run (seconds, on a tiny database)::

    python bench/bench_cost_model.py --envs Matmul-BERT-M0-v0 --collect --n 48 --sizes 16,32 --splits 2 \\
        --setups ansor,log --features af --db /tmp/cm-smoke.db --out /tmp/cm-smoke
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path

import numpy as np

from tensorgym.agents.cost_model import FEATURE_SETS
from tensorgym.agents.model_eval import (
    DEFAULT_SIZES, SETUPS, Dataset, Evaluation, collect_random, default_test_size, evaluate, evaluate_transfer,
    model_specs, random_dataset, records_dataset,
)
from tensorgym.agents.model_quality import QUALITY_METRICS, quality
from tensorgym.catalog import make_space
from tensorgym.cli.args import int_list, seed_list
from tensorgym.database import Database
from tensorgym.envs.registration import make_env, workload_of
from tensorgym.target import local_cpu
from tensorgym.text import format_table, slug

DEFAULT_ENVS = ("Conv2d-ResNet-R5-v0", "Conv2d-YOLO-Y10-v0", "Matmul-BERT-M3-v0")
TARGET_N, TARGET_RECALL = 128, 0.6
SHOWN = ("spearman", "kendall", "top_quartile_spearman", "recall10", "recall1", "best_of_1", "best_of_10pct")
SHORT = {"spearman": "rho", "kendall": "tau", "top_quartile_spearman": "rho top25%", "recall10": "rec10%",
         "recall1": "rec1%", "best_of_1": "best@1", "best_of_10pct": "best@10%"}


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def retest(space, dataset: Dataset, count: int, seed: int = 0) -> dict[str, float]:
    """Time ``count`` dataset configs again; the metrics of the first timing as a predictor of the second."""
    from tensorgym.measure import Measurer

    rng = np.random.default_rng(seed)
    picks = rng.choice(len(dataset), size=min(count, len(dataset)), replace=False)
    configs = [dataset.configs[i] for i in picks]
    with Measurer() as measurer:
        records = measurer.measure(space, configs, check=False)
    first = dataset.measured[picks]
    second = np.array([r.gflops if r.ok and r.gflops else 0.0 for r in records])
    return {**quality(first, second), "configs": len(configs)}


def print_tables(table: list[dict], layers: list[str]) -> None:
    for layer in layers:
        rows = sorted((r for r in table if r["layer"] == layer), key=lambda r: (r["n"], r["model"]))
        if not rows:
            continue
        print(f"\n== {layer}: held-out {rows[0]['test']} configs, mean (sd) over {rows[0]['splits']} splits ==")
        cells = [[r["model"], str(r["n"])] + [f"{r[m]:.2f} ({r[m + '_sd']:.2f})" for m in SHOWN]
                 + [f"{r['fit_s']:.2f}"] for r in rows]
        print(format_table(cells, ["model", "n"] + [SHORT[m] for m in SHOWN] + ["fit s"]))


def print_target(table: list[dict], layers: list[str], n: int = TARGET_N) -> None:
    models = sorted({r["model"] for r in table if r["n"] == n})
    if not models:
        print(f"\n(no model was trained on {n} configs: the target row needs --sizes with {n})")
        return
    by = {(r["layer"], r["model"]): r for r in table if r["n"] == n}
    print(f"\n== recall of the true top 10 % within the predicted top 10 %, after {n} training configs "
          f"(target >= {TARGET_RECALL}) ==")
    cells = []
    for model in models:
        values = [by[(layer, model)]["recall10"] if (layer, model) in by else math.nan for layer in layers]
        met = sum(v >= TARGET_RECALL for v in values if not math.isnan(v))
        cells.append([model] + [f"{v:.2f}" if not math.isnan(v) else "-" for v in values] + [f"{met}/{len(layers)}"])
    print(format_table(cells, ["model"] + layers + ["met"]))


def _style(model: str, setups: list[str]) -> dict:
    """Colour by training set-up, line style by feature set; chance and the draft alone in grey."""
    name = model.removeprefix("transfer:")
    if name == "random":
        return {"color": "black", "linestyle": ":"}
    if name == "draft only":
        return {"color": "0.5", "linestyle": ":"}
    setup, _, features = name.partition("/")
    return {"color": f"C{setups.index(setup) % 10}",
            "linestyle": {"generic": "-", "af": "--", "both": "-."}.get(features, "-")}


def plot(table: list[dict], layers: list[str], out: Path, ceilings: dict[str, dict]) -> list[Path]:
    """One PNG per layer: four metrics against the number of training configs, one line per model.

    Colour is the training set-up, line style the feature set (generic solid, af dashed, both dash-dot);
    a second row shows the models trained on the other layers as well (transfer), if any.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    paths = []
    (out / "plots").mkdir(parents=True, exist_ok=True)
    panels = ("spearman", "top_quartile_spearman", "recall10", "best_of_1")
    for layer in layers:
        rows = [r for r in table if r["layer"] == layer]
        if not rows:
            continue
        models = sorted({r["model"] for r in rows})
        setups = sorted({m.removeprefix("transfer:").partition("/")[0] for m in models})
        groups = [[m for m in models if not m.startswith("transfer:")]]
        if any(m.startswith("transfer:") for m in models):
            groups.append([m for m in models if m.startswith("transfer:")])
        fig = Figure(figsize=(15, 4.2 * len(groups)), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(groups), len(panels), squeeze=False)
        for row_axes, group in zip(axes, groups):
            for model in group:
                points = sorted((r for r in rows if r["model"] == model), key=lambda r: r["n"])
                xs = [max(r["n"], 8) for r in points]  # transfer's n = 0 sits at the left edge of the log axis
                for ax, metric in zip(row_axes, panels):
                    ax.errorbar(xs, [r[metric] for r in points], yerr=[r[metric + "_sd"] for r in points],
                                marker="o", markersize=3, capsize=2, linewidth=1.2, label=model,
                                **_style(model, setups))
            sizes = sorted({r["n"] for r in rows if r["model"] in group})
            for ax, metric in zip(row_axes, panels):
                if layer in ceilings:
                    ax.axhline(ceilings[layer][metric], color="red", linewidth=1, linestyle="-.",
                               label="noise ceiling (re-timed)")
                if metric == "recall10":
                    ax.axhline(TARGET_RECALL, color="red", linewidth=0.8, linestyle=":", label="target")
                ax.set_xscale("log", base=2)
                ax.set_xticks([max(n, 8) for n in sizes], [str(n) for n in sizes])  # 0: other layers' data only
                ax.set(xlabel="training configs of the layer", title=SHORT[metric])
                ax.grid(alpha=0.3)
            handles, labels = row_axes[-1].get_legend_handles_labels()
            row_axes[-1].legend(handles, labels, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=7,
                                frameon=False)
        fig.suptitle(f"cost models on {layer}: held-out ranking quality (mean and sd over splits)")
        path = out / "plots" / f"{slug(layer)}.png"
        fig.savefig(path, dpi=100)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(DEFAULT_ENVS), help="comma-separated env ids (layers)")
    parser.add_argument("--db", default="bench-learning.db", help="the database holding the measurements")
    parser.add_argument("--seeds", type=seed_list, default=[0], help="random-agent seeds whose draws form the dataset")
    parser.add_argument("--n", type=int, default=512, help="configs per seed (default: 512)")
    parser.add_argument("--source", choices=("random", "records"), default="random",
                        help="random: the random agent's draws (default); records: every record of the layer")
    parser.add_argument("--collect", action="store_true", help="measure the dataset's missing configs first")
    parser.add_argument("--sizes", type=int_list, default=DEFAULT_SIZES, help="training sizes")
    parser.add_argument("--splits", type=int, default=5, help="random train/held-out splits (default: 5)")
    parser.add_argument("--test-size", type=int, default=None, help="held-out configs per split")
    parser.add_argument("--setups", default=",".join(SETUPS), help=f"training set-ups ({', '.join(SETUPS)})")
    parser.add_argument("--features", default=",".join(FEATURE_SETS), help="feature sets (generic, af, both)")
    parser.add_argument("--transfer", action="store_true", help="also train on the other layers (transfer)")
    parser.add_argument("--retest", type=int, default=0, help="re-time this many configs per layer: noise ceiling")
    parser.add_argument("--out", default="bench-cost-model", help="output directory")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    seeds = list(range(args.seeds)) if isinstance(args.seeds, int) else list(args.seeds)
    specs = model_specs(_names(args.setups), _names(args.features))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()

    db = Database(args.db)
    datasets: list[Dataset] = []
    spaces = {}
    for env_id in _names(args.envs):
        workload = workload_of(env_id)
        space = spaces[env_id] = make_space("tiles", workload, local_cpu())
        if args.collect:
            env = make_env(workload, db=db)
            try:
                for seed in seeds:
                    collect_random(env, seed, args.n, progress=not args.quiet)
            finally:
                env.close()
        data = random_dataset(db, space, seeds, args.n) if args.source == "random" else records_dataset(db, space)
        print(f"{env_id} ({data.label}): {len(data)} configs, {sum(g is None for g in data.gflops)} failed, "
              f"best {data.measured.max() if len(data) else 0:.1f} GFLOP/s")
        if len(data) < 4:
            print("  too few configs to evaluate; run with --collect (or bench/bench_learning.py) first")
            continue
        datasets.append(data)
    if not datasets:
        print("no dataset to evaluate", file=sys.stderr)
        return 2

    result = Evaluation()
    for data in datasets:
        # One held-out size per layer, so that the transfer rows are scored on the same held-out configs.
        test_size = args.test_size or default_test_size(len(data), args.sizes)
        result.rows += evaluate(data, specs, args.sizes, args.splits, test_size, progress=not args.quiet).rows
        if args.transfer and len(datasets) > 1:
            others = [d for d in datasets if d is not data]
            sizes = (0,) + tuple(n for n in args.sizes if n <= 128)
            result.rows += evaluate_transfer(data, others, specs, sizes, args.splits, test_size,
                                             progress=not args.quiet).rows
    ceilings: dict[str, dict] = {}
    if args.retest > 0:
        for data, env_id in zip(datasets, spaces):
            ceilings[data.label] = retest(spaces[env_id], data, args.retest)
    table = result.table()
    layers = [d.label for d in datasets]
    print_tables(table, layers)
    if ceilings:
        print("\n== noise ceiling: a first timing as the 'prediction' of a second one ==")
        cells = [[layer, str(c["configs"])] + [f"{c[m]:.2f}" for m in SHOWN] for layer, c in ceilings.items()]
        print(format_table(cells, ["layer", "configs"] + [SHORT[m] for m in SHOWN]))
    print_target(table, layers)

    (out / "cost_model.json").write_text(json.dumps({"rows": result.rows, "table": table, "noise_ceiling": ceilings,
                                                     "settings": vars(args) | {"seeds": seeds}}, indent=1,
                                                    default=str))
    with (out / "cost_model.csv").open("w") as f:
        keys = ["layer", "model", "n", "splits", "test"] + [k for m in QUALITY_METRICS + ("fit_s",)
                                                            for k in (m, m + "_sd")]
        f.write(",".join(keys) + "\n")
        for row in table:
            f.write(",".join(str(row[k]) for k in keys) + "\n")
    paths = plot(table, layers, out, ceilings)
    print(f"\nwrote {out / 'cost_model.csv'}, {out / 'cost_model.json'} and {len(paths)} plot(s) in {out / 'plots'} "
          f"({(time.monotonic() - t0) / 60:.1f} min)")
    db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
