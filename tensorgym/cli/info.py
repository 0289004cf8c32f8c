"""``tensorgym info``: what this CPU is to tensorgym, and what runs on it.

It prints the target's fingerprint (the key of every record, catalogue and
peak measured here), its ISA flags, vector width and register file, the
calibrated fp32 FMA peak (or the command that measures it), which search
spaces, dtypes and intrinsics run here and why the others don't, and the CPU
profiles this machine can act as (``TENSORGYM_CPU=x86-64-v3``). ``--json``
gives the same as one JSON object. Nothing is compiled or timed.
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from typing import Any

from tensorgym.target import CPU_ENV, CPU_PROFILES, RUNNABLE_PROFILES, Target, native_cpu, resolve_target


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("info", help="this CPU's fingerprint, ISA, FMA peak, and which spaces and dtypes run")
    p.add_argument("--target", default="llvm", choices=("llvm", "native", *RUNNABLE_PROFILES),
                   help=f"llvm (this CPU, after ${CPU_ENV}; default), native, or a CPU profile this CPU acts as")
    p.add_argument("--cache-dir", default=None, help="microkernel catalogue directory (default: the cache)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=run)


def describe(target: Target, cache_dir: str | None = None) -> dict[str, Any]:
    """Everything ``tensorgym info`` shows, as plain data."""
    from tensorgym.spaces.mapping.intrinsics import INTRINSICS
    from tensorgym.spaces.microkernel.catalogue import CatalogueMissing, load_catalogue

    native = native_cpu()
    try:
        catalogue = load_catalogue(target, cache_dir)
        peak: dict[str, Any] = {"gflops": round(catalogue.peak_gflops, 1), "source": "microkernel catalogue",
                                "kept_microkernels": len(catalogue.kept())}
    except CatalogueMissing:
        catalogue = None
        peak = {"gflops": None, "source": "not calibrated: run `tensorgym microkernels calibrate --quick` "
                                          "(under a minute) or without --quick (about 4 minutes)"}
    intrinsics = []
    for intrinsic in INTRINSICS.values():
        why_not = intrinsic.why_not_runs(target)
        intrinsics.append({"name": intrinsic.name, "dtype": intrinsic.dtype, "instruction": intrinsic.instruction,
                           "runs": why_not is None, "why_not": why_not or ""})
    mapping_dtypes = sorted({i["dtype"] for i in intrinsics if i["runs"]})
    microkernel_note = ("catalogue calibrated" if catalogue is not None
                        else "needs this CPU's catalogue: `tensorgym microkernels calibrate --quick`")
    spaces = {
        "tiles": {"dtypes": ["float32"], "note": "every CPU LLVM targets"},
        "microkernel": {"dtypes": ["float32"], "note": microkernel_note},
        "mapping": {"dtypes": mapping_dtypes,
                    "note": "; ".join(f"{dtype}: no intrinsic runs here" for dtype in ("float32", "int8", "bf16")
                                      if dtype not in mapping_dtypes) or "every dtype has an intrinsic here"},
        "metaschedule": {"dtypes": ["float32", "int8", "bf16"], "note": "TVM's own tuner (the peer baseline)"},
        "cutlass": {"dtypes": [], "note": "NVIDIA GPUs only (--target cuda)"},
    }
    return {
        "target": target.label,
        "fingerprint": target.fingerprint,
        "restricted_to": target.profile or None,
        "native_fingerprint": native.fingerprint,
        "llvm_mcpu": target.mcpu or "the host's (LLVM's name for this CPU)",
        "isa_level": target.isa_level,
        "flags": list(target.cpu_flags),
        "vector_bits": 32 * target.vector_lanes_fp32,
        "fp32_lanes": target.vector_lanes_fp32,
        "vector_registers": target.vector_registers,
        "nchwc_block": target.vector_lanes_fp32,
        "cores": target.num_cores,
        "caches_kib": {"l1d": target.l1d_bytes >> 10, "l2": target.l2_bytes >> 10, "l3": target.l3_bytes >> 10},
        "fma_peak": peak,
        "spaces": spaces,
        "intrinsics": intrinsics,
        "can_act_as": [name for name in RUNNABLE_PROFILES
                       if not native.missing_flags(*CPU_PROFILES[name].flags)],
    }


def run(args: argparse.Namespace) -> int:
    target = resolve_target(args.target)
    info = describe(target, args.cache_dir)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    restricted = (f" (this CPU restricted to {info['restricted_to']}; native fingerprint "
                  f"{info['native_fingerprint']})" if info["restricted_to"] else "")
    peak = info["fma_peak"]
    lines = [
        f"target       {info['target']}{restricted}",
        f"fingerprint  {info['fingerprint']}  (keys records, catalogues and peaks measured here)",
        f"LLVM CPU     {info['llvm_mcpu']}",
        f"ISA          {info['isa_level']}: {' '.join(info['flags']) or '(none of the flags tensorgym uses)'}",
        f"vectors      {info['vector_bits']}-bit, {info['fp32_lanes']} fp32 lanes, {info['vector_registers']} "
        f"registers; NCHWc block {info['nchwc_block']} (NCHW{info['nchwc_block']}c)",
        f"cores        {info['cores']}; L1d {info['caches_kib']['l1d']} KiB, L2 {info['caches_kib']['l2']} KiB, "
        f"L3 {info['caches_kib']['l3']} KiB",
        "FMA peak     " + (f"{peak['gflops']} GFLOP/s fp32 (measured, {peak['source']})" if peak["gflops"]
                           else peak["source"]),
        "",
        "spaces:",
    ]
    for name, space in info["spaces"].items():
        dtypes = ", ".join(space["dtypes"]) or "none here"
        lines.append(f"  {name:<13}{dtypes:<24}{space['note']}")
    lines += ["", "mapping intrinsics:"]
    for intrinsic in info["intrinsics"]:
        # The reason may start with the instruction, already in its own column; long ones wrap under the verdict.
        why = str(intrinsic["why_not"] or "").removeprefix(intrinsic["instruction"]).strip()
        verdict = "runs" if intrinsic["runs"] else f"no: {why}"
        head = f"  {intrinsic['name']:<14}{intrinsic['dtype']:<9}{intrinsic['instruction']:<34}"
        wrapped = textwrap.wrap(verdict, max(40, 118 - len(head))) or [""]
        lines += [head + wrapped[0], *(" " * len(head) + more for more in wrapped[1:])]
    acts = ", ".join(info["can_act_as"]) or "none"
    env = os.environ.get(CPU_ENV, "")
    lines += ["", f"this CPU can act as: {acts}  (TENSORGYM_CPU=<profile>, or --target <profile>"
                  + (f"; now {CPU_ENV}={env}" if env else "") + ")"]
    print("\n".join(lines))
    return 0
