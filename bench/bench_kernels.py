"""Kernels at the machine's limit against the vendor's best, and what a trial costs.

Part 1, kernels. For each layer (default: ResNet-50 R1, R5, R8, R11; YOLO-9000
Y9, Y10; BERT M1, M3) every *combination* (agent x space x layout x packing,
``--combos``) tunes with ``max(--budgets)`` measurements into one database.
Then the best config after each budget and every vendor reference
(:func:`tensorgym.baselines.vendor_choices`: oneDNN NCHW / NHWC / NHWC with
pre-packed weights, MKL, OpenBLAS, oneDNN matmul, ...) are timed again in
``--retime`` interleaved rounds: a best-of-N of noisy timings is biased upward,
and the machine's speed drifts over minutes. The table per layer gives, re-timed,
each kernel's GFLOP/s, its share of the measured fp32 FMA peak, and its ratio to
the fastest vendor reference *of its kind* (weights packed per call, or once
before timing) and to the fastest of all; vendors are named with the kernel
family they ran. Vendor processes clear ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE``
(``native_blas``). A ratio is never printed from a re-timing whose every round
was taken while other processes took the cores (``busy``); those rows say so.

Beside the best kernel's ratio to the vendor's best, the **paired /vendor**
figure: that kernel (the best at ``max(--budgets)``) and the fastest re-timed
vendor reference PyTorch can call beside it (not OpenBLAS) timed in one process,
each of ``--pairs`` kernel samples between two of the vendor's
(:func:`tensorgym.baselines.compare.time_paired_vendor`). Two separate re-timings
carry whatever the machine did between them; two timings milliseconds apart
share the VM's state. It is in the JSON as each layer's ``paired_vendor``
(absent in reports of earlier versions, which ``--merge`` still reads).

Part 2, trial cost. The mean and median wall seconds per freshly measured
trial (``Record.wall_s``: the trial's share of its batch's build phase plus its
check and timing) of the ``random`` agent on R5 and M3, ``--trial-budget``
trials, seed 0, as this version measures them (``after``). The ``before``
figures come from:

* ``--before-checkout DIR``: the source tree of the earlier version (e.g.
  ``git archive 2bef83c | tar -x -C DIR``), run by this Python with that tree
  first on the path, the same agent, budget and seed, into its own database;
* or ``--before-db PATH``: a database any version made that way (read from a copy);
* or ``--emulate-before``: this version with short timing and busy re-timing
  switched off (the timing protocol of 2bef83c), labelled as such.

Peak: the fp32 FMA peak kernel of the calibration, measured here (best of 3),
keyed by the target fingerprint printed with every table. GFLOP/s count every
tap of a padded convolution, as everywhere; its share of the peak counts only the
taps that read the input (``Workload.unpadded_flops``), since oneDNN and the
microkernels skip the zero border's: counted whole, a 7x7 layer ran at 117 % of
the peak (``bench/bench_peak.py`` shows the peak kernel itself saturates).

Run on a quiet machine; the full benchmark takes about 1-2 hours on 2 cores (plus ~4 minutes of
microkernel calibration if no full catalogue is stored)::

    python bench/bench_kernels.py --json bench/reports/bench_kernels.json

In chunks (a session of a few hours, a machine shared with other work): one layer per run, into one
``--db`` (a run again resumes its tuning from it: measured configs are not measured again), each with
its own ``--json`` (written as each layer completes), then one report of them all::

    python bench/bench_kernels.py --layers Conv2d-ResNet-R1-v0 --db kernels.db --json R1.json --trial-budget 0
    ...
    python bench/bench_kernels.py --merge R1.json R5.json ... --json bench/reports/bench_kernels.json

The default combinations: DGD in the tiles space on the NCHW layer as is
(``tiles-dgd``) and with in-kernel NCHWc packing (``tiles-dgd-packed``),
random-structured in the microkernel space packing in the kernel
(``microkernel-in-kernel``) and on the NHWC layer with its weights packed once
(``microkernel-nhwc-weights``, compare with oneDNN's pre-packed NHWC).

With the trial cost of 2bef83c (the version before this benchmark existed)::

    git archive 2bef83c | tar -x -C /tmp/tg-2bef83c   # in the repository, after mkdir /tmp/tg-2bef83c
    python bench/bench_kernels.py --before-checkout /tmp/tg-2bef83c --json bench/reports/bench_kernels.json

Smoke run (about 3 minutes)::

    python bench/bench_kernels.py --layers Conv2d-ResNet-R5-v0 --budgets 2 --combos tiles-random \
        --retime 1 --trial-budget 2 --emulate-before --vendors 1
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_LAYERS = ("Conv2d-ResNet-R1-v0,Conv2d-ResNet-R5-v0,Conv2d-ResNet-R8-v0,Conv2d-ResNet-R11-v0,"
                  "Conv2d-YOLO-Y9-v0,Conv2d-YOLO-Y10-v0,Matmul-BERT-M1-v0,Matmul-BERT-M3-v0")
# name -> (agent, space, conv layout, packing); matmuls ignore the layout, and the tiles space's packing
COMBOS = {
    "tiles-dgd": ("dgd", "tiles", "NCHW", None),
    "tiles-dgd-packed": ("dgd", "tiles", "NCHW", "in-kernel"),
    "tiles-dgd-packed-weights": ("dgd", "tiles", "NCHW", "weights"),
    "tiles-dgd-nhwc": ("dgd", "tiles", "NHWC", None),
    "tiles-random": ("random", "tiles", "NCHW", None),
    "microkernel-in-kernel": ("random-structured", "microkernel", "NCHW", "in-kernel"),
    "microkernel-nhwc-weights": ("random-structured", "microkernel", "NHWC", "weights"),
    "microkernel-nchwc-weights": ("random-structured", "microkernel", "NCHWc", "weights"),
    "metaschedule": ("metaschedule", "tiles", "NCHW", None),
    "mapping-random": ("random", "mapping", "NCHW", None),
}
DEFAULT_COMBOS = "tiles-dgd,tiles-dgd-packed,microkernel-in-kernel,microkernel-nhwc-weights"
TRIAL_COST_LAYERS = ("Conv2d-ResNet-R5-v0", "Matmul-BERT-M3-v0")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(sorted({int(x) for x in text.split(",") if x.strip()}))


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(value: float | None, ref: dict | None, busy: bool) -> str:
    if value is None or ref is None or not ref.get("retimed"):
        return "-"
    if busy or ref.get("busy"):
        return "busy"
    return f"{value / ref['retimed']:.2f}x"


def measure_peak(measurer, target, rounds: int = 3) -> float:
    """The fp32 FMA peak of this machine (best of ``rounds``: noise only slows a kernel down)."""
    from tensorgym.calibration import _peak

    return max(_peak(measurer, target) for _ in range(rounds))


def trial_costs(db_path: str, layers=TRIAL_COST_LAYERS, space: str = "tiles") -> dict[str, dict]:
    """Mean and median ``wall_s`` of the records of ``layers`` in a database (a copy is read)."""
    from tensorgym.database import Database
    from tensorgym.suites import all_suite_workloads

    workloads = all_suite_workloads()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy.db"
        shutil.copy(db_path, copy)
        for suffix in ("-wal", "-shm"):
            if Path(db_path + suffix).exists():
                shutil.copy(db_path + suffix, str(copy) + suffix)
        with Database(copy) as db:
            for layer in layers:
                records = db.records(workloads[layer].key, space=space)
                walls = [r.wall_s for r in records]
                out[layer] = {"trials": len(walls), "mean_s": statistics.fmean(walls) if walls else None,
                              "median_s": statistics.median(walls) if walls else None,
                              "short": sum(r.short for r in records),
                              "busy": (sum(r.busy for r in records)
                                       if any(r.contention is not None for r in records) else "unknown")}
    return out


def run_trial_cost(budget: int, db_path: str, measurer_protocol=None) -> None:
    """The random agent (seed 0) on the trial-cost layers into ``db_path``."""
    from tensorgym.agents import make_agent
    from tensorgym.database import Database
    from tensorgym.envs import make_env
    from tensorgym.measure import Measurer
    from tensorgym.suites import all_suite_workloads

    workloads = all_suite_workloads()
    with Database(db_path) as db, Measurer(protocol=measurer_protocol) as measurer:
        for layer in TRIAL_COST_LAYERS:
            env = make_env(workloads[layer], space="tiles", db=db, measurer=measurer)
            make_agent("random").tune(env, budget=budget, seed=0)
            env.close()


def run_trial_cost_of(checkout: str, budget: int, db_path: str, tree: Path) -> None:
    """The trial-cost runs made by another version's source tree, in subprocesses of this Python.

    The tree's ``envs``, ``agents`` and ``baselines`` are laid out as subpackages
    of its ``tensorgym`` (what the package's ``package-dir`` mapping does when
    installed) and put first on the path, so neither the process nor its worker
    processes import a module of this version.
    """
    import os
    import subprocess

    source = Path(checkout)
    if not (source / "tensorgym" / "cli").is_dir():
        raise SystemExit(f"error: {checkout} holds no tensorgym source tree")
    shutil.copytree(source / "tensorgym", tree / "tensorgym")
    for sub in ("envs", "agents", "baselines"):
        if (source / sub).is_dir():
            shutil.copytree(source / sub, tree / "tensorgym" / sub)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cli = "import sys; from tensorgym.cli import main; sys.exit(main(sys.argv[1:]))"
    for layer in TRIAL_COST_LAYERS:
        subprocess.run([sys.executable, "-c", cli, "tune", layer, "--agent", "random", "--budget", str(budget),
                        "--seed", "0", "--no-vendor", "-q", "--db", db_path], env=env, check=True, cwd=str(tree),
                       stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default=DEFAULT_LAYERS, help="comma-separated env ids")
    parser.add_argument("--combos", default=DEFAULT_COMBOS, help=f"comma-separated, of {', '.join(COMBOS)}")
    parser.add_argument("--budgets", type=_ints, default=(64, 256), help="measurement counts to report (64,256)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--retime", type=int, default=3, help="interleaved re-timing rounds (default 3)")
    parser.add_argument("--vendors", type=int, default=None, help="time only the first N vendor references")
    parser.add_argument("--pairs", type=int, default=30,
                        help="paired samples of the best kernel against the vendor in one process (0: none)")
    parser.add_argument("--db", default=None, help="database (default: a fresh temporary one)")
    parser.add_argument("--json", default=None, help="write every figure to this JSON file")
    parser.add_argument("--no-calibrate", action="store_true", help="do not calibrate the microkernels first")
    parser.add_argument("--trial-budget", type=int, default=64, help="random-agent trials for the trial cost (0: skip)")
    parser.add_argument("--before-db", default=None, help="database made by the earlier version (trial cost)")
    parser.add_argument("--before-checkout", default=None,
                        help="source tree of the earlier version: run its trial cost here (see the docs)")
    parser.add_argument("--emulate-before", action="store_true",
                        help="also measure the trial cost with adaptive timing and busy re-timing switched off")
    parser.add_argument("--progress", action="store_true", help="progress bars")
    parser.add_argument("--merge", nargs="+", metavar="JSON", default=None,
                        help="measure nothing: print one report of these runs' --json files (a run in chunks) "
                             "and write it to --json")
    args = parser.parse_args(argv)
    if args.pairs < 0:
        print("error: --pairs must be 0 (none) or more", file=sys.stderr)
        return 2
    if args.merge:
        return merge_reports(args.merge, args.json)

    from tensorgym.agents import make_agent
    from tensorgym.baselines.compare import median_or_none, retime_interleaved, space_of
    from tensorgym.baselines.vendor import PRE_PACKED, VendorUnavailable, time_vendor, vendor_choices
    from tensorgym.database import Database
    from tensorgym.envs import make_env
    from tensorgym.measure import Measurer, TimingProtocol
    from tensorgym.suites import all_suite_workloads
    from tensorgym.envs.registration import with_layout
    from tensorgym.target import local_cpu
    from tensorgym.text import format_table
    from tensorgym.tuner import ProgressBarCallback
    from tensorgym.workloads import Conv2d

    workloads = all_suite_workloads()
    layers = [x.strip() for x in args.layers.split(",") if x.strip()]
    combos = [x.strip() for x in args.combos.split(",") if x.strip()]
    bad = [x for x in layers if x not in workloads] + [c for c in combos if c not in COMBOS]
    if bad:
        print(f"error: unknown layers or combos {bad}", file=sys.stderr)
        return 2
    target = local_cpu()
    tmp = tempfile.mkdtemp(prefix="bench-kernels-")
    db_path = args.db or str(Path(tmp) / "records.db")
    report: dict = {"target": target.to_json(), "layers": {}, "settings": vars(args)}
    t_start = time.monotonic()
    if any(COMBOS[c][1] == "microkernel" for c in combos) and not args.no_calibrate:
        from tensorgym.calibration import calibrate

        calibrate(progress=args.progress)
    with Database(db_path) as db, Measurer() as measurer:
        peak = measure_peak(measurer, target)
        report["peak_gflops"] = peak
        print(f"{target.label} (fingerprint {target.fingerprint}): measured fp32 FMA peak {peak:.1f} GFLOP/s; "
              f"budgets {args.budgets}, seed {args.seed}; db {db_path}", flush=True)
        ratios_best = []
        for layer in layers:
            base = workloads[layer]
            print(f"\n== {layer}: {base.describe()}, {base.gflop:.3f} GFLOP", flush=True)
            runs = []  # (combo, budget, space, result, weights kind)
            done = set()
            for combo in combos:
                agent, space_name, layout, packing = COMBOS[combo]
                if not isinstance(base, Conv2d):  # a matmul has no layout, and the tiles space does not pack it
                    layout, packing = "NCHW", None if space_name == "tiles" else packing
                if (agent, space_name, layout, packing) in done:
                    continue
                done.add((agent, space_name, layout, packing))
                wl = with_layout(base, layout, target) if isinstance(base, Conv2d) else base
                options = {"packing": packing} if packing else {}
                env = make_env(wl, space=space_name, db=db, measurer=measurer, **options)
                try:
                    result = make_agent(agent).tune(env, budget=max(args.budgets), seed=args.seed,
                                                    callback=ProgressBarCallback() if args.progress else None)
                except Exception as exc:  # noqa: BLE001 - one failing combination must not end the benchmark
                    print(f"   {combo} failed: {type(exc).__name__}: {str(exc)[:300]}")
                    env.close()
                    continue
                space = space_of(env, result.space)
                weights = PRE_PACKED if packing in ("weights", "all") else "per call"
                for budget in args.budgets:
                    best = _best_at(result, budget)
                    if best is not None:
                        runs.append((combo, budget, space, best, weights, result))
                env.close()

            refs = []
            for backend, layout in vendor_choices(base)[: args.vendors]:
                try:
                    refs.append(time_vendor(base, backend, layout, native_blas=True))
                except (VendorUnavailable, RuntimeError) as exc:
                    print(f"   vendor {backend} {layout}: {exc}")
            retimed_all = retime_interleaved(
                measurer, [(space, config) for _, _, space, (config, _), _, _ in runs],
                [(base, ref.backend, ref.choice) for ref in refs], args.retime, progress=args.progress,
                native_blas=True)
            # A ratio is withheld only when every re-timing round of a kernel or vendor was busy: the
            # ratios are of re-timed values, whatever the machine did while the agents tuned.
            vendors = []
            for ref, values, busy in zip(refs, retimed_all.vendors, retimed_all.vendors_busy):
                vendors.append({**ref.to_json(), "retimed": median_or_none(values), "retimed_samples": values,
                                "busy": busy, "first_busy": ref.busy})
            layer_out = {"kernels": [], "vendors": vendors, "workload": base.to_json(), "peak_gflops": peak}
            for (combo, budget, space, (config, first), weights, result), values, busy in zip(
                    runs, retimed_all.kernels, retimed_all.kernels_busy):
                layer_out["kernels"].append({"combo": combo, "budget": budget, "weights": weights,
                                             "config": config.to_json(), "describe": space.describe(config),
                                             "first_gflops": first, "retimed": median_or_none(values),
                                             "retimed_samples": values,
                                             "busy_trials": result.extra.get("busy_trials", 0),
                                             "retimed_busy": busy})
            if args.pairs > 0:
                layer_out["paired_vendor"] = pair_best(layer_out, runs, base, max(args.budgets), args.pairs)
            text, ratio = layer_table(layer_out, max(args.budgets))
            print(text, flush=True)
            if ratio is not None:
                ratios_best.append(ratio)
            report["layers"][layer] = layer_out
            if args.json:  # each layer as it completes: a chunked run merges them (--merge)
                Path(args.json).write_text(json.dumps(report, indent=1, default=str))

        if ratios_best:
            report["geomean_vs_vendor_best"] = print_geomean(ratios_best)
        report["paired_geomean"] = print_paired_geomean(report["layers"])

    if args.trial_budget:
        print(f"\n== trial cost: random agent, seed 0, {args.trial_budget} trials, tiles space", flush=True)
        after_db = str(Path(tmp) / "after.db")
        run_trial_cost(args.trial_budget, after_db)
        sources = {"after (this version)": trial_costs(after_db)}
        if args.emulate_before:
            before_db = str(Path(tmp) / "emulated-before.db")
            run_trial_cost(args.trial_budget, before_db, TimingProtocol(short_factor=0, busy_retime_ms=0))
            sources["before (emulated: no short timing, no busy re-timing)"] = trial_costs(before_db)
        if args.before_checkout:
            before_db = str(Path(tmp) / "before.db")
            run_trial_cost_of(args.before_checkout, args.trial_budget, before_db, Path(tmp) / "before-tree")
            sources[f"before ({args.before_checkout})"] = trial_costs(before_db)
        if args.before_db:
            sources[f"before ({args.before_db})"] = trial_costs(args.before_db)
        rows = []
        for source, costs in sources.items():
            for layer, c in costs.items():
                rows.append([source, layer, str(c["trials"]), _fmt(c["mean_s"], 3), _fmt(c["median_s"], 3),
                             str(c["short"]), str(c["busy"])])
        print(format_table(rows, ["version", "layer", "trials", "mean s/trial", "median s/trial", "short", "busy"]))
        print("target: <= 0.25 s mean per fresh trial on R5 and M3")
        report["trial_cost"] = sources
    print(f"\ntotal {time.monotonic() - t_start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def layer_table(layer_out: dict, top_budget: int) -> tuple[str, float | None]:
    """The table of one layer's re-timed kernels and vendors, and its best kernel at ``top_budget`` over the
    vendor's best (None when either was re-timed only on a busy machine)."""
    from tensorgym.baselines.board import paired_text
    from tensorgym.baselines.vendor import PRE_PACKED
    from tensorgym.text import format_table
    from tensorgym.workloads import Workload

    peak, vendors = layer_out["peak_gflops"], layer_out["vendors"]
    workload = Workload.from_json(layer_out["workload"])
    needed = workload.unpadded_flops / workload.flops  # a share of the peak counts only the multiply-adds computed

    def of_peak(gflops: float) -> str:
        return f"{100 * gflops * needed / peak:.0f} %"

    best_overall = max((v for v in vendors if v["retimed"]), key=lambda v: v["retimed"], default=None)
    best_kind = {kind: max((v for v in vendors if v["retimed"] and v["weights"] == kind),
                           key=lambda v: v["retimed"], default=None) for kind in ("per call", PRE_PACKED)}
    rows, top = [], None
    for k in layer_out["kernels"]:
        retimed, busy = k["retimed"], k["retimed_busy"]
        rows.append([f"{k['combo']} @{k['budget']}", k["weights"], _fmt(k["first_gflops"]), _fmt(retimed),
                     "-" if not retimed else of_peak(retimed),
                     _ratio(retimed, best_kind[k["weights"]], busy), _ratio(retimed, best_overall, busy)])
        if k["budget"] == top_budget and retimed and (top is None or retimed > top[0]):
            top = (retimed, busy, k["combo"])
    for v in vendors:
        rows.append([f"vendor {v['library']} {v['layout']}", v["weights"], _fmt(v["gflops"]),
                     _fmt(v["retimed"]), "-" if not v["retimed"] else of_peak(v["retimed"]),
                     "busy" if v["busy"] else "", ""])
    lines = [format_table(rows, ["kernel", "weights", "first GFLOP/s", "re-timed", "% peak",
                                 "vs vendor (same kind)", "vs vendor's best"])]
    if needed < 1:
        lines.append(f"   % peak: of the multiply-adds that read the input ({needed:.3f} of the layer's FLOPs; the "
                     f"zero border's taps are skipped by oneDNN and the microkernels alike)")
    ratio = None
    if top and best_overall and best_overall["retimed"]:
        if top[1] or best_overall["busy"]:
            lines.append("   best vs vendor's best: not given (timed on a busy machine)")
        else:
            ratio = top[0] / best_overall["retimed"]
            lines.append(f"   best tensorgym kernel @{top_budget} ({top[2]}) / vendor's best "
                         f"({best_overall['library']} {best_overall['layout']}): {ratio:.2f}x; "
                         f"{of_peak(top[0])} of peak")
    paired = layer_out.get("paired_vendor")  # reports of earlier versions have none
    if paired:
        lines.append(f"   paired /vendor: best tensorgym kernel @{paired['budget']} ({paired['combo']}) / "
                     f"{paired['vendor']}, {paired_text(paired)}")
    return "\n".join(lines), ratio


