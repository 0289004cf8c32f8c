"""Tensorgym on an NVIDIA GPU, beside cuBLAS and cuDNN.

On the machine with the GPU (``target="cuda"``), in parts that can run in separate calls:

* ``cutlass``: seed 001's space, profiled exhaustively (every config, as Bolt does) for
  BERT M3 in fp16 (fp32 sums), by the ``exhaustive`` agent;
* ``tiles``: ResNet-50 R5 and BERT M3 in fp32, and M3 in fp16, each tuned by DGD (seed 000,
  the seven GPU features) and by Ansor's GA, ``--budget`` trials each (128);
* ``vendor``: cuBLAS and cuDNN through PyTorch on the same layers and dtypes;
* ``report``: the tables: every run's best GFLOP/s, its ratio to the vendor library, the
  status of every kernel it measured (each new kernel is checked against NumPy once:
  ``wrong_result`` counts the failures), and when DGD reached GA's best.

Every measurement lands in ``--db`` and every finished run in ``--out`` (JSON), so a
part that was cut off resumes when re-run with the same files. Without a GPU,
``--dry-run`` generates and compiles (nvcc) a few kernels of each space for an H100
description, to check the toolchain. Examples::

    python bench/bench_cuda.py --parts cutlass,vendor --out $OUT/bench --db $OUT/bench/cuda.db
    python bench/bench_cuda.py --parts tiles --runs dgd:R5,ga:R5,dgd:M3 --out ... --db ...
    python bench/bench_cuda.py --parts report --out ... --db ...
    python bench/bench_cuda.py --dry-run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

from tensorgym.catalog import make_agent, make_space
from tensorgym.database import Database
from tensorgym.envs.registration import make_env
from tensorgym.record import Status
from tensorgym.suites import SUITES
from tensorgym.target import TargetError, cuda_target, resolve_target
from tensorgym.text import format_table, slug
from tensorgym.tuner import ProgressBarCallback, TuningResult
from tensorgym.workloads import Workload

LAYERS: dict[str, Workload] = {
    "R5": SUITES["ResNet-50"]["R5"],
    "M3": SUITES["BERT"]["M3"],
    "M3-fp16": dataclasses.replace(SUITES["BERT"]["M3"], dtype="float16"),
}
TILES_RUNS = ("dgd:R5", "ga:R5", "dgd:M3", "ga:M3", "dgd:M3-fp16", "ga:M3-fp16")
CUTLASS_LAYER = "M3-fp16"


def _result_path(out: Path, kind: str, name: str) -> Path:
    return out / f"{kind}-{slug(name)}.json"


def run_cutlass(target, db: Database, measurer, out: Path, seed: int, progress: bool,
                swizzles: tuple[int, ...]) -> None:
    workload = LAYERS[CUTLASS_LAYER]
    env = make_env(workload, space="cutlass", target=target, db=db, measurer=measurer, swizzles=swizzles)
    try:
        size = len(env.search_space.configs())
        print(f"cutlass: profiling all {size} configs of {workload.label} {workload.dtype} on {target.label} "
              f"(swizzles {', '.join(map(str, swizzles))})", flush=True)
        # Large batches: the first one (split-K 1, every template and swizzle) compiles on every core at once.
        result = make_agent("exhaustive", batch_size=160).tune(
            env, budget=None, time_budget=3 * 3600, seed=seed, callback=ProgressBarCallback() if progress else None)
    finally:
        env.close()
    result.save(_result_path(out, "cutlass", CUTLASS_LAYER))


def run_tiles(target, db: Database, measurer, out: Path, runs: list[str], budget: int, seed: int,
              progress: bool) -> None:
    for run in runs:
        agent_name, _, layer = run.partition(":")
        path = _result_path(out, "tiles", run)
        if path.exists():
            print(f"tiles: {run} done before ({path.name})", flush=True)
            continue
        workload = LAYERS[layer]
        env = make_env(workload, space="tiles", target=target, db=db, measurer=measurer)
        try:
            features = {"features": "af"} if agent_name == "dgd" else {}
            t0 = time.monotonic()
            result = make_agent(agent_name, **features).tune(env, budget=budget, seed=seed,
                                                             callback=ProgressBarCallback() if progress else None)
        finally:
            env.close()
        result.save(path)
        print(f"tiles: {run} best {result.best_gflops:.1f} GFLOP/s after {len(result.trials)} trials, "
              f"{time.monotonic() - t0:.0f} s", flush=True)


def run_vendor(target, out: Path) -> None:
    from tensorgym.baselines.vendor import VendorUnavailable, time_vendor, vendor_choices

    for layer, workload in LAYERS.items():
        path = _result_path(out, "vendor", layer)
        timings = []
        for library, layout in vendor_choices(workload, target):
            try:
                timings.append(time_vendor(workload, library, layout, target=target).to_json())
            except (VendorUnavailable, RuntimeError) as exc:
                timings.append({"library": library, "layout": layout, "error": str(exc)[:300]})
        path.write_text(json.dumps(timings, indent=1))
        print(f"vendor: {layer}: " + ", ".join(f"{t['library']} {t['layout']} {t.get('gflops', 0):.0f} GFLOP/s"
                                               for t in timings if "gflops" in t), flush=True)


def report(target, db: Database, out: Path) -> None:
    vendors = {}
    for layer in LAYERS:
        path = _result_path(out, "vendor", layer)
        if path.exists():
            usable = [t for t in json.loads(path.read_text()) if t.get("gflops")]
            # Compare like with like: the strongest library at the layer's own precision (TF32 is shown apart).
            exact = [t for t in usable if not t["backend"].endswith("-tf32")]
            vendors[layer] = (max(exact, key=lambda t: t["gflops"]) if exact else None, usable)
    rows = []
    results: dict[str, TuningResult] = {}
    for path in sorted(out.glob("tiles-*.json")) + sorted(out.glob("cutlass-*.json")):
        result = TuningResult.from_json(json.loads(path.read_text()))
        kind, _, run = path.stem.partition("-")
        layer = run.partition("_")[2] if kind == "tiles" else CUTLASS_LAYER
        results[run] = result
        statuses = _statuses(db, result, target)
        vendor = vendors.get(layer, (None, []))[0]
        ratio = f"{result.best_gflops / vendor['gflops']:.2f}" if vendor and result.best_gflops else ""
        seconds_to_best = next((t.elapsed_s for t in result.trials if t.best_gflops >= result.best_gflops), None)
        rows.append((f"{result.agent} {result.space}", layer, len(result.trials), f"{result.best_gflops:.0f}",
                     f"{result.best_latency_s * 1e6:.1f}" if result.best_latency_s else "", ratio,
                     f"{seconds_to_best:.0f}" if seconds_to_best is not None else "",
                     " ".join(f"{k}={v}" for k, v in sorted(statuses.items()))))
    print(f"\n== {target.label}, driver {target.device.driver}, nvcc {target.device.toolkit} ==\n")
    print(format_table(rows, ("run", "layer", "trials", "best GFLOP/s", "latency us", "x vendor", "s to best",
                              "kernels (each checked once against NumPy)")))
    print("\nvendor libraries (same run; x vendor divides by the fastest at the layer's own precision):")
    vendor_rows = []
    for layer, (best, timings) in vendors.items():
        for t in timings:
            marker = "*" if best is not None and t is best else ""
            vendor_rows.append((layer, f"{t['library']}{marker}", t["layout"], f"{t['gflops']:.0f}",
                                f"{t['latency_s'] * 1e6:.1f}", f"{t['max_rel_error']:.1e}",
                                f"{dict(map(tuple, t.get('device_state', ()))).get('sm_clock_mhz', 0):.0f}"))
    print(format_table(vendor_rows, ("layer", "library", "layout", "GFLOP/s", "latency us", "max rel err",
                                     "SM MHz")))
    print("\nDGD against GA (seed 000: DGD reaches GA's quality in a fraction of the tuning time):")
    for layer in LAYERS:
        dgd, ga = results.get(slug(f"dgd:{layer}")), results.get(slug(f"ga:{layer}"))
        if dgd is None or ga is None or not ga.best_gflops:
            continue
        reach = next((t for t in dgd.trials if t.best_gflops >= ga.best_gflops), None)
        ga_clock = ga.trials[-1].elapsed_s if ga.trials else 0.0
        when = (f"reaches GA's final best at trial {reach.index} ({reach.elapsed_s:.0f} s of tuning clock; "
                f"GA took {ga_clock:.0f} s for {len(ga.trials)})") if reach else "does not reach GA's final best"
        print(f"  {layer}: DGD {dgd.best_gflops:.0f} vs GA {ga.best_gflops:.0f} GFLOP/s "
              f"({dgd.best_gflops / ga.best_gflops:.2f}x); DGD {when}")
    cutlass = results.get(slug(CUTLASS_LAYER))
    if cutlass is not None and cutlass.best_config is not None:
        space = make_space("cutlass", LAYERS[CUTLASS_LAYER], target)
        print(f"\ncutlass best ({CUTLASS_LAYER}): {space.describe(cutlass.best_config)}")
        by_family: dict[int, float] = {}
        for trial in cutlass.trials:
            if trial.gflops:
                family = trial.config["tile"][0]
                by_family[family] = max(by_family.get(family, 0.0), trial.gflops)
        print("  best per family: " + ", ".join(f"{'CUTLASS 2.x (sm_80 mma)' if f == 80 else 'CUTLASS 3.x (wgmma)'} "
                                                f"{g:.0f} GFLOP/s" for f, g in sorted(by_family.items())))


def _statuses(db: Database, result: TuningResult, target) -> dict[str, int]:
    configs = {t.config for t in result.trials}
    counts: dict[str, int] = {}
    for record in db.records(result.workload_key, target.fingerprint, result.space):
        if record.config in configs:
            counts[record.status.value] = counts.get(record.status.value, 0) + 1
    return counts


def prebuild(swizzles: tuple[int, ...]) -> int:
    """Compile, for an H100 description, the CUTLASS kernels a GPU session would otherwise compile on the device.

    A CUTLASS kernel takes nvcc 20-60 s, a TVM kernel a second or two: compiling the cutlass part's kernels and
    those the GPU tests measure (the first config of each family and epilogue, as the tests pick them) ahead, into
    ``$TENSORGYM_CUDA_CACHE``, leaves the device's time to measuring. The cache is keyed by source, flags
    (include paths too) and nvcc version, so it is used only where all three match.
    """
    from concurrent.futures import ThreadPoolExecutor

    from tensorgym.cuda.nvcc import compile_cuda
    from tensorgym.workloads import conv2d, matmul

    target = cuda_target("h100")
    spaces = [make_space("cutlass", LAYERS[CUTLASS_LAYER], target, swizzles=swizzles)]
    spaces += [make_space("cutlass", matmul(512, 768, 256, dtype=dtype), target, epilogue="bias_relu",
                          swizzles=(8,), split_k=(1, 2)) for dtype in ("float16", "bf16", "float32")]
    spaces.append(make_space("cutlass", conv2d(1, 64, 28, 28, 64, 3, 3, dtype="float16"), target, swizzles=(4,),
                             split_k=(1, 2)))
    kernels = {}
    for index, space in enumerate(spaces):
        builder = space.builder()
        configs = space.configs()
        if index:  # a test space: the first config of each family and epilogue
            firsts = {}
            for config in configs:
                firsts.setdefault((config["tile"][0], config["epilogue"]), config)
            configs = list(firsts.values())
        for config in configs:
            kernel = builder.cuda_kernel(config)
            kernels.setdefault((kernel.source, kernel.flags, kernel.gencode), kernel)
    print(f"prebuild: {len(kernels)} CUTLASS kernels for {target.label} into the cache", flush=True)
    t0 = time.monotonic()

    def build(kernel):
        return compile_cuda(kernel.source, output=kernel.output, gencode=kernel.gencode, flags=kernel.flags,
                            include_dirs=kernel.include_dirs).seconds

    with ThreadPoolExecutor(max_workers=resolve_target(None).num_cores) as pool:
        for done, seconds in enumerate(pool.map(build, kernels.values()), 1):
            if done % 10 == 0 or done == len(kernels):
                print(f"  {done}/{len(kernels)} ({seconds:.0f} s the last; {time.monotonic() - t0:.0f} s in all)",
                      flush=True)
    return 0


def dry_run() -> int:
    """Generate and compile a few kernels of each space for an H100 description (no GPU needed)."""
    from tensorgym.cuda.nvcc import compile_cuda

    target = cuda_target("h100")
    rng = np.random.default_rng(0)
    for layer, workload in LAYERS.items():
        space = make_space("tiles", workload, target)
        for config in space.sample_many(rng, 2):
            t0 = time.monotonic()
            kernel = space.builder().cuda_kernel(config)
            built = compile_cuda(kernel.source, output=kernel.output, gencode=kernel.gencode, flags=kernel.flags)
            print(f"tiles {layer}: {space.describe(config)} -> {kernel.grid[0]} x {kernel.block[0]} threads, "
                  f"{built.resources.get(kernel.entry, {})}, {time.monotonic() - t0:.1f} s")
    space = make_space("cutlass", LAYERS[CUTLASS_LAYER], target)
    print(f"cutlass {CUTLASS_LAYER}: {len(space.configs())} configs, {len(space.tiles)} templates")
    config = space.configs()[0]
    t0 = time.monotonic()
    kernel = space.builder().cuda_kernel(config)
    compile_cuda(kernel.source, output=kernel.output, gencode=kernel.gencode, flags=kernel.flags,
                 include_dirs=kernel.include_dirs)
    print(f"cutlass: {space.describe(config)} compiled in {time.monotonic() - t0:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="cutlass,tiles,vendor,report",
                        help="comma-separated: cutlass, tiles, vendor, report (default: all)")
    parser.add_argument("--runs", default=",".join(TILES_RUNS), help=f"tiles runs (default: {','.join(TILES_RUNS)})")
    parser.add_argument("--budget", type=int, default=128, help="trials per tiles run (default: 128)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", default="bench-cuda.db", help="database of every measurement (resumes)")
    parser.add_argument("--out", default="bench-cuda", help="directory of the finished runs (resumes)")
    parser.add_argument("--cutlass-swizzles", default="1,2,4,8",
                        help="the threadblock swizzles the cutlass part profiles (default: all four)")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: generate and compile kernels for an H100")
    parser.add_argument("--prebuild", action="store_true",
                        help="no GPU: compile the cutlass part's and the GPU tests' CUTLASS kernels for an H100 "
                             "into $TENSORGYM_CUDA_CACHE, to carry to the GPU machine")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        swizzles = tuple(int(s) for s in args.cutlass_swizzles.split(","))
    except ValueError:
        parser.error(f"--cutlass-swizzles takes comma-separated integers, got {args.cutlass_swizzles!r}")
    if args.dry_run:
        return dry_run()
    if args.prebuild:
        return prebuild(swizzles)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = parts - {"cutlass", "tiles", "vendor", "report"}
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    bad_runs = [r for r in runs if r.partition(":")[0] not in ("dgd", "ga") or r.partition(":")[2] not in LAYERS]
    if unknown or bad_runs:
        parser.error(f"unknown parts {sorted(unknown)} or runs {bad_runs} (runs are AGENT:LAYER, agents dgd/ga, "
                     f"layers {', '.join(LAYERS)})")
    try:
        target = resolve_target("cuda")
    except TargetError as exc:
        print(f"bench_cuda: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"target {target.label}; fingerprint {target.fingerprint}; device {json.dumps(target.to_json()['device'])}",
          flush=True)
    from tensorgym.measure import Measurer

    with Database(args.db) as db, Measurer(target) as measurer:
        t0 = time.monotonic()
        if "cutlass" in parts:
            run_cutlass(target, db, measurer, out, args.seed, not args.quiet, swizzles)
        if "tiles" in parts:
            run_tiles(target, db, measurer, out, runs, args.budget, args.seed, not args.quiet)
        if "vendor" in parts:
            run_vendor(target, out)
        if "report" in parts:
            report(target, db, out)
        print(f"\n{(time.monotonic() - t0) / 60:.1f} min; measurements in {args.db}, runs in {out}")
        failed = sum(1 for r in db.records(target=target.fingerprint) if r.status is Status.WRONG_RESULT)
        if failed:
            print(f"{failed} kernel(s) computed wrong results (see `tensorgym show --db {args.db}`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
