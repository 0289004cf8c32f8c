"""Benchmark of learned search, with statistics: on this CPU's shipped landscapes (default) or live.

**On landscapes** (the default; nothing compiled, runs spread over the cores, minutes not hours), one
report per CPU, ``bench/reports/learning/<cpu>.txt`` (and ``.json``), with the commands that reproduce it:

1. **leaderboard**: ``compare --backend landscape`` with random, GA, DGD, Optuna and the two random-model
   ablations on every shipped layer of this CPU (``--seeds`` 40 x ``--budget`` 512 trials): the mean best
   with 95 % intervals at 16..512 trials and at 30 s..5 min of simulated clock, each agent's fraction of the
   true optimum, the methodology score against the true optimum, the HTML page, and the run's wall time split
   into agent compute and simulation. Written to ``bench/reports/landscapes/leaderboard.{txt,md,html}``, with
   every run's best-so-far curve in ``leaderboard_curves.json`` (the ``tensorgym-curves`` format).
2. **long**: the GA and DGD at ``--headline-trials`` (1,000) trials, for seed 000's headline: DGD after
   2 minutes of simulated clock against the GA after 1,000 trials, with seed 000's run-to-run
   variability (its Eq. 1).
3. The learning report over both (:mod:`tensorgym.baselines.learning`): GA and DGD against random at 128
   and 512 trials and against their random-model ablations (ratio of means with a bootstrap interval,
   Welch's p, whether the 95 % intervals separate; against the ablation also by score, seed by seed); the learning
   targets. 40 seeds, because what DGD's model adds over its ablation is about 0.05 of score: at 20 seeds even the
   paired interval of that difference touched 0 on R5.
4. **the other targets** of the issue, each from its own benchmark's JSON report when it exists: the cost
   model's recall of the true top 10 % (``bench_cost_model_landscape.py``), the one-shot predictor and the
   RL policies on held-out layers (``bench_learning_heldout.py``), and the Minari export. Pass
   ``--run-others`` to run them first.

The @128 columns read the first 128 trials of the 512-trial runs: every agent here makes the same first
``k`` trials whatever its budget (random, GA and DGD by construction; Optuna's TPE does not look at the
budget), so one run per seed serves every budget. Finished runs are read back from ``--out``
(``work/learning-<cpu>`` by default, git-ignored): an interrupted run goes on where it stopped.

    python bench/bench_learning.py                      # the full run on landscapes (about 75 min on 2 cores)
    python bench/bench_learning.py --seeds 3 --budget 64 --headline-trials 128 --out /tmp/learn-smoke \
        --report-dir /tmp/learn-smoke/reports          # a smoke run (a minute)

**Live** (``--live``): the same agents compiled and timed on this machine, one run at a time, into one
database (``--db``), each layer its own ``compare`` run in ``<out>/<layer>/`` with the vendors and every
run's best re-timed at the end. The report adds whether the landscape's ranking of the agents holds live, layer by
layer, and each agent's re-timed best against the vendor's best of the same run; ``--report-dir bench/reports``
also writes it to ``learning/<cpu>-live.{txt,json}``. 6 agents x 5 seeds x 512 measurements is 2-3 hours per layer
on 2 cores; the committed live report ran random, GA and DGD, 5 seeds x 256 on R5 and C7 and 2 on M3::

    python bench/bench_learning.py --live --envs Matmul-BERT-M0-v0 --budget 12 --seeds 2 --budgets 8,12 \
        --agent-option ga:population=64 --agent-option ga-random-model:population=64 --no-vendor \
        --db /tmp/learn-smoke.db --out /tmp/learn-smoke
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import shlex
import subprocess
import sys
import time
from pathlib import Path

from tensorgym.baselines.compare import compare
from tensorgym.baselines.learning import analyse, plot, render
from tensorgym.baselines.render import caption, markdown, text_table
from tensorgym.baselines.vendor import best_vendor
from tensorgym.cli.args import float_list, int_list, seed_list
from tensorgym.landscape import cpu_folder, shipped_env_ids
from tensorgym.target import resolve_target
from tensorgym.text import format_table, slug
from tensorgym.tuner import TuningResult

from report_header import HERE, emit, header

LIVE_ENVS = ("Conv2d-ResNet-R5-v0", "Conv2d-YOLO-Y10-v0", "Matmul-BERT-M3-v0")
DEFAULT_AGENTS = ("random", "ga", "dgd", "optuna", "ga-random-model", "dgd-random-model")
LIVE_TIME_POINTS = (60.0, 120.0, 180.0, 240.0, 300.0)
LANDSCAPE_TIME_POINTS = (30.0, 60.0, 120.0, 300.0)
LANDSCAPE_TRIAL_POINTS = (16, 32, 64, 128, 256, 512)
# Target 3 is scored on the full-space samples, where good configs are as rare as in the space a user tunes; the
# landscapes' report adds what the model predicted for the agents' batches. Both are shown from their summaries
# (see _cost_model_lines).
COST_MODEL_REPORTS = ("landscapes/cost_model_samples.json", "landscapes/cost_model.json")
# The other targets' own benchmarks (each a script and its arguments): their JSON reports are read into this one
# (``--run-others`` runs them).
OTHER_REPORTS = {
    "cost model on the full-space samples (target 3)": (
        ("bench_cost_model_landscape.py", "--on", "samples", "--agent-seeds", "0", "--out",
         "bench/reports/landscapes/cost_model_samples.txt"), COST_MODEL_REPORTS[0]),
    "cost model on the landscapes, and the agents' batches": (("bench_cost_model_landscape.py",),
                                                              COST_MODEL_REPORTS[1]),
    "held-out layers: one-shot and RL (targets 4 and 5)": (("bench_learning_heldout.py",),
                                                           "landscapes/learning_heldout.json"),
}


def agent_option(text: str) -> tuple[str, str, object]:
    """``agent:key=value`` (the value a Python literal, else a string)."""
    try:
        agent, rest = text.split(":", 1)
        key, value = rest.split("=", 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected agent:key=value, got {text!r}") from None
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = value
    return agent.strip(), key.strip(), parsed


def load(out: Path) -> tuple[dict[str, dict[str, list[TuningResult]]], dict[str, str]]:
    """Every layer's results under ``out`` (``<out>/<layer>/compare.json``): env -> agent -> runs; and labels."""
    results: dict[str, dict[str, list[TuningResult]]] = {}
    labels: dict[str, str] = {}
    for board in sorted(out.glob("*/compare.json")):
        data = json.loads(board.read_text())
        for row in data["rows"]:
            if row.get("workload"):
                labels[row["env"]] = row["workload"]
        for key, files in data.get("result_files", {}).items():
            env_id, agent = key.rsplit("/", 1)
            # The paths are as compare wrote them (relative to where it ran); else look beside compare.json.
            paths = [Path(f) if Path(f).exists() else board.parent / "results" / Path(f).parent.name / Path(f).name
                     for f in files]
            runs = [TuningResult.from_json(json.loads(p.read_text())) for p in paths if p.exists()]
            results.setdefault(env_id, {})[agent] = runs
    return results, labels


