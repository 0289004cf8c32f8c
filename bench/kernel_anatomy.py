"""Where a whole microkernel-space kernel can lose the peak its microkernel reaches alone: a load-independent look.

Timings on a shared machine are noise; these figures are not timings. For one
layer and one microkernel config (default: the 28-accumulator ``vec2 h1 w14``
microkernel over the whole reuse loop on ResNet-50 R5), in each layout x
packing (NCHW in-kernel, NCHW with the weights pre-pass, everything
pre-packed, NHWC with the weights pre-pass, NCHWc with the weights pre-pass):

* the bytes the kernel's own packing stages read and write per call, next to
  the bytes the convolution itself must read once (input, weights) and write
  (output), and the number of parallel regions per call (each one a launch of
  the thread pool and a barrier);
* the generated assembly of the hottest loop (the one with the most FMAs):
  FMAs, loads (vector loads, broadcasts), stores, other instructions, and
  whether accumulators spill. On this machine an AVX-512 core issues two FMAs
  per cycle; a loop whose non-FMA work fits beside them runs at the FMA peak.

``--tiles CONFIG`` (with ``--tiles-layout`` and ``--tiles-packing``) prints the
same instruction mix for a config of the tiles space.

Usage::

    python bench/kernel_anatomy.py                       # R5, the default config
    python bench/kernel_anatomy.py --layer Conv2d-YOLO-Y9-v0 --config '{...}'
    python bench/kernel_anatomy.py --tiles '{"n":[1,1,1,1],"fo":[4,1,1,2],"y":[14,2,1,1],"x":[2,1,1,14],\
        "fi":[1,1,1,16],"rco":[8,1],"ry":[3,1],"rx":[3,1],"rci":[1,16],"unroll":64,"cache_write":1}' \
        --tiles-packing weights
"""

from __future__ import annotations

import argparse
import json
import re
import sys

DEFAULT_CONFIG = ('{"kernel":[2,14,1,1,1],"h":[1],"reuse":128,"tiles":[1,4,2,28,3,2,5,3,6,3],"parallel":2,'
                  '"prepacked":0}')
VARIANTS = (("NCHW", "in-kernel"), ("NCHW", "weights"), ("NCHW", "all"), ("NHWC", "weights"), ("NCHWc", "weights"))
KNOB = {"in-kernel": 0, "all": 1, "weights": 2}


def loop_body(block: str) -> list[str]:
    """The instructions of a labelled block up to its branch back to its own label (all of them if none).

    What follows that branch in the same block falls through once the loop ends (the accumulators' write-back
    after a reuse loop, the next tile's loads): it runs once per loop, not once per iteration."""
    label = block.split(":", 1)[0].strip()
    lines = [x.strip() for x in block.splitlines() if x.strip() and not x.strip().startswith((".", "#"))]
    back = [i for i, x in enumerate(lines) if x.startswith("j") and x.split()[-1] == label]
    return lines[:back[-1] + 1] if back else lines


def hottest_loop(asm: str) -> dict:
    """The instruction mix of the loop body (basic block up to its back-branch) with the most FMAs."""
    blocks = re.split(r"\n(?=\.LBB\d+_\d+:)", asm)
    lines = max((loop_body(b) for b in blocks), key=lambda body: sum(x.startswith("vfmadd") for x in body))
    ops = [x.split()[0] for x in lines]
    fma = sum(op.startswith("vfmadd") for op in ops)
    broadcasts = sum(op.startswith("vbroadcast") for op in ops) + sum("{1to" in x for x in lines)
    vector_loads = sum(op in ("vmovaps", "vmovups") and not x.split(None, 1)[1].rstrip().endswith(")")
                       for op, x in zip(ops, lines))
    stores = sum(op in ("vmovaps", "vmovups") and x.split(None, 1)[1].rstrip().endswith(")")
                 for op, x in zip(ops, lines))
    # spills: in any FMA loop, not only the hottest (a spilling loop may have fewer FMAs than a clean one)
    spills = sum(sum("(%rsp)" in x and x.startswith("vmov") for x in body) for body in map(loop_body, blocks)
                 if any(x.startswith("vfmadd") for x in body))
    return {"instructions": len(lines), "fma": fma, "broadcasts": broadcasts, "vector_loads": vector_loads,
            "vector_stores": stores, "stack_vector_moves": spills,
            "other": len(lines) - fma - broadcasts - vector_loads - stores}


