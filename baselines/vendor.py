"""Vendor-library references: the same layer computed by oneDNN (through PyTorch) or BLAS (through NumPy),
or on a GPU by cuBLAS and cuDNN (through PyTorch).

Each library is timed in its own fresh worker process, with every core, the
same :class:`~tensorgym.measure.TimingProtocol` as tensorgym's kernels, and
the same inputs; its output is checked against the NumPy reference too.

* conv2d: ``torch.nn.functional.conv2d`` on NCHW tensors (oneDNN's NCHW path)
  and on channels-last tensors (``layout="NHWC"``);
* matmul: ``numpy.matmul`` (the BLAS NumPy ships with: OpenBLAS) and
  ``torch.mm`` (the BLAS the PyTorch wheel links).

For a CUDA target (``target=``, a :class:`~tensorgym.target.Target` of kind
``"cuda"``) the references run on the GPU, timed as tensorgym's CUDA kernels are
(:data:`~tensorgym.measure.runner.GPU_TIMING`: CUDA events, one call per sample, the L2
flushed before each), with NVML's clocks recorded:

* ``cublas``: ``torch.mm``; fp16/bf16 inputs give an fp32 output (``out_dtype``, summed
  in fp32) where the PyTorch build has it, else the library's 16-bit output (said in
  ``library``); fp32 in full fp32 (TF32 off), ``cublas-tf32`` with TF32 tensor cores;
* ``cudnn``: ``torch.nn.functional.conv2d`` with cuDNN's autotuner (``benchmark``) on,
  NCHW or channels-last (``NHWC``); fp32 with TF32 off (``cudnn-tf32``: on); fp16/bf16
  convolutions write 16-bit outputs (cuDNN through PyTorch has no fp32 output for them).
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from tensorgym.errors import TensorgymError
from tensorgym.measure.protocol import TimingProtocol
from tensorgym.measure.runner import GPU_TIMING
from tensorgym.measure.worker import Worker
from tensorgym.record import summarize_samples
from tensorgym.target import Target, local_cpu
from tensorgym.workloads import Conv2d, Matmul, Workload


class VendorUnavailable(TensorgymError, RuntimeError):
    """The library needed for a reference is not installed."""


@dataclass(frozen=True)
class VendorResult:
    library: str  # e.g. "torch 2.13.0 (oneDNN)"
    layout: str
    backend: str  # what time_vendor takes: "torch", "numpy", "cublas", "cudnn", ...
    latency_s: float
    latency_cv: float
    samples: tuple[float, ...]
    gflops: float
    max_rel_error: float
    device_state: tuple[tuple[str, float], ...] = ()  # a GPU's clocks while timing (NVML)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def vendor_choices(workload: Workload, target: Target | None = None) -> list[tuple[str, str]]:
    """(library, layout) pairs available for a workload on ``target`` (default: this CPU), the primary first."""
    if target is not None and target.kind == "cuda":
        tf32 = workload.dtype == "float32"
        if isinstance(workload, Conv2d):
            return [("cudnn", "NCHW"), ("cudnn", "NHWC")] + ([("cudnn-tf32", "NHWC")] if tf32 else [])
        if isinstance(workload, Matmul):
            return [("cublas", "row-major")] + ([("cublas-tf32", "row-major")] if tf32 else [])
        return []
    if isinstance(workload, Conv2d):
        return [("torch", "NCHW"), ("torch", "NHWC")]
    if isinstance(workload, Matmul):
        return [("numpy", "row-major"), ("torch", "row-major")]
    return []


def time_vendor(workload: Workload, library: str | None = None, layout: str | None = None, *,
                protocol: TimingProtocol | None = None, timeout: float = 600.0,
                target: Target | None = None) -> VendorResult:
    """Time the vendor library on ``workload`` in a fresh process (default: the primary reference).

    With a CUDA ``target`` the libraries are the GPU's (cuBLAS, cuDNN) and the protocol defaults
    to the GPU one.
    """
    choices = vendor_choices(workload, target)
    if not choices:
        raise VendorUnavailable(f"no vendor reference for {workload.op}")
    library = library or choices[0][0]
    layout = layout or next(lay for lib, lay in choices if lib == library)
    if (library, layout) not in choices:
        raise ValueError(f"no {library} {layout} reference for {workload.op}; choices: {choices}")
    gpu = target is not None and target.kind == "cuda"
    with tempfile.TemporaryDirectory(prefix="tensorgym-vendor-") as logs:
        worker = Worker("vendor", logs, env={"OMP_NUM_THREADS": str(local_cpu().num_cores)},
                        block_torch=False, preload=())
        try:
            if gpu:
                outcome = worker.call("tensorgym.baselines.vendor:_time_here_cuda", workload, library, layout,
                                      protocol or GPU_TIMING, timeout=timeout)
            else:
                outcome = worker.call("tensorgym.baselines.vendor:_time_here", workload, library, layout,
                                      protocol or TimingProtocol(), local_cpu().num_cores, timeout=timeout)
        finally:
            worker.close()
    if not outcome.ok:
        if "ModuleNotFoundError" in outcome.error:
            raise VendorUnavailable(f"{library} is not installed: {outcome.error.splitlines()[0]}")
        if "VendorUnavailable" in outcome.error:
            raise VendorUnavailable(outcome.error.splitlines()[0].partition(": ")[2])
        raise RuntimeError(f"timing {library} on {workload.label} failed ({outcome.kind}): {outcome.error[:500]}")
    return VendorResult(**outcome.value)


def _time_here(workload: Workload, library: str, layout: str, protocol: TimingProtocol, threads: int) -> dict:
    """Runs in the vendor worker."""
    import numpy as np

    from tensorgym.measure.tasks import relative_error

    inputs = workload.random_inputs(seed=0)
    reference = workload.reference(*inputs)
    if library == "torch":
        import torch

        torch.set_num_threads(threads)
        name = f"torch {torch.__version__.split('+')[0]} ({'oneDNN' if isinstance(workload, Conv2d) else 'BLAS'})"
        with torch.no_grad():
            if isinstance(workload, Conv2d):
                x, w = (torch.from_numpy(a) for a in inputs)
                if layout == "NHWC":
                    x = x.contiguous(memory_format=torch.channels_last)
                    w = w.contiguous(memory_format=torch.channels_last)

                def call():
                    return torch.nn.functional.conv2d(x, w, stride=workload.stride, padding=workload.padding)
            else:
                a, b = (torch.from_numpy(a) for a in inputs)

                def call():
                    return torch.mm(a, b)

            out = call().contiguous().numpy()
            samples, _ = protocol.time_callable(call)
    elif library == "numpy":
        a, b = inputs
        name = f"numpy {np.__version__} (BLAS)"

        def call():
            return a @ b

        out = call()
        samples, _ = protocol.time_callable(call)
    else:
        raise ValueError(f"unknown library {library!r}")
    median, cv = summarize_samples(samples)
    return {"library": name, "layout": layout, "backend": library, "latency_s": median, "latency_cv": cv,
            "samples": tuple(samples), "gflops": workload.gflops(median),
            "max_rel_error": relative_error(out, reference)}


def _time_here_cuda(workload: Workload, library: str, layout: str, protocol: TimingProtocol) -> dict:
    """Runs in the vendor worker: cuBLAS / cuDNN through PyTorch on GPU 0, timed like tensorgym's CUDA kernels."""
    import torch

    from tensorgym.cuda.driver import GpuClocks
    from tensorgym.measure.tasks import relative_error

    if not torch.cuda.is_available():
        raise VendorUnavailable(f"this PyTorch ({torch.__version__}) sees no CUDA GPU")
    device = torch.device("cuda", 0)
    tf32 = library.endswith("-tf32")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True  # cuDNN's autotuner picks its fastest algorithm for the shape
    inputs = workload.random_inputs(seed=0)
    reference = workload.reference(*inputs)
    dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[workload.dtype]
    # NumPy has no bf16 torch understands: go through fp32 (exact, the values are bf16 already).
    a, b = (torch.from_numpy(x.astype("float32")).to(device=device, dtype=dtype) for x in inputs)
    version = torch.__version__.split("+")[0]
    with torch.no_grad():
        if isinstance(workload, Conv2d):
            if layout == "NHWC":
                a = a.contiguous(memory_format=torch.channels_last)
                b = b.contiguous(memory_format=torch.channels_last)
            name = f"torch {version} cuDNN {torch.backends.cudnn.version()}"

            def call():
                return torch.nn.functional.conv2d(a, b, stride=workload.stride, padding=workload.padding)
        else:
            name = f"torch {version} cuBLAS"

            def call():
                return torch.mm(a, b)

            if dtype != torch.float32:
                try:
                    torch.mm(a, b, out_dtype=torch.float32)

                    def call():
                        return torch.mm(a, b, out_dtype=torch.float32)
                except (TypeError, RuntimeError):
                    name += f" ({workload.dtype} output)"
        if dtype != torch.float32 and isinstance(workload, Conv2d):
            name += f" ({workload.dtype} output)"
        if tf32:
            name += " TF32"
        out = call().float().contiguous().cpu().numpy()
        flush = torch.empty(2 * torch.cuda.get_device_properties(device).L2_cache_size, dtype=torch.uint8,
                            device=device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def time_samples(number: int, repeat: int) -> list[float]:
            samples = []
            for _ in range(repeat):
                flush.zero_()  # cold L2, as for tensorgym's kernels
                start.record()
                for _ in range(number):
                    call()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) / 1e3 / number)
            return samples

        clocks = GpuClocks(0)
        first = protocol.first_call(lambda: (call(), torch.cuda.synchronize()))
        samples, _ = protocol.run(first, time_samples)
        state = clocks.read()
    median, cv = summarize_samples(samples)
    return {"library": name, "layout": layout, "backend": library, "latency_s": median, "latency_cv": cv,
            "samples": tuple(samples), "gflops": workload.gflops(median),
            "max_rel_error": relative_error(out, reference), "device_state": tuple(sorted(state.items()))}