def _by_agent(board) -> dict[str, dict[str, list[TuningResult]]]:
    out: dict[str, dict[str, list[TuningResult]]] = {}
    for (env_id, agent), runs in board.results.items():
        out.setdefault(env_id, {})[agent] = list(runs)
    return out


def _failures(board) -> int:
    for error in board.errors:
        print(f"FAILED: {error['agent']} on {error['env']} (seed {error['seed']}): "
              f"{error['error'].splitlines()[0]}")
    return len(board.errors)


def _count(seeds: int | list[int]) -> int:
    return seeds if isinstance(seeds, int) else len(seeds)


def _timing_text(board, what: str) -> str:
    t = board.timing or {}
    if not t.get("runs_now"):
        return f"{what}: every run read back from earlier results (no wall time this time)"
    return (f"{what}: {t['runs_now']} runs now, {t['jobs']} at a time: {t['wall_s'] / 60:.1f} min wall; of the runs' "
            f"own seconds, {t['agent_and_loop_s']:.0f} s agent compute and tuning loop, {t['simulation_s']:.1f} s "
            f"answering from the landscapes")


def _other_reports(run: bool, quiet: bool) -> list[str]:
    """The other targets' reports, summarised from their JSON (run first when ``run``)."""
    lines = []
    for title, ((script, *options), report) in OTHER_REPORTS.items():
        path = HERE / "reports" / report
        command = shlex.join(["python", f"bench/{script}", *options])
        if run:
            subprocess.run([sys.executable, str(HERE / script), *options], check=False, cwd=HERE.parent,
                           stdout=subprocess.DEVNULL if quiet else None)
        lines.append(f"\n== {title} ==\ncommand: {command}; report: bench/reports/{report[:-5]}.txt")
        if not path.exists():
            lines.append("not run yet on this machine (no report)")
            continue
        data = json.loads(path.read_text())
        if report in COST_MODEL_REPORTS and data.get("summary"):
            lines += _cost_model_lines(data["summary"])
            continue
        # A report's headline figures: its summary or targets, else its top-level entries but the raw ones.
        summary = data.get("summary") or data.get("targets") or {
            key: value for key, value in data.items() if key not in ("settings", "layers", "runs")}
        lines.append(json.dumps(summary, indent=1) if summary else "(its report has no summary)")
    return lines


