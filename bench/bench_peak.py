"""Does the calibration's FMA peak kernel reach what the hardware gives? Its variants, and the layers' FLOPs.

The fp32 FMA peak (:class:`tensorgym.calibration.PeakKernel`) is the denominator of every "% of peak". If a
vendor's convolution ran above it, either the peak kernel falls short (too few independent chains to hide the
FMA latency, or too short a call for the thread pool's launch) or the convolution's GFLOP/s count work it never
does. This benchmark tells them apart:

* ``variants``: the peak kernel with ``--iterations`` steps (shorter and longer calls than the calibration's) and
  ``--chains`` independent FMA chains per core, each measured in ``--rounds`` interleaved rounds (the first
  round warms the machine up and is reported apart). If the peak kernel fell short, a longer call or more
  chains would read higher;
* ``layers``: for each suite conv2d, the share of its FLOPs whose multiply-adds read the input, not the zero
  border padded around it (``Workload.unpadded_flops / flops``): oneDNN's convolutions and the microkernels
  skip the border's taps, so their GFLOP/s, counted on every tap, can exceed the peak on small padded layers.

Times kernels: run it alone on the machine (``flock /tmp/tensorgym-cpu.lock``)::

    python bench/bench_peak.py --out bench/reports/peak_kernel.txt
"""

from __future__ import annotations

import argparse
import statistics
import sys

from report_header import emit, header

from tensorgym.calibration import PEAK_ITERATIONS, PeakKernel
from tensorgym.config import Config
from tensorgym.measure.measurer import Measurer
from tensorgym.suites import all_suite_workloads
from tensorgym.target import resolve_target
from tensorgym.text import format_table
from tensorgym.workloads import Conv2d


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", default=f"20000,{PEAK_ITERATIONS},1000000",
                        help="comma-separated steps per call (default: a tenth of the calibration's, its own, and "
                             "five times it)")
    parser.add_argument("--chains", default="",
                        help="comma-separated FMA chains per core (default: the calibration's, and 8, 12, 16)")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds; the first warms up (default 4)")
    parser.add_argument("--target", default=None, help="this CPU (default) or a profile such as x86-64-v3")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the first warms the machine up)")
    target = resolve_target(args.target)
    default_chains = PeakKernel(target).workload.chains
    try:
        iterations = [int(v) for v in args.iterations.split(",")]
        chains = ([int(v) for v in args.chains.split(",")] if args.chains
                  else sorted({default_chains, *(c for c in (8, 12, 16) if c <= default_chains)}))
        variants = {(i, c): PeakKernel(target, i, c) for i in iterations for c in chains}
    except ValueError as exc:
        parser.error(str(exc))
    readings: dict[tuple[int, int], list[float]] = {key: [] for key in variants}
    with Measurer(target) as measurer:
        for round_ in range(args.rounds):
            for key, space in variants.items():
                record = measurer.measure(space, [Config({})], check=round_ == 0)[0]
                if not record.ok:
                    print(f"error: the peak kernel {key} failed ({record.status.value}): {record.error[:300]}",
                          file=sys.stderr)
                    return 1
                readings[key].append(float(record.gflops) if not record.busy else float("nan"))
    rows = []
    for (i, c), values in readings.items():
        warm, rest = values[0], [v for v in values[1:] if v == v]
        rows.append([f"{i:,}", str(c), "yes" if (i, c) == (PEAK_ITERATIONS, default_chains) else "",
                     f"{warm:.1f}", f"{max(rest):.1f}" if rest else "busy",
                     f"{statistics.median(rest):.1f}" if rest else "busy", str(len(rest))])
    best = max(v for values in readings.values() for v in values[1:] if v == v)
    lines = header("The FMA peak kernel's variants, and the share of each conv2d's FLOPs that reads the input", target)
    lines += [f"{target.vector_lanes_fp32} fp32 lanes, {target.vector_registers} vector registers, "
              f"{target.num_cores} cores; {args.rounds} interleaved rounds, the first apart (warm-up)", "",
              "== the peak kernel: steps per call x FMA chains per core, GFLOP/s ==",
              format_table(rows, ["steps", "chains", "calibration's", "round 1", "best after", "median after",
                                  "rounds"]),
              f"best of all: {best:.1f} GFLOP/s", "",
              "== suite conv2d layers: FLOPs whose multiply-adds read the input (not the zero border) =="]
    layer_rows = []
    for env_id, workload in all_suite_workloads().items():
        if isinstance(workload, Conv2d) and workload.padding:
            share = workload.unpadded_flops / workload.flops
            layer_rows.append([env_id, workload.describe(), f"{share:.3f}",
                               f"{100 / share:.0f} %"])
    lines.append(format_table(layer_rows, ["env", "layer", "share", "a kernel at 100 % of peak reads"]))
    emit("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
