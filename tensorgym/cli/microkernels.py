"""``tensorgym microkernels calibrate|show``: the machine's microkernel catalogue (seed 003).

  tensorgym microkernels calibrate [--quick | --paper] [--threshold 0.8] [--force] [--cache-dir DIR]
        measure the FMA peak and every candidate microkernel once (a stored
        catalogue of this machine is reused unless --force)
  tensorgym microkernels show [--threshold T] [--all] [--cache-dir DIR]
        the kept microkernels with their % of the measured peak, grouped by class

"""

from __future__ import annotations

import argparse

from tensorgym.calibration import calibrate
from tensorgym.spaces.microkernel import DEFAULT_THRESHOLD, load_catalogue

from .args import fraction


def add_parser(subparsers) -> None:
    """The ``microkernels`` command, with ``calibrate`` and ``show``."""
    parser = subparsers.add_parser("microkernels", help="calibrate or show this machine's microkernel catalogue")
    sub = parser.add_subparsers(dest="microkernels_command", required=True)

    p = sub.add_parser("calibrate", help="measure the FMA peak and the candidate microkernels (once per machine)")
    p.add_argument("--quick", action="store_true", help="measure a small subset (CI; under a minute)")
    p.add_argument("--paper", action="store_true",
                   help="measure seed 003's unpruned enumeration (~2000 candidates instead of 840)")
    p.add_argument("--threshold", type=fraction, default=DEFAULT_THRESHOLD,
                   help=f"keep microkernels at >= this fraction of the measured peak (default: {DEFAULT_THRESHOLD})")
    p.add_argument("--force", action="store_true", help="re-measure even if this machine has a catalogue")
    p.add_argument("--cache-dir", default=None,
                   help="catalogue directory (default: $TENSORGYM_CACHE/microkernels, "
                        "else ~/.cache/tensorgym/microkernels)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("show", help="list the kept microkernels by class, with their share of the measured peak")
    p.add_argument("--threshold", type=fraction, default=None, help="override the stored threshold")
    p.add_argument("--all", action="store_true", help="list every measured candidate, kept or not")
    p.add_argument("--cache-dir", default=None, help="catalogue directory")
    p.set_defaults(func=cmd_show)


def cmd_calibrate(args: argparse.Namespace) -> int:
    result = calibrate(quick=args.quick, paper=args.paper, threshold=args.threshold, force=args.force,
                       cache_dir=args.cache_dir, progress=not args.quiet)
    cat = result.catalogue
    kept = cat.kept()
    if result.reused:
        print(f"reusing the {cat.mode} catalogue of this machine at {result.path} "
              f"(measured {len(cat)} microkernels in {cat.calibration_s:.0f} s; --force re-measures)")
    else:
        print(f"measured {result.measured} microkernels in {result.seconds:.0f} s; saved to {result.path}")
    print(f"fp32 FMA peak: {cat.peak_gflops:.1f} GFLOP/s on {cat.target_label}")
    print(f"kept {len(kept)} of {len(cat)} at >= {100 * cat.threshold:.0f} % of peak, in "
          f"{len(cat.classes())} classes (`tensorgym microkernels show` lists them)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    cat = load_catalogue(cache_dir=args.cache_dir)
    threshold = cat.threshold if args.threshold is None else args.threshold
    print(f"{cat.target_label}: fp32 FMA peak {cat.peak_gflops:.1f} GFLOP/s (measured), {cat.lanes} lanes, "
          f"{cat.registers} vector registers; {cat.mode} catalogue of {len(cat)} candidates")
    if args.all:
        rows = sorted(cat.entries, key=lambda e: (e.microkernel.class_key, e.microkernel.h))
        lines = [_row(e.microkernel.label, e.gflops, cat.peak_gflops, e.status) for e in rows]
        print("\n".join(lines))
        return 0
    classes = cat.classes(threshold)
    print(f"{sum(len(v) for v in classes.values())} kept at >= {100 * threshold:.0f} % of peak, {len(classes)} classes "
          "(a class: same sizes except h; its members can be combined along h)\n")
    for key, members in classes.items():
        vec, w, c, r, s = key
        print(f"class vec={vec} ({vec * cat.lanes} lanes) w={w} c={c} r={r} s={s}: h in {[m.h for m in members]}")
        for mk in members:
            entry = cat.entry(mk)
            print("  " + _row(f"h={mk.h}", entry.gflops, cat.peak_gflops, ""))
    return 0


def _row(label: str, gflops: float | None, peak: float, status: str) -> str:
    if gflops is None:
        return f"{label:<32} {'-':>8}  {status}"
    return f"{label:<32} {gflops:8.1f} GFLOP/s {100 * gflops / peak:5.1f} % {status}".rstrip()