def _figure(entry: dict | None) -> str:
    """``{"mean", "ci"}`` as ``mean [low, high]``."""
    if not entry or entry.get("mean") is None:
        return "-"
    low, high = entry.get("ci") or (None, None)
    return f"{entry['mean']:.2f}" + (f" [{low:.2f}, {high:.2f}]" if low is not None else "")


def _cost_model_lines(summary: dict) -> list[str]:
    """Target 3 from the cost-model report's summary: per layer the recall of the true top 10 % and the Spearman
    inside the true top quartile at 128 training configs, the agents' default against the opt-in set-up, met or
    missed; then what the model predicted for the GA's and DGD's batches against what they measured."""
    default, opt_in, layers = summary["default"], summary["opt_in"], summary["layers"]
    met = sum(1 for e in layers.values() if e["met"])
    lines = [f"{'MET' if met == len(layers) else 'NOT MET'} {summary['target']}: on {met} of {len(layers)} layers "
             f"with the opt-in set-up {opt_in} (the GA's and DGD's default: {default}); mean [95 % interval] over "
             f"the training sets"]
    cells = [[layer, _figure(e[default]["recall10"]), _figure(e[opt_in]["recall10"]),
              _figure(e[default]["top_quartile_spearman"]), _figure(e[opt_in]["top_quartile_spearman"]),
              "met" if e["met"] else "missed"] for layer, e in layers.items()]
    lines.append(format_table(cells, ["layer", f"rec10 {default}", f"rec10 {opt_in}", f"rho top25 {default}",
                                      f"rho top25 {opt_in}", "target"]))
    cells = []
    for layer, agents in summary.get("batches", {}).items():
        for agent, models in agents.items():
            for model, b in models.items():
                cells.append([layer, agent, model, b["runs"], b["rounds"],
                              "-" if b["predicted_gflops"] is None else f"{b['predicted_gflops']:.1f}",
                              "-" if b["measured_gflops"] is None else f"{b['measured_gflops']:.1f}",
                              _figure(b["rho"]), _figure(b["recall10"]), _figure(b["true_top10_share"])])
    if cells:
        lines += ["the batches (landscape backend): the mean GFLOP/s the model predicted for its batches against "
                  "what they measured; within a batch, Spearman, the recall of its best 10 % and its share in the "
                  "space's true top 10 %",
                  format_table(cells, ["layer", "agent", "model", "runs", "rounds", "predicted", "measured", "rho",
                                       "rec10", "true top10"])]
    return lines


