"""How hard will a landscape be? Predict its difficulty profile before measuring it, from the full-space sample.

Measuring a landscape costs 20-40 minutes per layer on 2 cores, and whether it is as hard as the whole space
(:mod:`tensorgym.baselines.fidelity`) is known only afterwards. This script predicts it first: an XGBoost
surrogate fitted to the layer's measured kernels (its full-space sample, its shipped landscape and any
``--extra`` landscape files) scores every config of each candidate benchmark space (the stratified rule, or
``--rule stratified-path``, with importance, over ``--choices`` x ``--max-configs``), and random search's
expected best of 16/64/256 draws in it gives the predicted profile, beside the sample's measured one.

The surrogate is checked first, two ways, both printed: the sample's profile from cross-validated predictions
against the measured one, and the shipped landscape's predicted profile against its measured one (in-sample:
the landscape is among what it was fitted to). Out of sample it reads spaces a little harder than they are: on
ResNet-18 C7 (Zen 4) the space of 15 importance choices was predicted at 0.43/0.64/0.78 and measured at
0.47/0.68/0.85. Compare candidates with each other, not only with the sample.

    python bench/bench_landscape_plan.py Conv2d-ResNet18-C7-v0 --choices 7,15 --max-configs 2048,4096
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tensorgym.baselines.fidelity import random_search_profile
from tensorgym.cli.args import int_list
from tensorgym.database import Database
from tensorgym.envs.registration import workload_of
from tensorgym.landscape import Landscape, find_landscape
from tensorgym.landscape.shipped import sample_path
from tensorgym.spaces.tiles import benchmark
from tensorgym.spaces.tiles.space import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.text import format_table

from report_header import emit, header


def surrogate(features: np.ndarray, scores: np.ndarray):
    import xgboost as xgb

    return xgb.XGBRegressor(n_estimators=400, max_depth=8, learning_rate=0.05, subsample=0.8, n_jobs=1,
                            random_state=0).fit(features, scores)


def _profile(scores, reference: float | None = None) -> str:
    scores = np.clip(np.asarray(scores, dtype=float), 0.0, None)
    return "/".join(f"{v:.2f}" for v in random_search_profile(scores, reference or float(scores.max())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env_id")
    parser.add_argument("--choices", type=int_list, default=(7, 11, 15), help="importance choices to try")
    parser.add_argument("--max-configs", type=int_list, default=(1024, 2048, 4096), help="sizes to try")
    parser.add_argument("--top", type=float, default=benchmark.IMPORTANCE_TOP,
                        help="the share of the sample that decides importance (landscape measure's --importance-top)")
    parser.add_argument("--extra", nargs="*", default=(), help="more measured landscape files of the layer")
    parser.add_argument("--anchor-db", default=None,
                        help="the database of the anchoring search (`landscape measure`'s, '<db>-anchor.db'): plan "
                             "around its best config, the one measuring will use (default: the shipped optimum)")
    parser.add_argument("--rule", default="stratified", choices=benchmark.STRATIFIED_RULES,
                        help="the benchmark space's rule (default stratified)")
    parser.add_argument("--held", default=None,
                        help="a landscape database being measured: also count each candidate's configs it holds, so "
                             "a smaller candidate can reuse what a larger one's measuring already paid for")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    target = local_cpu()
    workload = workload_of(args.env_id)
    full = TilesSpace.for_target(target)(workload, target)
    sample = Landscape.load(sample_path(workload, target))
    shipped = Landscape.load(find_landscape(args.env_id, "tiles"))
    measured = [sample, shipped, *(Landscape.load(p) for p in args.extra)]
    configs = [c for land in measured for c in land.configs]
    features = np.array([full.encode(c) for c in configs])
    scores = np.concatenate([np.asarray(land.scores, dtype=float) for land in measured])
    best_known = float(scores.max())
    model = surrogate(features, scores)

    n = len(sample.configs)
    folds = np.arange(n) % 5
    predicted = np.zeros(n)
    for k in range(5):
        train = np.concatenate([folds != k, np.ones(len(scores) - n, dtype=bool)])
        predicted[folds == k] = surrogate(features[train], scores[train]).predict(features[:n][folds == k])
    shipped_predicted = model.predict(np.array([full.encode(c) for c in shipped.configs]))
    rule = (shipped.metadata.notes or {}).get("rule", "favoured")
    lines = header(f"Predicted difficulty of candidate benchmark spaces: {args.env_id}", target)
    lines += [f"surrogate: XGBoost on {len(scores)} measured kernels ({n} of the full-space sample); profile = random "
              f"search's expected best of 16/64/256 draws as a share of the best",
              f"whole-space sample: measured {_profile(sample.scores, best_known)}, predicted (5-fold) "
              f"{_profile(predicted, best_known)}",
              f"shipped landscape ({len(shipped)} configs, rule {rule}): measured {_profile(shipped.scores)}, "
              f"predicted {_profile(shipped_predicted)}", ""]
    anchor = shipped.optimum.config  # a config as good as the anchor search found, in place of it
    if args.anchor_db:
        with Database(args.anchor_db, readonly=True) as database:
            found = database.best(workload.key, target.fingerprint, full.name)
        if not found:
            parser.error(f"{args.anchor_db} holds no correct kernel of {workload.label}'s tiles space on this CPU")
        anchor = found[0].config
    anchor_score = float(model.predict(np.array([full.encode(anchor)]))[0])
    held: set[str] = set()
    if args.held:
        with Database(args.held, readonly=True) as database:
            held = {r.config.key for r in database.records(workload.key, target.fingerprint, full.name)}
    rows, kept = [], []
    for choices in args.choices:
        importance = benchmark.coordinate_importance(full, list(sample.configs), list(sample.scores), top=args.top)
        for max_configs in args.max_configs:
            bounds = benchmark.benchmark_bounds(full, max_configs, anchor, args.rule, importance, choices)
            space = TilesSpace.for_target(target)(workload, target, bounds=bounds)
            candidate = space.configs()
            prediction = model.predict(np.array([full.encode(c) for c in candidate]))
            row = [str(choices), str(max_configs), str(len(candidate)), _profile(prediction),
                   f"{prediction.max() / anchor_score:.2f}"]
            if args.held:
                row.append(str(sum(c.key in held for c in candidate)))
            rows.append(row)
            kept.append(f"{choices} choices, at most {max_configs}: " + ", ".join(
                f"{c.label} {len(bounds[c.label])}/{len(c.choices)}" for c in full.coordinates))
    lines.append(f"candidates: rule {args.rule}")
    columns = ["importance choices", "max configs", "configs", "predicted profile", "predicted best / anchor"]
    lines.append(format_table(rows, columns + (["held"] if args.held else [])))
    lines += ["", "values each candidate keeps of each coordinate (few values of an innermost tile can stall a guided "
              "search that climbs it step by step, as on ResNet-18 C7):", *kept]
    emit("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
