"""Does paired timing hold near the peak? Rounds of near-peak kernels, and a kernel against its vendor, re-run.

Paired timing (:mod:`tensorgym.measure.paired`) times every kernel in alternation with a fixed reference
and keeps their ratio. This benchmark measures what it buys on this machine, against plain timing:

* ``rounds``: the ``--configs`` (64) best configs of the layer's shipped microkernel landscape (kernels within
  a few % of each other, the ones a landscape must rank; ``--pick random``: drawn from all of it), measured in
  ``--rounds`` (2) rounds, each in its own shuffled order, plainly and paired (the reference: the landscape's
  best config), into databases under ``--dir`` (resumable; ``--target-spread`` times each kernel longer). The
  report gives the Spearman correlation between rounds for each mode, each config's move between rounds
  beside how far the configs differ, the reference's drift and the hypervisor's steal.
* ``vendor``: the layer's best tiles kernel (the shipped landscape's optimum) against the vendor (oneDNN's
  pre-packed convolution), in one process (:func:`tensorgym.baselines.vendor.time_against_vendor`): the ratio
  from two separate timings and the paired ratio. Each run is appended to ``--dir``/vendor.jsonl; run it
  again an hour later, and the report shows how far each ratio moved between runs.
* ``bias``: whether pairing itself moves the ratio (:func:`tensorgym.baselines.vendor.pairing_bias`): the same
  kernel and vendor timed in blocks, paired, paired with each vendor sample warmed by an untimed call (as TVM
  warms each kernel sample), and each paired with a copy of itself, in ``--rounds`` rounds; appended to
  ``--dir``/bias.jsonl.
* ``report``: each of them that ``--dir`` holds (nothing is measured)::

    python bench/bench_paired.py rounds
    python bench/bench_paired.py vendor        # now, and again an hour later
    python bench/bench_paired.py bias --env-id Conv2d-YOLO-Y9-v0 --rounds 5
    python bench/bench_paired.py report --out bench/reports/paired.txt

Each measuring command times kernels: run it alone on the machine (it takes the CPU lock when called
through ``flock /tmp/tensorgym-cpu.lock``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from tensorgym.baselines.vendor import PAIRING_VARIANTS, pairing_bias, time_against_vendor
from tensorgym.database import Database
from tensorgym.landscape import Landscape, find_landscape
from tensorgym.landscape.measuring import BATCH
from tensorgym.measure import Measurer, TimingProtocol
from tensorgym.measure.tasks import build
from tensorgym.target import local_cpu
from tensorgym.text import format_table

from report_header import emit, header

MODES = ("plain", "paired")


def picked(env_id: str, configs: int, pick: str):
    """The landscape, its space on this machine, and ``configs`` of its configs: the best (``top``), or drawn
    uniformly (``random``, seed 0)."""
    landscape = Landscape.load(find_landscape(env_id, "microkernel"))
    if pick == "top":
        chosen = [r.config for r in landscape.top_fraction(configs / len(landscape))[:configs]]
    else:
        rows = np.random.default_rng(0).choice(len(landscape), size=configs, replace=False)
        chosen = [landscape.configs[i] for i in rows]
    return landscape, landscape.space(local_cpu()), chosen


def experiment(pick: str, target_spread: float | None) -> str:
    """The name a set of rounds is stored under: which configs, and the protocol's target spread if not the
    default."""
    return pick + (f"-spread{target_spread:g}" if target_spread is not None else "")


def cmd_rounds(args: argparse.Namespace) -> int:
    landscape, space, configs = picked(args.env_id, args.configs, args.pick)
    reference = landscape.optimum.config
    protocol = TimingProtocol() if args.target_spread is None else TimingProtocol(
        target_spread=args.target_spread, max_timing_ms=3 * TimingProtocol().max_timing_ms)
    name = experiment(args.pick, args.target_spread)
    modes = args.modes.split(",")
    with ExitStack() as stack:  # one measurer per mode for all rounds: each config is built once per mode
        measurers = {mode: stack.enter_context(Measurer(space.target, paired=reference if mode == "paired" else None,
                                                        protocol=protocol, keep_builds=True)) for mode in modes}
        for round_no in range(1, args.rounds + 1):
            order = [configs[i] for i in np.random.default_rng(round_no).permutation(len(configs))]
            for mode in modes:
                with Database(Path(args.dir) / f"{name}-{mode}-round{round_no}.db") as db:
                    held = {r.config for r in db.records(space=space.name) if r.final}
                    todo = [c for c in order if c not in held]
                    if not todo:
                        continue
                    db.register(space.workload, space.target)
                    t0 = time.monotonic()
                    for start in range(0, len(todo), BATCH):  # batches: a round cut short keeps what it timed
                        measurers[mode].measure(space, todo[start:start + BATCH], on_record=db.commit)
                    print(f"{name} round {round_no} {mode}: {len(todo)} configs in {time.monotonic() - t0:.0f} s",
                          file=sys.stderr)
    return 0


def _against_vendor(args: argparse.Namespace, log_name: str, timing) -> dict:
    """The layer's best tiles kernel (its shipped landscape's optimum), built and timed by
    ``timing(builder, config, path)`` against the vendor; the result is appended to ``--dir``/``log_name``."""
    landscape = Landscape.load(find_landscape(args.env_id, "tiles"))
    space = landscape.space(local_cpu())
    config = landscape.optimum.config
    with tempfile.TemporaryDirectory(prefix="tensorgym-paired-") as work:
        built = build(space.builder(), config, work)
        result = timing(space.builder(), config, built["path"])
    result.update(time=time.time(), env_id=args.env_id, config=config.key)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    with open(Path(args.dir) / log_name, "a") as log:
        log.write(json.dumps(result) + "\n")
    return result


def cmd_vendor(args: argparse.Namespace) -> int:
    result = _against_vendor(args, "vendor.jsonl", lambda builder, config, path: time_against_vendor(
        builder, config, path, "onednn", pairs=args.pairs, native_blas=True))
    print(f"{args.env_id}: kernel/vendor {result['separate_ratio']:.3f} separately, {result['paired_ratio']:.3f} "
          f"paired (spread {result['paired_spread']:.3f}); vendor {result['vendor']}")
    return 0


def cmd_bias(args: argparse.Namespace) -> int:
    result = _against_vendor(args, "bias.jsonl", lambda builder, config, path: pairing_bias(
        builder, config, path, rounds=args.rounds, pairs=args.pairs))
    print("\n".join(bias_report([result])))
    return 0


def bias_report(runs: list[dict]) -> list[str]:
    """Per run (a layer): each way of timing its kernel against the vendor, median and range over rounds."""
    rows = []
    for run in runs:
        for variant in PAIRING_VARIANTS:
            values = run["ratios"][variant]
            rows.append([run["env_id"], time.strftime("%H:%M", time.gmtime(run["time"])), variant,
                         f"{np.median(values):.3f}", f"{min(values):.3f}-{max(values):.3f}", str(len(values))])
    vendors = sorted({run["vendor"] for run in runs})
    return [format_table(rows, ["layer", "UTC", "timing", "ratio (median)", "range over rounds", "rounds"]),
            f"latency ratios, kernel over vendor (below 1, the kernel is faster), a copy's over its original for "
            f"the A/A rows; {runs[0]['pairs']} samples per ratio; vendor: {', '.join(vendors)}. paired: the "
            f"vendor's samples cold, as time_against_vendor took them before this experiment; paired, vendor "
            f"warmed: each after one untimed call, as TVM's time_evaluator warms the kernel's, and as "
            f"time_against_vendor takes them now"]


def _round_scores(path: Path, mode: str) -> dict:
    """config -> (score, device_state) of a round's correct records: GFLOP/s plainly, 1/ratio paired."""
    with Database(path, readonly=True) as db:
        out = {}
        for r in db.records():
            if r.ok:
                state = dict(r.device_state)
                out[r.config] = (1.0 / state["paired_ratio"] if mode == "paired" else r.score, state, r)
        return out