def _minari_exports(envs: list[str], cpu: str, out: Path, episodes: int) -> list[str]:
    """Target 6: each landscape's trajectories as a Minari dataset, loaded back with ``minari.load_dataset``."""
    lines = [f"\n== offline RL data: Minari datasets (target 6) ==\ncommand: tensorgym dataset minari ENV_ID "
             f"--landscape {cpu} --episodes {episodes} --greedy 0.25 --out {out}"]
    try:
        import minari

        from tensorgym.dataset.minari_export import export_landscape_dataset
    except ImportError as exc:
        return [*lines, f"not run: {exc} (pip install 'tensorgym[minari]')"]
    import os
    import shutil

    shutil.rmtree(out, ignore_errors=True)  # an export never overwrites a dataset: write them afresh
    for env_id in envs:
        export = export_landscape_dataset(env_id, landscape=cpu, episodes=episodes, greedy=0.25, out=out)
        saved = os.environ.get("MINARI_DATASETS_PATH")
        os.environ["MINARI_DATASETS_PATH"] = str(out)
        try:
            dataset = minari.load_dataset(export.dataset_id)
            lines.append(f"{export.summary()}; minari.load_dataset: {dataset.total_episodes} episodes, "
                         f"{dataset.total_steps} steps")
        finally:
            if saved is None:
                os.environ.pop("MINARI_DATASETS_PATH", None)
            else:
                os.environ["MINARI_DATASETS_PATH"] = saved
    return lines


def run_landscapes(args: argparse.Namespace) -> int:
    target = resolve_target(None)
    cpu = args.landscape or cpu_folder(target)
    envs = ([e.strip() for e in args.envs.split(",") if e.strip()] if args.envs else shipped_env_ids(cpu))
    if not envs:
        print(f"no landscapes shipped for {cpu}: measure them first (README, 'Landscapes')", file=sys.stderr)
        return 2
    out = Path(args.out or f"work/learning-{cpu}")
    reports = Path(args.report_dir) if args.report_dir else HERE / "reports"
    options: dict[str, dict[str, object]] = {}
    for agent, key, value in args.agent_option:
        options.setdefault(agent, {})[key] = value
    trial_points = tuple(sorted({p for p in LANDSCAPE_TRIAL_POINTS if p <= args.budget} | {args.budget}))
    common = dict(backend="landscape", landscape=args.landscape, seeds=args.seeds, jobs=args.jobs,
                  progress=not args.quiet, agent_options=options)
    errors = 0
    t0 = time.monotonic()
    board = compare(envs, args.agents, budget=args.budget, trial_points=trial_points,
                    time_points=LANDSCAPE_TIME_POINTS, out_dir=out / "leaderboard", **common)
    errors += _failures(board)
    long_agents = [a for a in ("ga", "dgd") if a in args.agents.split(",")]
    long_board = None
    if args.headline_trials > args.budget and long_agents:
        long_common = {**common, "seeds": args.headline_seeds or args.seeds}
        long_board = compare(envs, long_agents, budget=args.headline_trials,
                             trial_points=tuple(sorted({*trial_points, args.headline_trials})),
                             time_points=LANDSCAPE_TIME_POINTS, out_dir=out / "long", plot=False, **long_common)
        errors += _failures(long_board)

    seeds = _count(args.seeds)
    head = header(f"Landscape leaderboard on {cpu}: {len(board.agents)} agents x {len(envs)} layers x {seeds} seeds "
                  f"x {args.budget} trials", target)
    landscapes = "; ".join(f"{e}: {f.path}" for e, f in board.landscapes.items())
    leaderboard = "\n".join([*head, f"landscapes: {landscapes}", "", text_table(board), "", caption(board), "",
                             _timing_text(board, "wall time")])
    leaderboard_dir = reports / "landscapes"
    leaderboard_dir.mkdir(parents=True, exist_ok=True)
    (leaderboard_dir / "leaderboard.txt").write_text(leaderboard + "\n")
    (leaderboard_dir / "leaderboard.md").write_text("\n".join(f"<!-- {line} -->" for line in head) + "\n\n"
                                                     + markdown(board))
    for name, copy in (("compare.html", "leaderboard.html"), ("curves.json", "leaderboard_curves.json")):
        if (out / "leaderboard" / name).exists():  # the page, and every run's curve to re-score it without a re-run
            (leaderboard_dir / copy).write_text((out / "leaderboard" / name).read_text())

    results = _by_agent(board)
    if long_board is not None:
        for env_id, by_agent in _by_agent(long_board).items():
            for agent, runs in by_agent.items():
                results.setdefault(env_id, {})[f"{agent}@{args.headline_trials}"] = runs
    optima = {e: f.optimum_gflops for e, f in board.landscapes.items()}
    headline_ga = f"ga@{args.headline_trials}" if long_board is not None else "ga"
    headline_dgd = f"dgd@{args.headline_trials}" if long_board is not None else "dgd"
    budgets = tuple(b for b in args.budgets if b <= args.budget) or (args.budget,)
    report = analyse(results, budgets=budgets, time_points=LANDSCAPE_TIME_POINTS, dgd_seconds=args.dgd_seconds,
                     need=min(3, len(envs)), labels=board.labels, headline_dgd=headline_dgd,
                     headline_ga=headline_ga, headline_trials=args.headline_trials if long_board else None,
                     optima=optima, references={e: board.methodology_reference(e) for e in board.landscapes})
    learning_head = header(f"What learns, and by how much: the learning agents on {cpu}'s landscapes", target)
    text = "\n".join([*learning_head, f"landscapes: {landscapes}",
                      f"runs: {seeds} seeds x {args.budget} trials per agent and layer; GA and DGD also "
                      f"{args.headline_trials} trials for the headline ({_count(args.headline_seeds or args.seeds)} "
                      f"seeds); leaderboard: "
                      f"bench/reports/landscapes/leaderboard.txt",
                      _timing_text(board, "leaderboard wall time"),
                      *([_timing_text(long_board, "long runs' wall time")] if long_board else []),
                      render(report), *_other_reports(args.run_others, args.quiet),
                      *_minari_exports(envs, cpu, out / "minari", args.minari_episodes)])
    learning_dir = reports / "learning"
    learning_dir.mkdir(parents=True, exist_ok=True)
    emit(text + "\n", learning_dir / f"{cpu}.txt")
    (learning_dir / f"{cpu}.json").write_text(json.dumps(report, indent=1))
    paths = plot(results, out / "plots", board.labels)
    print(f"\nwrote {learning_dir / (cpu + '.txt')}, {leaderboard_dir / 'leaderboard.txt'} and {len(paths)} plot(s) "
          f"in {out / 'plots'} ({(time.monotonic() - t0) / 60:.1f} min)")
    return 1 if errors else 0


