"""Vendor-library references: the same layer computed by oneDNN (through PyTorch) or BLAS (through NumPy).

Each library is timed in its own fresh worker process, with every core, the
same :class:`~tensorgym.measure.TimingProtocol` as tensorgym's kernels, and
the same inputs; its output is checked against the NumPy reference too.

* conv2d: ``torch.nn.functional.conv2d`` on NCHW tensors (oneDNN's NCHW path)
  and on channels-last tensors (``layout="NHWC"``);
* matmul: ``numpy.matmul`` (the BLAS NumPy ships with: OpenBLAS) and
  ``torch.mm`` (the BLAS the PyTorch wheel links).
"""

from __future__ import annotations

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
    gflops: float
    max_rel_error: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def vendor_choices(workload: Workload) -> list[tuple[str, str]]:
    """(library, layout) pairs available for a workload, the primary reference first."""
    if isinstance(workload, Conv2d):
        return [("torch", "NCHW"), ("torch", "NHWC")]
    if isinstance(workload, Matmul):
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
