"""``tensorgym microkernels calibrate|show|time``: the machine's microkernel catalogue (seed 003).

  tensorgym microkernels calibrate [--quick | --paper] [--threshold 0.8] [--force] [--cache-dir DIR]
        measure the FMA peak and every candidate microkernel once (a stored
        catalogue of this machine is reused unless --force)
  tensorgym microkernels show [--threshold T] [--all] [--cache-dir DIR]
        the kept microkernels with their % of the measured peak, grouped by class
  tensorgym microkernels time VEC,H,W[,C,R,S] ... [--target x86-64-v3] [--rounds 2]
        time chosen microkernels, the register rules' or not (does a 2 x 7 tile spill in AVX2's 16 registers?)

"""

from __future__ import annotations

import argparse

from tensorgym.calibration import calibrate, time_microkernels
from tensorgym.spaces.microkernel import DEFAULT_THRESHOLD, load_catalogue
from tensorgym.spaces.microkernel.catalogue import EnumerationRules, Microkernel
from tensorgym.target import RUNNABLE_PROFILES, resolve_target
from tensorgym.text import format_table

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

    p = sub.add_parser("time", help="time chosen microkernels (whether or not the register rules allow them)")
    p.add_argument("microkernels", nargs="+", type=_microkernel, metavar="VEC,H,W[,C,R,S]",
                   help="a microkernel's sizes: vectors of output channels, output rows and columns, then input "
                        "channels and filter rows and columns per step (default 1 each), e.g. 2,1,7")
    p.add_argument("--target", default="llvm", choices=("llvm", "native", *RUNNABLE_PROFILES),
                   help="this CPU (default), or this CPU restricted to a profile such as x86-64-v3")
    p.add_argument("--rounds", type=int, default=2, help="times each is timed, in rounds over all of them (2)")
    p.set_defaults(func=cmd_time)


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


def _microkernel(text: str) -> Microkernel:
    try:
        return Microkernel.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_time(args: argparse.Namespace) -> int:
    target = resolve_target(args.target)
    rules = EnumerationRules.for_target(target)
    rounds = time_microkernels(args.microkernels, target, rounds=args.rounds)
    peaks = [peak for peak, _ in rounds]
    print(f"{target.label}: {target.vector_lanes_fp32} fp32 lanes, {target.vector_registers} vector registers; "
          f"fp32 FMA peak {' / '.join(f'{p:.1f}' for p in peaks)} GFLOP/s (each round's)")
    rows = [[mk.label, f"{mk.live_registers} of {target.vector_registers}", "yes" if rules.allows(mk) else "no"]
            + [f"{entries[i].gflops:.1f} ({100 * entries[i].gflops / peak:.0f} %)" if entries[i].gflops
               else entries[i].status for peak, entries in rounds]
            for i, mk in enumerate(args.microkernels)]
    print(format_table(rows, ["microkernel", "live registers", "calibrated",
                              *(f"round {i + 1}" for i in range(len(rounds)))]))
    print("GFLOP/s on all cores (% of that round's peak); live registers: accumulators, one step's weights and a "
          "broadcast; calibrated: whether `microkernels calibrate` enumerates it on this target")
    return 0


def _row(label: str, gflops: float | None, peak: float, status: str) -> str:
    if gflops is None:
        return f"{label:<32} {'-':>8}  {status}"
    return f"{label:<32} {gflops:8.1f} GFLOP/s {100 * gflops / peak:5.1f} % {status}".rstrip()