def _mean_at(agent_entry: dict, budget: int) -> float | None:
    figure = agent_entry.get(f"@{budget}") or {}
    return figure.get("mean")


def _order(agents: dict[str, dict], budget: int, names: list[str]) -> list[str]:
    means = {a: _mean_at(agents[a], budget) for a in names if a in agents}
    return sorted((a for a, m in means.items() if m is not None), key=lambda a: -means[a])


def _ranking_lines(live: dict, landscape_json: Path, budget: int, final_budget: int) -> list[str]:
    """Whether the landscape's ranking of the agents holds live, layer by layer, at ``budget`` trials (the mean best
    over seeds; the landscape's runs are the leaderboard's). Spaces differ: live runs search the full tiles
    space, the landscape its benchmark sub-space, so absolute GFLOP/s do not compare, orders do."""
    if not landscape_json.exists():
        return [f"no landscape report at {landscape_json}: run bench_learning.py on landscapes first"]
    land = json.loads(landscape_json.read_text())["envs"]
    rows, held = [], 0
    for env_id, entry in live["envs"].items():
        if env_id not in land:
            order = _order(entry["agents"], budget, list(entry["agents"]))
            rows.append([env_id, "-", " > ".join(order), "no landscape", ""])
            continue
        names = [a for a in entry["agents"] if a in land[env_id]["agents"]]
        live_order, land_order = _order(entry["agents"], budget, names), _order(land[env_id]["agents"], budget, names)
        same = live_order == land_order
        held += same
        final = " > ".join(_order(entry["agents"], final_budget, names))
        rows.append([env_id, " > ".join(land_order), " > ".join(live_order), "holds" if same else "differs", final])
    table = format_table(rows, ["layer", f"landscape @{budget} (means)", f"live @{budget} (means)", "order",
                                f"live @{final_budget}"])
    title = f"== the landscape's ranking, live: {held} of {len(rows)} layers in the same order at {budget} trials =="
    return ["", title, table,
            "live runs search the full tiles space, the landscapes their benchmark sub-spaces: the orders compare, the "
            "GFLOP/s do not; whether each agent is above random with separate intervals is in the targets above"]