def pair_best(layer_out: dict, runs: list, workload, top_budget: int, pairs: int) -> dict | None:
    """The best kernel at ``top_budget`` (re-timed) and a vendor reference that can share its process, timed in
    one process (:func:`tensorgym.baselines.compare.time_paired_vendor`); None when there is no such pair, or
    the timing failed (said). The reference is :func:`paired_reference`."""
    from tensorgym.baselines.compare import time_paired_vendor
    from tensorgym.baselines.vendor import PAIRED_BACKENDS

    kernels = [(k, space, config) for k, (_, budget, space, (config, _), _, _) in zip(layer_out["kernels"], runs)
               if budget == top_budget and k["retimed"]]
    vendors = [v for v in layer_out["vendors"] if v["retimed"] and v.get("backend") in PAIRED_BACKENDS]
    if not kernels or not vendors or workload.dtype != "float32":
        return None
    kernel, space, config = max(kernels, key=lambda item: item[0]["retimed"])
    ref = paired_reference(kernel, vendors)
    try:
        timing = time_paired_vendor(space, config, ref, pairs=pairs, native_blas=True)
    except Exception as exc:  # noqa: BLE001 - the layer's table stands without it
        print(f"   paired /vendor: failed: {type(exc).__name__}: {str(exc)[:300]}")
        return None
    return {"combo": kernel["combo"], "budget": top_budget, "vendor": f"{ref['library']} {ref['layout']}",
            **timing}


