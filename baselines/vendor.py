"""Vendor-library references: the same layer computed by oneDNN (through PyTorch) or BLAS (through NumPy).

Each library is timed in its own fresh worker process, with every core, the
same :class:`~tensorgym.measure.TimingProtocol` as tensorgym's kernels, and
the same inputs; its output is checked against the NumPy reference too (the
error is reported in ``max_rel_error``). The kernel family that ran is named in
``kernel``: oneDNN's implementation for one call, read from its verbose trace
(e.g. ``convolution:brg_conv_fwd:avx10_1_512_amx``, an AMX kernel), or the
ISA oneDNN dispatched to when it names no implementation.

float32

* conv2d: ``torch.nn.functional.conv2d`` on NCHW tensors (oneDNN's NCHW path)
  and on channels-last tensors (``layout="NHWC"``);
* matmul: ``numpy.matmul`` (the BLAS NumPy ships with: OpenBLAS) and
  ``torch.mm`` (the BLAS the PyTorch wheel links).

int8 (uint8 activations x int8 weights, what a PyTorch user of this CPU reaches for)

* conv2d: PyTorch's quantized conv (``torch.ops.quantized.conv2d``, the ``x86``
  engine: oneDNN) with unit scales and zero zero-points and **pre-packed
  weights** (``conv2d_prepack``, done once, outside the timed call: the
  functional API re-packs them on every call). Its output is requantized to
  uint8 (the int32 accumulators are not exposed), with the output scale
  ``max|ref| / 127`` and zero point 128, so the check is "within half an output
  step": ``max_rel_error`` is about 1/254 for a correct kernel;
* matmul: ``torch._int_mm`` (int8 x int8 -> int32, oneDNN). It takes signed
  activations, so the call computes ``(A - 128) @ B + 128 * colsum(B)`` (the
  compensation oneDNN itself applies to uint8 inputs), exactly ``A @ B``; shapes
  it refuses (M <= 16, K or N not multiples of 8) have no reference.

bf16: ``conv2d`` (NCHW and NHWC) and ``torch.mm`` on bfloat16 tensors (oneDNN);
the output is bfloat16, so ``max_rel_error`` is about 4e-3 (its rounding).
"""

from __future__ import annotations

import collections
import ctypes
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from tensorgym.errors import TensorgymError
from tensorgym.measure.protocol import TimingProtocol
from tensorgym.measure.worker import Worker
from tensorgym.record import summarize_samples
from tensorgym.target import local_cpu
from tensorgym.workloads import Conv2d, Matmul, Workload


class VendorUnavailable(TensorgymError, RuntimeError):
    """The library needed for a reference is not installed."""


@dataclass(frozen=True)
class VendorResult:
    library: str  # e.g. "torch 2.13.0 (oneDNN)"
    layout: str
    backend: str  # what time_vendor takes: "torch" or "numpy"
    latency_s: float
    latency_cv: float
    samples: tuple[float, ...]
    gflops: float  # GOP/s for int8 workloads
    max_rel_error: float
    kernel: str = ""  # the kernel family that ran, e.g. "convolution:brg_conv_fwd:avx10_1_512_amx"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def vendor_choices(workload: Workload) -> list[tuple[str, str]]:
    """(library, layout) pairs available for a workload, the primary reference first."""
    if workload.dtype == "int8":
        if isinstance(workload, Conv2d):
            return [("torch", "quantized prepacked")]
        if isinstance(workload, Matmul):
            return [("torch", "int_mm")]
        return []
    if isinstance(workload, Conv2d):
        return [("torch", "NCHW"), ("torch", "NHWC")]
    if isinstance(workload, Matmul):
        if workload.dtype == "bf16":
            return [("torch", "row-major")]
        return [("numpy", "row-major"), ("torch", "row-major")]
    return []


def time_vendor(workload: Workload, library: str | None = None, layout: str | None = None, *,
                protocol: TimingProtocol | None = None, timeout: float = 600.0) -> VendorResult:
    """Time the vendor library on ``workload`` in a fresh process (default: the primary reference)."""
    choices = vendor_choices(workload)
    if not choices:
        raise VendorUnavailable(f"no vendor reference for {workload.op}")
    library = library or choices[0][0]
    layout = layout or next(lay for lib, lay in choices if lib == library)
    if (library, layout) not in choices:
        raise ValueError(f"no {library} {layout} reference for {workload.op}; choices: {choices}")
    with tempfile.TemporaryDirectory(prefix="tensorgym-vendor-") as logs:
        worker = Worker("vendor", logs, env={"OMP_NUM_THREADS": str(local_cpu().num_cores)},
                        block_torch=False, preload=())
        try:
            outcome = worker.call("tensorgym.baselines.vendor:_time_here", workload, library, layout,
                                  protocol or TimingProtocol(), local_cpu().num_cores, timeout=timeout)
        finally:
            worker.close()
    if not outcome.ok:
        if "ModuleNotFoundError" in outcome.error:
            raise VendorUnavailable(f"{library} is not installed: {outcome.error.splitlines()[0]}")
        if "VendorUnavailable" in outcome.error:
            raise VendorUnavailable(outcome.error.strip().splitlines()[-1].split(": ", 1)[-1])
        raise RuntimeError(f"timing {library} on {workload.label} failed ({outcome.kind}): {outcome.error[:500]}")
    return VendorResult(**outcome.value)