def rounds_report(directory: Path, name: str, rounds: int) -> list[str]:
    from scipy.stats import spearmanr

    lines = []
    rows, moves, states, spreads = [], [], [], []
    for mode in MODES:
        paths = [directory / f"{name}-{mode}-round{r}.db" for r in range(1, rounds + 1)]
        if not all(p.exists() for p in paths):
            lines.append(f"{mode}: rounds missing under {directory}")
            continue
        per_round = [_round_scores(p, mode) for p in paths]
        configs = [c for c in per_round[0] if all(c in r for r in per_round)]
        if len(configs) < 3:
            lines.append(f"{mode}: only {len(configs)} configs measured correctly in every round so far")
            continue
        scores = np.array([[r[c][0] for c in configs] for r in per_round])
        for i, j in itertools.combinations(range(rounds), 2):
            rho = float(spearmanr(scores[i], scores[j]).statistic)
            rows.append([mode, f"round {i + 1} vs {j + 1}", str(len(configs)), f"{rho:.3f}"])
        median = np.median(scores, axis=0)
        move = (scores.max(axis=0) - scores.min(axis=0)) / median
        p10, p90 = np.percentile(median, (10, 90))
        spreads.append(f"{mode}: the configs' speeds (median over rounds) span {(p90 - p10) / np.median(median):.1%} "
                       f"from p10 to p90")
        moves.append([mode, *(f"{v:.3f}" for v in np.percentile(move, (10, 50, 90, 100)))])
        seconds = [sum(rec.run_s for _, _, rec in r.values()) for r in per_round]
        for k, r in enumerate(per_round, start=1):
            drift = [s.get("reference_drift") for _, s, _ in r.values() if "reference_drift" in s]
            steal = [s.get("steal") for _, s, _ in r.values() if "steal" in s]
            busy = [rec.contention for _, _, rec in r.values() if rec.contention is not None]
            states.append([mode, f"round {k}", f"{seconds[k - 1]:.0f}",
                           _pct(drift), _pct(steal), _pct(busy)])
    lines += ["between rounds (Spearman of the configs' speed: GFLOP/s plainly, 1 / ratio to the reference paired):",
              format_table(rows, ["mode", "pair", "configs", "Spearman"]), "",
              "each config's move between rounds, (max - min) / median, against how far the configs differ:",
              format_table(moves, ["mode", "p10", "p50", "p90", "max"]), *spreads, "",
              "per round: run seconds; reference drift (median sample / start - 1), steal and contention shares, "
              "as p50 [max] over records:",
              format_table(states, ["mode", "round", "run s", "reference drift", "steal", "contention"])]
    return lines