def paired_reference(kernel: dict, vendors: list[dict]) -> dict:
    """The fastest re-timed vendor in the kernel's own packing state (``weights``), else the fastest of all.

    Like with like: a vendor that reorders its weights on every call does more work than the same library
    with them packed once, and when the two re-time within the noise of each other, the fastest of all can be
    the weaker reference."""
    same_kind = [v for v in vendors if v.get("weights") == kernel.get("weights")]
    return max(same_kind or vendors, key=lambda v: v["retimed"])


def print_geomean(ratios: list[float]) -> float:
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios))
    print(f"\ngeomean over {len(ratios)} layer(s) of best tensorgym / vendor's best: {geomean:.2f}x "
          f"(target >= 1.0x)")
    return geomean


def print_paired_geomean(layers: dict) -> dict | None:
    """The geometric mean of the layers' paired ratios, with the largest spread and vendor drift among them (a
    drift of tens of % says the machine changed while the pairs were taken); None where no layer was paired."""
    paired = [out["paired_vendor"] for out in layers.values() if out.get("paired_vendor")]
    if not paired:
        return None
    geomean = math.exp(statistics.fmean(math.log(p["speedup"]) for p in paired))
    spread = max(p["spread"] for p in paired)
    drifts = [abs(p["vendor_drift"]) for p in paired if p.get("vendor_drift") is not None]
    drift = f", vendor drift up to {100 * max(drifts):.1f} %" if drifts else ""
    print(f"geomean over {len(paired)} layer(s) of the paired ratio: {geomean:.2f}x (spread up to "
          f"{100 * spread:.1f} %{drift})")
    return {"geomean": geomean, "layers": len(paired), "max_spread": spread,
            "max_vendor_drift": max(drifts) if drifts else None}


