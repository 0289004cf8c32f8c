"""Do the landscapes rank random, GA and DGD as live runs in the whole space do?

Per layer (R5, Y9, C7, M3 by default) and at 64, 128 and 256 trials (:mod:`tensorgym.baselines.agreement`):
every pair of agents that live runs separate (non-overlapping 95 % intervals over seeds), whether the
landscape orders that pair the same way, and Kendall's tau of the agents' means. The target is no
separated pair inverted. Then each agent's progress as a share of the best (live) or of the optimum
(landscape), and how many seeds come within 5 % of it: a landscape as hard as the whole space for
random search can still be harder, or easier, for a guided one.

* **Live GA and DGD**: ``compare`` runs in the full tiles space, compiled and timed on this machine: the
  per-seed bests of a committed live learning report (``--live-report``, its ``.json``), those an earlier run of
  this report kept (``--live-kept``), and the result files of further live runs (``--live-out``, as
  ``bench_learning.py --live --out`` writes them), later sources first where a seed is in several. With ``--out``,
  every live best used is kept again in ``--live-kept``, committed beside the report.
* **Live random**: the layer's full-space sample (``tensorgym landscape sample``: configs drawn uniformly from
  the whole space, measured live), replayed: seed ``s`` takes the sample's configs in a shuffled order of
  seed ``s``, which is a uniform draw of distinct configs, as the random agent makes.
* **On the landscape**: the same agents, seeds and budget with ``compare --backend landscape`` on this CPU's
  shipped landscapes (runs kept in ``--landscape-out``, resumable).

    python bench/bench_landscape_agreement.py --out bench/reports/landscapes/agreement.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from tensorgym.baselines.agreement import agreement
from tensorgym.baselines.compare import compare
from tensorgym.baselines.fidelity import TOLERANCE, search_fidelity
from tensorgym.baselines.stats import mean_ci
from tensorgym.envs.registration import workload_of
from tensorgym.landscape import Landscape, cpu_folder, find_landscape
from tensorgym.landscape.shipped import sample_path
from tensorgym.result import TuningResult
from tensorgym.target import local_cpu
from tensorgym.text import format_table, slug

from report_header import HERE, emit, header

ENVS = ("Conv2d-ResNet-R5-v0", "Conv2d-YOLO-Y9-v0", "Conv2d-ResNet18-C7-v0", "Matmul-BERT-M3-v0")
AGENTS = ("random", "ga", "dgd")
TRIALS = (64, 128, 256)


def live_bests(env_id: str, report: dict | None, kept: dict, out: Path | None, seeds: int,
               sample: Landscape) -> dict[str, dict[int, dict]]:
    """agent -> trials -> {seed: best}: the committed report's per-seed values, then those kept from earlier runs
    of this benchmark (``kept``, as :func:`kept_live` reads them), then the result files."""
    bests: dict[str, dict[int, dict]] = {agent: {n: {} for n in TRIALS} for agent in AGENTS}
    agents = (report or {}).get("envs", {}).get(env_id, {}).get("agents", {})
    for agent in ("ga", "dgd"):
        entry = agents.get(agent)
        if entry:
            for n in TRIALS:
                for seed, value in zip(entry["seeds"], entry.get(f"@{n}", {}).get("values", [])):
                    bests[agent][n][seed] = value
        for n in TRIALS:
            bests[agent][n].update(kept.get(env_id, {}).get(agent, {}).get(n, {}))
    results = (out / env_id / "results" / slug(env_id)) if out is not None else None
    for agent in ("ga", "dgd"):
        for path in sorted(results.glob(f"{agent}-seed*.json")) if results and results.is_dir() else []:
            result = TuningResult.from_json(json.loads(path.read_text()))
            for n in TRIALS:
                bests[agent][n][result.seed] = result.best_at(n)
    scores = np.asarray(sample.scores, dtype=float)
    for seed in range(seeds):
        order = scores[np.random.default_rng(seed).permutation(len(scores))]
        for n in TRIALS:
            bests["random"][n][seed] = float(order[:n].max())
    return bests


def kept_live(path: Path) -> dict:
    """env id -> agent -> trials -> {seed: best GFLOP/s}: the live GA and DGD bests an earlier run kept in ``path``
    (a committed JSON file, so that the report can be made again without the runs' databases)."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    if data.get("cpu") != cpu_folder():  # another CPU's runs say nothing of this one's
        return {}
    return {env: {agent: {int(n): {int(seed): value for seed, value in by_seed.items()}
                          for n, by_seed in by_trials.items()} for agent, by_trials in agents.items()}
            for env, agents in data["live"].items()}


def landscape_bests(env_id: str, seeds: int, out: Path) -> dict[str, dict[int, list[float]]]:
    """The same agents on this CPU's landscape of the layer (``compare --backend landscape``)."""
    board = compare([env_id], list(AGENTS), budget=max(TRIALS), seeds=seeds, out_dir=out, backend="landscape",
                    vendor=False, plot=False, progress=False, trial_points=TRIALS, time_points=None)
    return {agent: {n: [r.best_at(n) for r in board.results[(env_id, agent)]] for n in TRIALS} for agent in AGENTS}


def _ci(values) -> str:
    mean, low, high = mean_ci(values)
    return f"{mean:.1f} [{low:.1f}, {high:.1f}]" if low is not None else f"{mean:.1f}"


def _progress_table(sample: Landscape, landscape: Landscape, live: dict, land: dict) -> list[str]:
    """Each agent's mean best as a share of the best known (live) and of the optimum (landscape), side by side."""
    optimum = float(np.max(landscape.scores))
    best_known = max(optimum, float(np.max(sample.scores)),
                     *(max(values) for runs in live.values() for values in runs.values() if values))
    rows = []
    for agent in AGENTS:
        f = search_fidelity(agent, live[agent], land[agent], best_known, optimum)
        rows.append([agent, " / ".join(f"{v:.2f}" for v in f.live), " / ".join(f"{v:.2f}" for v in f.landscape),
                     f"{f.gap:.2f}", "yes" if f.faithful else "no", "{}/{}".format(*f.live_found),
                     "{}/{}".format(*f.landscape_found)])
    at = "/".join(map(str, TRIALS))
    return [format_table(rows, ["agent", f"live @{at}", f"landscape @{at}", "gap", f"within {TOLERANCE}",
                                f"live seeds at optimum @{TRIALS[-1]}", f"landscape seeds at optimum @{TRIALS[-1]}"]),
            f"progress: mean best as a share of the best known kernel ({best_known:.1f} GFLOP/s: the max of the "
            f"sample, the landscape and every live run) live, and of the landscape's optimum ({optimum:.1f}) on it; "
            f"at optimum: within 5 % of that reference. Random search's row estimates over "
            f"{len(live['random'][TRIALS[-1]])} seeds what the fidelity report computes exactly; the GA's and DGD's "
            f"show whether the landscape is as hard for a guided search.", ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(ENVS))
    parser.add_argument("--seeds", type=int, default=10, help="seeds per agent (default 10)")
    parser.add_argument("--live-report", default=str(HERE / "reports" / "learning" / f"{cpu_folder()}-live.json"))
    parser.add_argument("--live-kept", default=str(HERE / "reports" / "landscapes" / "agreement.json"),
                        help="live bests kept by earlier runs of this report; written again with --out")
    parser.add_argument("--live-out", default="work/agree/out", help="result files of further live runs")
    parser.add_argument("--landscape-out", default="work/agree/landscape", help="where the landscape runs go")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        print("error: --seeds must be at least 2 (an interval)", file=sys.stderr)
        return 2
    report_path = Path(args.live_report)
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    kept_path = Path(args.live_kept)
    kept, kept_now = kept_live(kept_path), {}
    lines = header("Agreement of the landscapes with live runs: random, GA and DGD, separated pairs and Kendall's tau",
                   local_cpu())
    lines += [f"live GA/DGD: the per-seed bests of {report_path.name if report else 'no committed report'}, of "
              f"{kept_path.name if kept else 'no kept file'} and of the runs in {args.live_out} (a seed in several: "
              f"the later's); live random: the layer's full-space sample "
              f"replayed in {args.seeds} shuffled orders; landscape: this CPU's shipped files; {args.seeds} seeds x "
              f"{max(TRIALS)} trials per agent. Means [95 % interval] of the best GFLOP/s over seeds.", ""]
    inverted_total = separated_total = 0
    for env_id in args.envs.split(","):
        sample = Landscape.load(sample_path(workload_of(env_id), local_cpu()))  # the whole space's, measured live
        live = live_bests(env_id, report, kept, Path(args.live_out), args.seeds, sample)
        kept_now[env_id] = {agent: live[agent] for agent in ("ga", "dgd")}
        land = landscape_bests(env_id, args.seeds, Path(args.landscape_out) / slug(env_id))
        live_lists = {a: {n: [v for _, v in sorted(live[a][n].items())] for n in TRIALS} for a in AGENTS}
        landscape = Landscape.load(find_landscape(env_id, "tiles"))
        notes = landscape.metadata.notes or {}
        lines += [f"== {env_id}: landscape {landscape.metadata.cpu_folder}, {len(landscape)} configs, rule "
                  f"{notes.get('rule', 'favoured')} =="]
        rows = []
        for agent in AGENTS:
            seeds_seen = sorted(live[agent][TRIALS[-1]])
            rows.append([agent, f"{len(seeds_seen)}", *(_ci(live_lists[agent][n]) for n in TRIALS),
                         *(_ci(land[agent][n]) for n in TRIALS)])
        lines.append(format_table(rows, ["agent", "live seeds", *(f"live @{n}" for n in TRIALS),
                                         *(f"landscape @{n}" for n in TRIALS)]))
        result = agreement(live_lists, land, TRIALS)
        pair_rows = [[f"@{p.trials}", f"{p.better} > {p.worse}", f"{p.live_means[0]:.1f} vs {p.live_means[1]:.1f}",
                      "yes" if p.separated else "no",
                      "-" if p.landscape_means is None else f"{p.landscape_means[0]:.1f} vs {p.landscape_means[1]:.1f}",
                      "INVERTED" if p.inverted else ("same" if p.separated else "-")] for p in result.pairs]
        lines += ["", format_table(pair_rows, ["trials", "live order", "live means", "separated live",
                                               "landscape means", "landscape"]),
                  "Kendall's tau of the means, live against landscape: "
                  + ", ".join(f"@{n} {'-' if t is None else f'{t:+.2f}'}" for n, t in result.tau.items()), ""]
        lines += _progress_table(sample, landscape, live_lists, land)
        inverted_total += len(result.inverted)
        separated_total += len(result.separated)
    lines.append(f"target: no separated pair inverted: {'MET' if inverted_total == 0 else 'NOT MET'} "
                 f"({inverted_total} of {separated_total} separated pairs inverted)")
    emit("\n".join(lines) + "\n", args.out)
    if args.out:
        kept_path.write_text(json.dumps({"about": "live per-seed bests (GFLOP/s) of the GA and DGD in the whole tiles "
                                                  "space, by layer, agent, trials and seed, read back by "
                                                  "bench_landscape_agreement.py", "cpu": cpu_folder(),
                                         "live": {**kept, **kept_now}}, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