def _pct(values: list) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{np.median(values):+.3f} [{max(values, key=abs):+.3f}]"


def vendor_report(directory: Path) -> list[str]:
    path = directory / "vendor.jsonl"
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    start = runs[0]["time"]
    rows = [[time.strftime("%H:%M", time.gmtime(r["time"])), f"{(r['time'] - start) / 60:.0f}",
             f"{r['separate_ratio']:.3f}", f"{r['paired_ratio']:.3f}", f"{r['paired_spread']:.3f}",
             f"{r['vendor_drift']:+.3f}" if r.get("vendor_drift") is not None else "-",
             f"{r['steal']:.3f}" if r.get("steal") is not None else "-"] for r in runs]
    lines = [f"kernel {runs[0]['config']} of {runs[0]['env_id']} against {runs[0]['vendor']}, in one process "
             f"(latency ratios: below 1, the kernel is faster):",
             format_table(rows, ["UTC", "min", "separate", "paired", "paired spread", "vendor drift", "steal"])]
    apart = [(a, b) for a, b in itertools.combinations(runs, 2) if b["time"] - a["time"] >= 45 * 60]
    for key in ("separate_ratio", "paired_ratio"):
        values = [r[key] for r in runs]
        moved = max((abs(b[key] / a[key] - 1) for a, b in apart), default=None)
        lines.append(f"{key.replace('_', ' ')}: range {min(values):.3f}-{max(values):.3f} over {len(runs)} runs; "
                     + (f"largest move between runs at least 45 min apart {moved:.1%}" if moved is not None
                        else "no two runs 45 min apart yet"))
    return lines


def cmd_report(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    lines = header("Paired timing against plain timing: near-peak rounds and a kernel against its vendor",
                   local_cpu())
    for name in sorted({p.name.split("-plain-round1.db")[0].split("-paired-round1.db")[0]
                        for p in directory.glob("*-round1.db")}):
        pick, _, spread = name.partition("-spread")
        which = "best" if pick == "top" else "randomly drawn"
        lines += ["", f"== rounds: {args.configs} {which} configs of the {args.env_id} microkernel landscape, "
                      f"target spread {spread or TimingProtocol().target_spread} ==",
                  *rounds_report(directory, name, args.rounds)]
    if (directory / "vendor.jsonl").exists():
        lines += ["", "== kernel against vendor ==", *vendor_report(directory)]
    bias = directory / "bias.jsonl"
    if bias.exists():
        lines += ["", "== does pairing itself move the ratio? ==",
                  *bias_report([json.loads(line) for line in bias.read_text().splitlines() if line.strip()])]
    emit("\n".join(lines) + "\n", args.out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("rounds", "vendor", "bias", "report"))
    parser.add_argument("--env-id", default="Conv2d-ResNet-R5-v0")
    parser.add_argument("--configs", type=int, default=64, help="near-peak configs per round (default 64)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pick", default="top", choices=("top", "random"),
                        help="rounds: the landscape's best configs (default) or configs drawn uniformly from it")
    parser.add_argument("--modes", default=",".join(MODES), help="rounds: plain, paired or both (default both)")
    parser.add_argument("--target-spread", type=float, default=None,
                        help="rounds: the protocol's target spread (default the protocol's 0.02; smaller times longer)")
    parser.add_argument("--pairs", type=int, default=30, help="paired samples against the vendor (default 30)")
    parser.add_argument("--dir", default="work/paired", help="where the measurements go (default work/paired)")
    parser.add_argument("--out", default=None, help="report: also write it here")
    args = parser.parse_args(argv)
    if not set(args.modes.split(",")) <= set(MODES):
        print(f"error: --modes takes {' and '.join(MODES)}, got {args.modes!r}", file=sys.stderr)
        return 2
    if args.configs < 3 or args.rounds < 2 or args.pairs < 3:
        print("error: --configs and --pairs must be at least 3, --rounds at least 2", file=sys.stderr)
        return 2
    return {"rounds": cmd_rounds, "vendor": cmd_vendor, "bias": cmd_bias, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