def packing_bytes(wl, layout: str, packing: str, lanes: int) -> tuple[int, int]:
    """(bytes the kernel's packing stages move per call, parallel regions per call)."""
    from tensorgym.spaces.microkernel.codegen import channel_stride, vector_blocks

    p = wl.padding
    padded_in = wl.N * (wl.H + 2 * p) * (wl.W + 2 * p) * channel_stride(wl.C) * 4
    data, weights, out = (4 * wl.N * wl.C * wl.H * wl.W, 4 * wl.F * wl.C * wl.R * wl.S,
                          4 * wl.N * vector_blocks(wl.F, lanes) * lanes * wl.OH * wl.OW)
    moved, regions = 0, 1  # the convolution itself
    if packing == "all":
        return 0, 1
    if not (layout == "NHWC" and p == 0 and channel_stride(wl.C) == wl.C):
        moved += data + padded_in
        regions += 1
    if packing == "in-kernel":
        moved += 2 * weights
        regions += 1
    if not ((layout == "NHWC" and wl.F % lanes == 0) or (layout == "NCHWc" and lanes == wl.channel_block)):
        moved += 2 * out
        regions += 1
    return moved, regions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layer", default="Conv2d-ResNet-R5-v0")
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="a microkernel config (JSON)")
    parser.add_argument("--tiles", default=None, help="instead: a tiles-space config (JSON)")
    parser.add_argument("--tiles-layout", default="NCHW", choices=("NCHW", "NHWC", "NCHWc"))
    parser.add_argument("--tiles-packing", default=None, choices=("in-kernel", "weights"))
    args = parser.parse_args(argv)
    if args.tiles:
        return tiles_anatomy(args.layer, args.tiles, args.tiles_layout, args.tiles_packing)

    import tvm

    from tensorgym.config import Config
    from tensorgym.measure.tasks import _tvm_target
    from tensorgym.spaces.microkernel import Catalogue, MicrokernelSpace
    from tensorgym.spaces.microkernel.catalogue import Microkernel
    from tensorgym.suites import all_suite_workloads
    from tensorgym.envs.registration import with_layout
    from tensorgym.target import local_cpu
    from tensorgym.text import format_table

    target = local_cpu()
    base = all_suite_workloads()[args.layer]
    config = Config.from_json(json.loads(args.config))
    catalogue = Catalogue.unmeasured(target, [Microkernel(*config["kernel"][:1], h, *config["kernel"][1:])
                                              for h in config["h"][::2]])
    compulsory = 4 * (base.N * base.C * base.H * base.W + base.F * base.C * base.R * base.S
                      + base.N * base.F * base.OH * base.OW)
    print(f"{args.layer}: {base.describe()}; {target.label}, fingerprint {target.fingerprint}")
    print(f"the convolution reads and writes at least {compulsory / 1e6:.2f} MB per call (inputs once, output once)")
    rows = []
    for layout, packing in VARIANTS:
        wl = with_layout(base, layout, target)
        space = MicrokernelSpace(wl, target, catalogue=catalogue, packing=packing)
        variant = config.replace(prepacked=KNOB[packing])
        space.check(variant)
        executable = tvm.compile(space.builder().apply(variant), target=_tvm_target(target))
        module = executable.mod
        asm = (module.imports[0] if module.imports else module).inspect_source("asm")
        mix = hottest_loop(asm)
        moved, regions = packing_bytes(base, layout, packing, target.vector_lanes_fp32)
        rows.append([f"{layout} {packing}", f"{moved / 1e6:.2f}", str(regions), str(mix["fma"]),
                     str(mix["broadcasts"]), str(mix["vector_loads"]), str(mix["vector_stores"]),
                     str(mix["stack_vector_moves"]), str(mix["other"]), f"{mix['fma'] / mix['instructions']:.2f}"])
    print(f"config: {space.describe(config.replace(prepacked=KNOB[packing]))}")
    print(format_table(rows, ["layout, packing", "packing MB/call", "parallel regions", "FMAs", "broadcasts",
                              "vector loads", "vector stores", "stack vector moves", "other", "FMA share"]))
    return 0


def tiles_anatomy(layer: str, config_json: str, layout: str, packing: str | None) -> int:
    """The hottest loop's instruction mix of one tiles-space config."""
    import tvm

    from tensorgym.measure.tasks import _tvm_target
    from tensorgym.spaces import TilesSpace
    from tensorgym.suites import all_suite_workloads
    from tensorgym.envs.registration import with_layout
    from tensorgym.target import local_cpu
    from tensorgym.workloads import Conv2d

    target = local_cpu()
    wl = all_suite_workloads()[layer]
    wl = with_layout(wl, layout, target) if isinstance(wl, Conv2d) else wl
    space = TilesSpace(wl, target, packing=packing)
    config = space.parse(config_json)
    module = tvm.compile(space.builder().apply(config), target=_tvm_target(target)).mod
    mix = hottest_loop((module.imports[0] if module.imports else module).inspect_source("asm"))
    print(f"{layer} {layout}{f' packing {packing}' if packing else ''}: {space.describe(config)}")
    print(", ".join(f"{k} {v}" for k, v in mix.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