def _settings_of(report: dict) -> list[dict]:
    """The settings of a run's report, or of each run a merged report holds."""
    settings = report["settings"]
    return settings if isinstance(settings, list) else [settings]


def merge_reports(paths: list[str], out: str | None) -> int:
    """One report of the layers of several runs' JSON files (a benchmark run in chunks, a layer per run).

    Every layer keeps the figures of the run that measured it, its FMA peak included; a layer in several runs
    (a merged report among them, say) keeps the last one's. Runs on different targets are refused (their
    ratios do not belong in one geometric mean)."""
    from tensorgym.target import Target
    from tensorgym.workloads import Workload

    reports = [json.loads(Path(p).read_text()) for p in paths]
    prints = {r["target"]["fingerprint"] for r in reports}
    if len(prints) != 1:
        print(f"error: the runs are of different targets ({', '.join(sorted(prints))})", file=sys.stderr)
        return 2
    target = reports[0]["target"]
    print(f"merged from {len(paths)} run(s): {', '.join(paths)}")
    print(f"{Target.from_json(target).label} (fingerprint {target['fingerprint']})")
    merged: dict = {"target": target, "layers": {}, "merged_from": paths,
                    "settings": [run for report in reports for run in _settings_of(report)]}
    latest: dict[str, tuple[str, dict, int]] = {}  # a layer in several runs: the last one named
    for path, report in zip(paths, reports):
        top = max(b for run in _settings_of(report) for b in run["budgets"])
        for layer, layer_out in report["layers"].items():
            layer_out.setdefault("peak_gflops", report.get("peak_gflops"))
            latest[layer] = (path, layer_out, top)
    ratios = []
    for layer, (path, layer_out, top) in latest.items():
        wl = Workload.from_json(layer_out["workload"])
        print(f"\n== {layer}: {wl.describe()}, {wl.gflop:.3f} GFLOP (from {path}; measured fp32 FMA peak "
              f"{layer_out['peak_gflops']:.1f} GFLOP/s)")
        text, ratio = layer_table(layer_out, top)
        print(text)
        if ratio is not None:
            ratios.append(ratio)
        merged["layers"][layer] = layer_out
    if ratios:
        merged["geomean_vs_vendor_best"] = print_geomean(ratios)
    merged["paired_geomean"] = print_paired_geomean(merged["layers"])
    if out:
        Path(out).write_text(json.dumps(merged, indent=1, default=str))
    return 0


def _best_at(result, budget: int):
    """(config, GFLOP/s) of the best correct trial within the first ``budget`` trials."""
    best = None
    for trial in result.trials[:budget]:
        if trial.gflops and trial.config is not None and (best is None or trial.gflops > best[1]):
            best = (trial.config, trial.gflops)
    return best


if __name__ == "__main__":
    sys.exit(main())
