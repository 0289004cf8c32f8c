"""The mapping space (int8, bf16 on AMX, VNNI, BF16, AVX2 intrinsics) vs MetaSchedule, PyTorch.

For each layer (default: ResNet-18 C2, C7 and C10, and BERT M3) and each dtype
(default: int8 and bf16), in one run and one database:

* ``random``, ``ga`` and ``dgd`` in the ``mapping`` space: the best GOP/s (int8)
  or GFLOP/s (bf16) after 16 and 64 measurements (each agent runs once with the
  largest budget; a run with budget ``k`` makes the first ``k`` trials of a
  longer one, so the best at 16 is a 16-measurement run);
* MetaSchedule (``metaschedule``) with the same budget: its own best at each
  checkpoint; ``final`` is its best schedule re-timed by tensorgym;
* the vendor library through PyTorch (oneDNN): int8 conv2d = quantized conv on
  the x86 engine with pre-packed weights, int8 matmul = ``torch._int_mm``, bf16 =
  conv2d / mm on bfloat16 tensors; the kernel family it ran is printed (AMX on
  a Sapphire Rapids; on AVX2 ``gemm_api:avx2``, FBGEMM, or PyTorch's own bf16
  kernels).

At the end of each layer every winner and the vendor are timed again in
``--retime`` interleaved rounds (the machine's speed drifts over minutes and a
best-of-64 is biased upward); ratios to the vendor are given as first measured
and re-timed. Each mapping-space winner is also re-timed with pre-packed
weights (``prepacked`` column): the difference is what packing the weights
inside the kernel costs (the activations are packed inside the kernel in both).

On ``--candidates-layer`` (default: C7, int8) every kept mapping candidate
also gets ``--per-candidate-budget`` random configs of its own (the restricted
space), and a table gives each candidate's best, as GTA reports per-mapping
performance: do the candidates differ?

For float32 layers the same agents also tune the ``tiles`` space (``--no-tiles``
skips it), and the mapping space's best is compared with the tiles space's
best (both re-timed).

The issue's targets (each within 64 measurements): int8 matmul M3 >= 0.8x
``torch._int_mm``; int8 conv2d >= 1.0x the PyTorch int8 conv; bf16 >= 1.0x
PyTorch bf16. **On an AVX2 CPU** (or this CPU restricted to one,
``TENSORGYM_CPU=x86-64-v3``; the first line names the target, its ISA and the
intrinsics that run): int8 M3 >= 1.0x ``torch._int_mm`` on the same CPU, and
float32 in the mapping space within 10 % of the tiles space's best. The vendor
process is restricted to the same ISA (``tensorgym.baselines.vendor``). Every
setting is a flag; the defaults are the issue's benchmark (an hour or more
here). A smoke run::

    python bench/bench_mapping.py --layers Matmul-BERT-M3-v0 --dtypes int8 --budgets 4 --no-metaschedule \\
        --per-candidate-budget 2 --candidates-layer Matmul-BERT-M3-v0 --retime 1

and the AVX2 one (a few minutes on 2 cores)::

    TENSORGYM_CPU=x86-64-v3 python bench/bench_mapping.py --layers Matmul-BERT-M3-v0 --dtypes int8,float32 \\
        --agents random --budgets 16 --no-metaschedule --candidates-layer '' --retime 2
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_LAYERS = "Conv2d-ResNet18-C2-v0,Conv2d-ResNet18-C7-v0,Conv2d-ResNet18-C10-v0,Matmul-BERT-M3-v0"
TARGETS = {("int8", "matmul"): 0.8, ("int8", "conv2d"): 1.0, ("bf16", "matmul"): 1.0, ("bf16", "conv2d"): 1.0}
# On AVX2 (no VNNI, no AMX) the issue asks int8 matmul to match torch._int_mm.
AVX2_TARGETS = {**TARGETS, ("int8", "matmul"): 1.0}
TILES_TARGET = 0.9  # float32: the mapping space's best within 10 % of the tiles space's


def targets_for(target) -> dict:
    """The issue's ratio targets for a CPU target (by its widest vector ISA)."""
    return AVX2_TARGETS if target.isa_level in ("avx2", "sse") else TARGETS