def _time_here(workload: Workload, library: str, layout: str, protocol: TimingProtocol, threads: int) -> dict:
    """Runs in the vendor worker."""
    import numpy as np

    from tensorgym.measure.tasks import relative_error

    inputs = workload.random_inputs(seed=0)
    reference = workload.reference(*inputs)
    kernel = ""
    if library == "torch":
        import torch

        torch.set_num_threads(threads)
        name = f"torch {torch.__version__.split('+')[0]} ({'BLAS' if _blas_matmul(workload) else 'oneDNN'})"
        with torch.no_grad():
            call, result = _torch_call(workload, layout, inputs, reference)
            out = result(call())
            kernel = _onednn_kernel(call)
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
            "max_rel_error": relative_error(out, reference), "kernel": kernel}


def _blas_matmul(workload: Workload) -> bool:
    return isinstance(workload, Matmul) and workload.dtype == "float32"


def _torch_call(workload: Workload, layout: str, inputs, reference):
    """(the timed call, a function turning its result into the output as a NumPy array) for PyTorch."""
    import numpy as np
    import torch

    if workload.dtype == "int8":
        return _torch_int8_call(workload, inputs, reference)
    dtype = torch.bfloat16 if workload.dtype == "bf16" else torch.float32
    a, b = (torch.from_numpy(np.asarray(x, dtype=np.float32)).to(dtype) for x in inputs)

    def result(out):
        return out.float().contiguous().numpy()

    if isinstance(workload, Conv2d):
        if layout == "NHWC":
            a = a.contiguous(memory_format=torch.channels_last)
            b = b.contiguous(memory_format=torch.channels_last)
        return (lambda: torch.nn.functional.conv2d(a, b, stride=workload.stride, padding=workload.padding)), result
    return (lambda: torch.mm(a, b)), result


def _torch_int8_call(workload: Workload, inputs, reference):
    import numpy as np
    import torch

    data, weights = inputs
    if isinstance(workload, Matmul):
        if workload.M <= 16 or workload.K % 8 or workload.N % 8:
            raise VendorUnavailable(f"torch._int_mm needs M > 16 and K, N multiples of 8; {workload.label} is "
                                    f"{workload.M}x{workload.N}x{workload.K}")
        a = torch.from_numpy((data.astype(np.int16) - 128).astype(np.int8))
        b = torch.from_numpy(weights)
        compensation = 128 * b.to(torch.int32).sum(dim=0)  # (A - 128) @ B + 128 * colsum(B) == A @ B

        def call():
            return torch._int_mm(a, b) + compensation

        return call, lambda out: out.numpy()
    for engine in ("x86", "onednn", "fbgemm"):
        if engine in torch.backends.quantized.supported_engines:
            torch.backends.quantized.engine = engine
            break
    else:
        raise VendorUnavailable(f"no quantized engine among {torch.backends.quantized.supported_engines}")
    qx = torch.quantize_per_tensor(torch.from_numpy(data.astype(np.float32)), 1.0, 0, torch.quint8)
    qw = torch.quantize_per_tensor(torch.from_numpy(weights.astype(np.float32)), 1.0, 0, torch.qint8)
    st, pad = workload.stride, workload.padding
    packed = torch.ops.quantized.conv2d_prepack(qw, None, [st, st], [pad, pad], [1, 1], 1)
    scale = float(np.abs(reference).max()) / 127.0 or 1.0

    def call():
        return torch.ops.quantized.conv2d(qx, packed, scale, 128)

    return call, lambda out: out.dequantize().numpy()


def _onednn_kernel(call) -> str:
    """The oneDNN implementation(s) one call runs, from its verbose trace (fd 1 captured), or its ISA line."""
    import torch

    libc = ctypes.CDLL(None)
    with tempfile.TemporaryFile(mode="w+") as trace:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(trace.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                call()
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        trace.seek(0)
        lines = [line for line in trace.read().splitlines() if line.startswith("onednn_verbose")]
    implementations: collections.Counter[str] = collections.Counter()
    isa = ""
    for line in lines:
        fields = line.split(",")
        if "exec" in fields and len(fields) > fields.index("exec") + 3:
            i = fields.index("exec")
            implementations[fields[i + 2] + (f":{fields[i + 3]}" if fields[i + 3] else "")] += 1
        elif ",info,cpu,isa:" in line:
            isa = line.split(",info,cpu,isa:", 1)[1].strip()
    names = [name for name, _ in implementations.most_common(2)] or ["oneDNN"]
    named = any(":" in name for name in names)  # an implementation string names its ISA (e.g. ..._amx)
    return ", ".join(names) + (f" ({isa})" if isa and not named else "")