def _vendor_lines(out: Path, budget: int) -> list[str]:
    """Each agent's mean best re-timed, over the fastest vendor reference re-timed in the same run (the tiles space
    against the strongest library on this CPU), read from each layer's compare run in ``out``."""
    rows, names = [], []
    for path in sorted(out.glob("*/compare.json")):
        board = json.loads(path.read_text())
        for env_id, refs in board.get("vendor", {}).items():
            ref = best_vendor(refs)
            if ref is None:
                continue
            best = ref.get("remeasured_gflops") or ref["gflops"]
            names.append(f"{env_id}: {ref['library']} {ref.get('layout', '')}".rstrip() + f", {best:.1f} re-timed")
            for row in board["rows"]:
                if row["env"] != env_id or row["agent"].startswith("vendor"):
                    continue
                retimed = (row["stats"].get("re-timed") or {}).get("mean")
                found = (row["stats"].get(f"@{budget}") or {}).get("mean")
                rows.append([env_id, row["agent"], f"{found:.1f}" if found else "-",
                             f"{retimed:.1f}" if retimed else "-", f"{retimed / best:.2f}x" if retimed else "-"])
    if not rows:
        return []
    return ["", f"== the tiles space against the vendor's best, same run ({budget} trials, means over seeds) ==",
            format_table(rows, ["layer", "agent", f"@{budget}", "re-timed", "/vendor's best"]),
            "the vendor's best (fastest reference re-timed in the same run, every layout and packing state):",
            *(f"  {line}" for line in names)]


