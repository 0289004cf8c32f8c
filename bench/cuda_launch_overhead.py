"""Whether a short GPU kernel's timing measures the kernel or the host that launches it.

Times cuBLAS (through PyTorch) on BERT M3 in fp16 with fp32 output, as ``tensorgym.baselines.vendor`` does,
in ``--rounds`` samples per mode, each after an L2 flush and between two CUDA events:

* one call per sample (the GPU timing protocol), launched eagerly or replayed from a CUDA graph;
* ``--number`` calls per sample back to back, eagerly or from a graph (the later calls find a warm L2).

When an eager time is well above the graph's, the host's launches were timed, not the kernel.

    python bench/cuda_launch_overhead.py            # on a machine with an NVIDIA GPU and PyTorch
"""

from __future__ import annotations

import argparse
import statistics

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200, help="calls per sample in the back-to-back modes")
    parser.add_argument("--rounds", type=int, default=30, help="samples per mode")
    args = parser.parse_args()
    device = torch.device("cuda", 0)
    m, n, k = 512, 3072, 768  # BERT M3
    a = torch.rand(m, k, device=device, dtype=torch.float16) * 2 - 1
    b = torch.rand(k, n, device=device, dtype=torch.float16) * 2 - 1
    flops = 2 * m * n * k
    flush = torch.empty(2 * torch.cuda.get_device_properties(device).L2_cache_size, dtype=torch.uint8,
                        device=device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def eager(out_dtype, number):
        def run():
            for _ in range(number):
                torch.mm(a, b, out_dtype=out_dtype)
        return run

    def graphed(out_dtype, number):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            eager(out_dtype, number)()  # warm-up on a side stream, as capture requires
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            eager(out_dtype, number)()
        return graph.replay

    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}; BERT M3 {m}x{n}x{k} fp16, "
          f"fp32 output, {args.rounds} samples per mode")
    print(f"{'mode':<40} {'median us':>9} {'min us':>7} {'max us':>7} {'GFLOP/s (median)':>17}")
    for number in (1, args.number):
        for mode, run in (("eager", eager(torch.float32, number)), ("CUDA graph", graphed(torch.float32, number))):
            run()
            torch.cuda.synchronize()
            samples = []
            for _ in range(args.rounds):
                flush.zero_()
                start.record()
                run()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e3 / number)
            med = statistics.median(samples)
            label = f"{mode}, {number} call{'s' if number > 1 else ''} per sample"
            print(f"{label:<40} {med:9.2f} {min(samples):7.2f} {max(samples):7.2f} {flops / med / 1e3:17.0f}")


if __name__ == "__main__":
    main()