def _ints(text: str) -> tuple[int, ...]:
    return tuple(sorted({int(x) for x in text.split(",") if x.strip()}))


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default=DEFAULT_LAYERS, help="comma-separated env ids")
    parser.add_argument("--dtypes", default="int8,bf16", help="comma-separated dtypes (default: int8,bf16)")
    parser.add_argument("--agents", default="random,ga,dgd", help="mapping-space agents (default: random,ga,dgd)")
    parser.add_argument("--budgets", type=_ints, default=(16, 64), help="measurement counts to report (16,64)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per agent (default: 1)")
    parser.add_argument("--no-metaschedule", action="store_true", help="skip MetaSchedule")
    parser.add_argument("--no-vendor", action="store_true", help="skip the vendor library")
    parser.add_argument("--no-tiles", action="store_true",
                        help="float32 layers: skip tuning the tiles space (the mapping space's reference)")
    parser.add_argument("--candidates-layer", default="Conv2d-ResNet18-C7-v0",
                        help="layer of the per-candidate table (int8; '' to skip)")
    parser.add_argument("--per-candidate-budget", type=int, default=16,
                        help="random configs per kept candidate for that table (default: 16)")
    parser.add_argument("--retime", type=int, default=3,
                        help="rounds of re-timing the winners and the vendor, interleaved (default: 3)")
    parser.add_argument("--db", default=None, help="database (default: a fresh temporary one)")
    parser.add_argument("--json", default=None, help="write all results to this JSON file")
    parser.add_argument("--progress", action="store_true", help="progress bars")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from tensorgym.agents import AGENTS, make_agent
    from tensorgym.baselines import VendorUnavailable, time_vendor
    from tensorgym.baselines.compare import median_or_none, retime_interleaved, space_of
    from tensorgym.baselines.vendor import vendor_choices
    from tensorgym.database import Database
    from tensorgym.envs import make_env
    from tensorgym.measure import Measurer
    from tensorgym.spaces.mapping import MappingSpace
    from tensorgym.suites import all_suite_workloads
    from tensorgym.target import local_cpu
    from tensorgym.text import format_table
    from tensorgym.tuner import ProgressBarCallback

    workloads = all_suite_workloads()
    layers, dtypes, agents = _names(args.layers), _names(args.dtypes), _names(args.agents)
    unknown = [x for x in layers + ([args.candidates_layer] if args.candidates_layer else []) if x not in workloads]
    if unknown:
        print(f"error: unknown env ids {unknown}; see `tensorgym list`", file=sys.stderr)
        return 2
    budget = max(args.budgets)
    metaschedule = not args.no_metaschedule and "metaschedule" in AGENTS
    tmp = None
    db_path = args.db or str(Path(tmp := tempfile.mkdtemp(prefix="bench-mapping-")) / "records.db")
    target = local_cpu()
    from tensorgym.spaces.mapping import INTRINSICS

    runs_here = [i.name for i in INTRINSICS.values() if i.missing_isa(target) is None]
    restricted = f", restricted to {target.profile}" if target.profile else ""
    print(f"target {target.label} ({target.isa_level}{restricted}; {target.vector_registers} vector registers; "
          f"intrinsics: {', '.join(runs_here) or 'none'}; fingerprint {target.fingerprint})")
    print(f"budget {budget}, {args.seeds} seed(s), agents {', '.join(agents)}; db {db_path}")
    progress = ProgressBarCallback if args.progress else (lambda: None)
    results: dict[str, dict] = {}
    t_start = time.monotonic()
    with Database(db_path) as db, Measurer() as measurer:
        for dtype in dtypes:
            for layer in layers:
                wl = workloads[layer].with_dtype(dtype)
                unit = wl.throughput_unit
                print(f"\n== {layer} {dtype}: {wl.describe()}, {wl.gflop:.4f} G{'OP' if dtype == 'int8' else 'FLOP'}",
                      flush=True)
                out: dict[str, object] = {"workload": wl.to_json(), "unit": unit}
                runs: list[tuple[str, object, list, object]] = []  # (label, space, results per seed, best)
                # float32: the same agents in the tiles space too, the reference the mapping space must be near.
                spaces = [("mapping", agents + (["metaschedule"] if metaschedule else []))]
                if dtype == "float32" and not args.no_tiles:
                    spaces.append(("tiles", agents))
                for space_name, names in spaces:
                    env = make_env(wl, space=space_name, db=db, measurer=measurer)
                    try:
                        for name in names:
                            label = name if space_name == "mapping" else f"tiles {name}"
                            try:
                                per_seed = [make_agent(name).tune(env, budget=budget, seed=s, callback=progress())
                                            for s in range(args.seeds)]
                            except Exception as exc:  # noqa: BLE001 - a failing baseline must not end the benchmark
                                print(f"   ({label} failed: {type(exc).__name__}: {str(exc)[:300]})")
                                continue
                            best = max(per_seed, key=lambda r: r.best_gflops)
                            runs.append((label, space_of(env, best.space), per_seed, best))
                            out[label] = [r.to_json() for r in per_seed]
                    finally:
                        env.close()
                for name, space, _, best in runs:
                    if best.best_config is not None and space.name == "mapping":
                        print(f"   {name} best: {space.describe(best.best_config)}")

                # Re-time every winner (mapping winners also with pre-packed weights) and the vendor, interleaved.
                prepacked_space = MappingSpace(wl, target, prepacked=True)
                kernels, labels = [], []
                for name, space, _, best in runs:
                    if best.best_config is None:
                        continue
                    kernels.append((space, best.best_config))
                    labels.append(name)
                    if space.name == "mapping":
                        kernels.append((prepacked_space, best.best_config.replace(prepacked=1)))
                        labels.append(f"{name} prepacked")
                vendor_first = {}
                if not args.no_vendor:
                    for library, layout in vendor_choices(wl)[:1]:
                        try:
                            vendor_first[(library, layout)] = time_vendor(wl, library, layout)
                        except (VendorUnavailable, RuntimeError) as exc:
                            print(f"   (vendor {library} {layout}: {exc})")
                kernel_values, vendor_values = retime_interleaved(
                    measurer, kernels, [(wl, lib, lay) for lib, lay in vendor_first], args.retime,
                    progress=args.progress)
                retimed = {label: median_or_none(v) for label, v in zip(labels, kernel_values)}
                vendor = {f"{lib} {lay}": {"first": ref.gflops, "retimed": median_or_none(v), "kernel": ref.kernel,
                                           "library": ref.library, "max_rel_error": ref.max_rel_error}
                          for ((lib, lay), ref), v in zip(vendor_first.items(), vendor_values)}
                out["retimed"], out["vendor"] = retimed, vendor

                header = ["kernel"] + [f"@{b}" for b in args.budgets] + ["final", "re-timed", "prepacked"]
                rows = []
                for name, _, per_seed, best in runs:
                    values = [max(r.best_at(trials=b) for r in per_seed) for b in args.budgets]
                    rows.append([name, *map(_cell, values), _cell(best.best_gflops), _cell(retimed.get(name)),
                                 _cell(retimed.get(f"{name} prepacked"))])
                for label, ref in vendor.items():
                    rows.append([f"vendor {ref['library']} {label.split(' ', 1)[1]}", *["-"] * len(args.budgets),
                                 _cell(ref["first"]), _cell(ref["retimed"]), ""])
                print(format_table(rows, header) + f"\n   ({unit}; vendor kernels: "
                      + "; ".join(f"{ref['kernel']}" for ref in vendor.values()) + ")")
                _print_ratios(wl, runs, retimed, vendor, budget, out, targets_for(target))
                _print_tiles_ratio(runs, retimed, out)
                results[f"{layer}[{dtype}]"] = out

        if args.candidates_layer and "int8" in dtypes and args.per_candidate_budget > 0:
            wl = workloads[args.candidates_layer].with_dtype("int8")
            results["per_candidate"] = _per_candidate(wl, db, measurer, args.per_candidate_budget, args.seeds)
    print(f"\ntotal {time.monotonic() - t_start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    if tmp is not None:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _print_ratios(wl, runs, retimed, vendor, budget, out, targets=TARGETS) -> None:
    """Each agent's winner over the vendor, as first measured and re-timed, against the issue's target."""
    if not vendor:
        return
    ref = next(iter(vendor.values()))
    target = targets.get((wl.dtype, wl.op))
    ratios = {}
    for name, _, _, best in runs:
        if not best.best_gflops or not ref["first"]:
            continue
        first = best.best_gflops / ref["first"]
        again = retimed.get(name) / ref["retimed"] if retimed.get(name) and ref["retimed"] else None
        ratios[name] = {"first": first, "retimed": again}
        verdict = ""
        if target is not None and again is not None:
            verdict = f"  (target >= {target:.1f}x: {'met' if again >= target else 'NOT met'})"
        print(f"   {name} @{budget} / vendor = {first:.2f}x as first measured, "
              f"{'-' if again is None else f'{again:.2f}x'} re-timed{verdict}")
    out["ratios"] = ratios


def _print_tiles_ratio(runs, retimed, out) -> None:
    """float32: the mapping space's best over the tiles space's best (re-timed both), against the 10 % target."""
    def best(in_tiles: bool):
        values = [(retimed.get(name), name) for name, space, _, _ in runs
                  if (space.name == "tiles") == in_tiles and retimed.get(name)]
        return max(values, default=(None, None))

    (mapping, mapping_name), (tiles, tiles_name) = best(False), best(True)
    if not mapping or not tiles:
        return
    ratio = mapping / tiles
    verdict = "met" if ratio >= TILES_TARGET else "NOT met"
    print(f"   mapping ({mapping_name}) / tiles ({tiles_name}) = {ratio:.2f}x re-timed "
          f"(target >= {TILES_TARGET:.2f}x: {verdict})")
    out["mapping_over_tiles"] = ratio


def _per_candidate(wl, db, measurer, per_candidate: int, seeds: int) -> dict:
    """Random configs of every kept candidate (its restricted space), and each candidate's best in the database."""
    from tensorgym.agents import make_agent
    from tensorgym.envs import make_env
    from tensorgym.record import Status
    from tensorgym.text import format_table

    print(f"\n== per-candidate table: {wl.label}, {per_candidate} random configs per kept candidate "
          f"(plus every config the agents measured)")
    env = make_env(wl, space="mapping", db=db, measurer=measurer)
    try:
        space = env.unwrapped.search_space
        for k in space.kept:
            restricted = make_env(wl, space="mapping", db=db, measurer=measurer, only=k)
            try:
                for seed in range(seeds):
                    make_agent("random", batch_size=per_candidate).tune(restricted, budget=per_candidate, seed=seed)
            finally:
                restricted.close()
        records = db.records(wl.key, space.target.fingerprint, space.name, Status.OK)
        best = space.best_by_candidate(records)
        rows = []
        for row in space.table:
            if row["fate"] != "kept":
                continue
            value, count = best.get(row["candidate"], (None, 0))
            res = row["resources"]
            rows.append((row["candidate"], row["label"], row["packing"], f"{100 * res.utilisation:.0f}%",
                         f"{res.duplication:.2f}", _cell(value), count))
        rows.sort(key=lambda r: -(float(r[5]) if r[5] != "-" else 0.0))
        print(format_table(rows, ("#", "candidate", "packing", "util", "act dup", f"best {wl.throughput_unit}",
                                  "configs")))
        values = [float(r[5]) for r in rows if r[5] != "-"]
        if len(values) > 1:
            print(f"   best / worst candidate: {max(values) / min(values):.1f}x")
        return {"rows": [list(map(str, r)) for r in rows]}
    finally:
        env.close()


if __name__ == "__main__":
    sys.exit(main())