def run_live(args: argparse.Namespace) -> int:
    if max(args.budgets) > args.budget:
        print(f"--budgets {args.budgets} go beyond --budget {args.budget}", file=sys.stderr)
        return 2
    out = Path(args.out or "bench-learning")
    options: dict[str, dict[str, object]] = {}
    for agent, key, value in args.agent_option:
        options.setdefault(agent, {})[key] = value
    errors = 0
    t0 = time.monotonic()
    if not args.report_only:
        for env_id in [e.strip() for e in (args.envs or ",".join(LIVE_ENVS)).split(",") if e.strip()]:
            board = compare([env_id], args.agents, budget=args.budget, seeds=args.seeds, db=args.db,
                            time_points=args.time_points, trial_points=sorted(set(args.budgets)),
                            out_dir=out / slug(env_id), agent_options=options, vendor=not args.no_vendor,
                            progress=not args.quiet, remeasure=args.remeasure)
            errors += _failures(board)
    results, labels = load(out)
    if not results:
        print(f"no results under {out}", file=sys.stderr)
        return 2
    report = analyse(results, budgets=args.budgets, time_points=args.time_points, dgd_seconds=args.dgd_seconds,
                     labels=labels)
    target = resolve_target(None)
    cpu = cpu_folder(target)
    seeds = sorted({r.seed for by_agent in results.values() for runs in by_agent.values() for r in runs})
    head = header(f"What learns, confirmed live on {cpu}: {', '.join(args.agents.split(','))} compiled and timed, "
                  f"{len(seeds)} seeds x {args.budget} trials", target)
    reports = Path(args.report_dir) if args.report_dir else None
    # The landscape report this run confirms: beside the live one when that folder has one, else the committed one.
    candidates = [d / "learning" / f"{cpu}.json" for d in (reports, HERE / "reports") if d is not None]
    landscape_json = next((p for p in candidates if p.exists()), candidates[-1])
    common_budget = max((b for b in args.budgets if b in (128, 512)), default=min(args.budgets))
    text = "\n".join([*head, f"runs: {out} (one compare run per layer, vendors timed and winners re-timed in the same "
                      f"run); database {args.db}", render(report),
                      *_ranking_lines(report, landscape_json, common_budget, max(args.budgets)),
                      *_vendor_lines(out, max(args.budgets))])
    print(text)
    (out / "learning.json").write_text(json.dumps(report, indent=1))
    (out / "learning.txt").write_text(text + "\n")
    written = [out / "learning.txt"]
    if reports is not None:
        learning_dir = reports / "learning"
        learning_dir.mkdir(parents=True, exist_ok=True)
        (learning_dir / f"{cpu}-live.txt").write_text(text + "\n")
        (learning_dir / f"{cpu}-live.json").write_text(json.dumps(report, indent=1))
        written.append(learning_dir / f"{cpu}-live.txt")
    paths = plot(results, out / "plots", labels)
    where = "" if args.report_only else f"; database {args.db}"
    print(f"\nwrote {', '.join(map(str, written))} and {len(paths)} plot(s) in {out / 'plots'}{where} "
          f"({(time.monotonic() - t0) / 60:.1f} min)")
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--live", action="store_true", help="compile and time on this machine instead of the "
                        "landscapes")
    parser.add_argument("--envs", default=None, help="comma-separated env ids (default: every layer with a landscape "
                        f"for this CPU; live: {','.join(LIVE_ENVS)})")
    parser.add_argument("--agents", default=",".join(DEFAULT_AGENTS), help="comma-separated agents")
    parser.add_argument("--budget", type=int, default=512, help="trials per run (default: 512)")
    parser.add_argument("--budgets", type=int_list, default=(128, 512),
                        help="trial budgets the learning report reads (default: 128,512)")
    parser.add_argument("--seeds", type=seed_list, default=None,
                        help="number of seeds or a list (default: 40 on landscapes, 5 live)")
    parser.add_argument("--dgd-seconds", type=float, default=120.0, help="DGD's clock in the headline (120)")
    parser.add_argument("--agent-option", type=agent_option, action="append", default=[],
                        help="agent:key=value, e.g. ga:features=af (repeatable)")
    parser.add_argument("--out", default=None, help="where runs go (default: work/learning-<cpu> on landscapes, "
                        "bench-learning live)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--report-dir", default=None, help="where the reports go (default: bench/reports on "
                        "landscapes; live: only --out unless given, then <dir>/learning/<cpu>-live.txt)")
    land = parser.add_argument_group("on landscapes")
    land.add_argument("--landscape", default=None, help="another CPU's landscapes, named (default: this CPU's)")
    land.add_argument("--headline-trials", type=int, default=1000,
                      help="the GA's (and DGD's) trials in seed 000's headline (default: 1000)")
    land.add_argument("--headline-seeds", type=seed_list, default=None,
                      help="seeds of the headline's longer runs (default: --seeds)")
    land.add_argument("--jobs", type=int, default=None, help="runs at a time (default: one per core)")
    land.add_argument("--run-others", action="store_true",
                      help="run the cost-model and held-out benchmarks first (else their last reports are read)")
    land.add_argument("--minari-episodes", type=int, default=100,
                      help="episodes per layer in the Minari datasets of the report (default: 100)")
    live = parser.add_argument_group("live")
    live.add_argument("--time-points", type=float_list, default=LIVE_TIME_POINTS, help="seconds of tuning clock")
    live.add_argument("--db", default="bench-learning.db", help="database shared by all runs")
    live.add_argument("--remeasure", type=int, default=3, help="rounds of re-timing every winner (default: 3)")
    live.add_argument("--no-vendor", action="store_true", help="skip the vendor libraries")
    live.add_argument("--report-only", action="store_true", help="report on what --out holds; run nothing")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.seeds is None:
        args.seeds = 5 if args.live else 40
    return run_live(args) if args.live else run_landscapes(args)


if __name__ == "__main__":
    sys.exit(main())
