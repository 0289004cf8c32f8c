"""Does the vendor skip a convolution's padded taps? oneDNN's 3x3 convolutions, padded and pre-padded.

A 3x3 convolution with padding 1 reads zeros at its borders: of the ``9 * H * W`` taps per output channel and
input channel, only ``(3H - 2) * (3W - 2)`` touch the input. GFLOP/s are counted from the nominal FLOPs, so a
library that skips the zero taps reads faster than one that multiplies them (tensorgym's microkernels read a
zero-padded copy of the input and multiply every tap). This times oneDNN (through PyTorch, NHWC) on the same
layer two ways with the same nominal FLOPs: an HxW input with padding 1, and an (H+2)x(W+2) input with padding 0,
where every tap is real. If oneDNN skips the zero taps, the second reads slower by about the valid-tap share.

    python bench/vendor_padding.py --out bench/reports/vendor_padding.txt

It times kernels: run it alone (under ``flock /tmp/tensorgym-cpu.lock``). The machine's ``OPENBLAS_*``
overrides do not touch oneDNN, so none are cleared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial

from tensorgym.envs.registration import workload_of
from tensorgym.target import local_cpu
from tensorgym.text import format_table

from report_header import emit, header

LAYERS = ("Conv2d-ResNet-R5-v0", "Conv2d-ResNet-R8-v0", "Conv2d-ResNet-R11-v0", "Conv2d-YOLO-Y9-v0")


def seconds_per_call(call, budget_s: float = 0.05, rounds: int = 7) -> float:
    """The median over ``rounds`` of the mean seconds per call in a loop of about ``budget_s``."""
    for _ in range(10):
        call()
    start = time.perf_counter()
    call()
    number = max(3, int(budget_s / max(time.perf_counter() - start, 1e-6)))
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            call()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", nargs="*", default=LAYERS)
    parser.add_argument("--repeats", type=int, default=3, help="alternations of the two timings (median kept)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import torch
    import torch.nn.functional as F

    target = local_cpu()
    torch.set_num_threads(target.num_cores)
    rows = []
    for env_id in args.layers:
        wl = workload_of(env_id)
        if wl.padding == 0 or wl.N != 1 or wl.stride != 1:
            print(f"{env_id}: skipped (this probe takes unit-stride padded layers of batch 1)", file=sys.stderr)
            continue
        weight = torch.randn(wl.F, wl.C, wl.R, wl.S).contiguous(memory_format=torch.channels_last)
        padded = torch.randn(1, wl.C, wl.H, wl.W).contiguous(memory_format=torch.channels_last)
        pre = torch.randn(1, wl.C, wl.H + 2 * wl.padding, wl.W + 2 * wl.padding).contiguous(
            memory_format=torch.channels_last)
        gflop = wl.flops / 1e9
        with_padding = partial(F.conv2d, padded, weight, padding=wl.padding)
        without = partial(F.conv2d, pre, weight, padding=0)
        with torch.no_grad():
            pairs = [(seconds_per_call(with_padding), seconds_per_call(without)) for _ in range(args.repeats)]
        with_zeros = statistics.median(gflop / a for a, _ in pairs)
        every_tap_real = statistics.median(gflop / b for _, b in pairs)
        rows.append([wl.label, f"{with_zeros:.1f}", f"{every_tap_real:.1f}", f"{every_tap_real / with_zeros:.3f}",
                     f"{wl.unpadded_flops / wl.flops:.3f}"])  # the taps that read the input
    lines = header("Does oneDNN skip a padded convolution's zero taps? The same layer padded and pre-padded", target)
    lines += [f"vendor: torch {torch.__version__} oneDNN (F.conv2d, NHWC, weights per call), {target.num_cores} "
              f"threads; nominal GFLOP/s (the layer's FLOPs over the time), median of {args.repeats} alternations",
              "", format_table(rows, ["layer", "padding 1", "pre-padded, padding 0", "ratio", "valid-tap share"]), "",
              "ratio: pre-padded over padded. Where it is near the valid-tap share, the library does about as much "
              "work as the real taps need with padding, and all of it without: it skips the zero taps, and its "
              "nominal GFLOP/s on the padded layer count FLOPs it never did."]
    emit("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
