"""The CUDA halves of a measurement: building (in the builder pool) and running (in the CUDA runner).

:func:`build` (the CUDA runner's ``build_task``) asks the space's builder for its
:class:`~tensorgym.cuda.kernel.CudaKernel` (TVM-generated source, or a CUTLASS operator),
compiles it with nvcc (cached by content) and writes a small JSON *manifest* beside the
artifacts: where the binary is and how to launch it. ``run_cuda`` runs in the CUDA
runner's process, which keeps one CUDA context (:class:`~tensorgym.cuda.driver.GpuSession`)
for its whole life:

1. the builder's ``kernel_arguments`` are uploaded (the output filled with NaN when the
   result is checked, so a kernel that forgets to write fails); then the child reports
   that the kernel runs (``mark("kernel")``: a fault signal from here on is the kernel's);
2. the first call (after ``process_warmup_ms`` of calls in a fresh process, which also
   lets the GPU raise its clocks) is the checked one: its output is compared with the
   NumPy reference;
3. the :class:`~tensorgym.measure.TimingProtocol` takes samples of one call each, timed
   by CUDA events, with the L2 flushed before every sample (a 2 x L2 memset on the
   stream: the kernel never finds its inputs cached by the previous call, and the GPU is
   busy while the host enqueues the next launch, so launch latency is not timed); the
   calls are replayed from a CUDA graph, so the host's work per launch is not timed
   either (the record's ``graph_timed`` says so); given the incumbent (``incumbent_s``),
   a kernel several times slower is timed short;
4. NVML's clocks, temperature, power and clock-event reasons are read before and after
   the samples and returned as the record's ``device_state``.

A kernel fault (illegal or misaligned address) destroys the CUDA context: ``run_cuda``
then raises :class:`GpuContextLost`, and the runner replaces its process.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from ..config import Config
from ..cuda.driver import CudaError, GpuSession, load_library, unload_library
from ..cuda.nvcc import compile_cuda
from ..spaces.builder import KernelBuilder
from ..target import cuda_ordinal
from .faults import InfrastructureFault, infrastructure_cause, low_disk
from .protocol import TimingProtocol
from .tasks import enter_kernel, poisoned_like, reference_data, relative_error

_session: GpuSession | None = None


class GpuContextLost(RuntimeError):
    """A kernel faulted and the CUDA context is gone: the process must be replaced."""


class KernelRejected(RuntimeError):
    """A CUTLASS operator refused the problem (``can_implement``) or failed to start."""


# -- builder side -----------------------------------------------------------------------------
def build(builder: KernelBuilder, config: Config, out_dir: str, fault: str | None = None) -> dict[str, Any]:
    """Generate, compile (nvcc, cached) and describe ``config``'s kernel: ``{"path": manifest, "seconds": s}``.

    As :func:`tensorgym.measure.tasks.build`: a failure while the disk is (almost) full is the machine's
    (an :class:`~.faults.InfrastructureFault`); ``fault="nospace"`` is the test hook that fakes one.
    """
    t0 = time.perf_counter()
    manifest = Path(out_dir) / f"{uuid.uuid4().hex}.json"
    try:
        if fault == "nospace":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), out_dir)
        kernel = builder.cuda_kernel(config)
        compiled = compile_cuda(kernel.source, output=kernel.output, gencode=kernel.gencode, flags=kernel.flags,
                                include_dirs=kernel.include_dirs)
        manifest.write_text(json.dumps({**kernel.manifest(compiled.path, compiled.resources),
                                        "compile_s": compiled.seconds}))
    except Exception as exc:
        cause = infrastructure_cause(exc) or low_disk(out_dir, tempfile.gettempdir())
        if cause:
            raise InfrastructureFault(f"{cause}: {type(exc).__name__}: {str(exc)[:1500]}") from exc
        raise
    return {"path": str(manifest), "seconds": time.perf_counter() - t0}


# -- runner side ------------------------------------------------------------------------------
def session() -> GpuSession:
    """This process's CUDA context (created on first use, on device ``$TENSORGYM_CUDA_DEVICE`` or 0)."""
    global _session
    if _session is None:
        _session = GpuSession(cuda_ordinal())
    return _session


def run_cuda(builder: KernelBuilder, config: Config, manifest_path: str, *, check: bool, protocol: TimingProtocol,
             fault: str | None = None, incumbent_s: float | None = None) -> dict[str, Any]:
    """Load, check and time a built CUDA kernel (see the module docs); the runner's entry point.

    Returns what :func:`tensorgym.measure.tasks.check_and_time` returns, plus the ``device_state``.
    The manifest is left in place (the measurer removes it once the kernel has its record).
    """
    manifest = json.loads(Path(manifest_path).read_text())
    gpu = session()
    inputs, reference = reference_data(builder.workload)
    arrays = builder.kernel_arguments(config, inputs)
    if check:
        arrays[-1] = poisoned_like(arrays[-1])  # outputs the kernel forgets to write then fail
    pointers: list[int] = []
    release: Callable[[], None] = lambda: None  # noqa: E731
    try:
        pointers = [gpu.upload(a) for a in arrays]
        launch, release = _loaded(gpu, manifest, pointers)
        enter_kernel(fault)

        def call() -> None:
            launch()
            gpu.synchronize()

        first_call_s = protocol.first_call(call)
        if check:
            out = builder.canonical_output(config, [*arrays[:-1], gpu.download(pointers[-1], arrays[-1])])
            err = relative_error(out, reference)
            tolerance = builder.workload.tolerance(protocol.rtol, tensor_cores=builder.tensor_cores)
            if not err <= tolerance:
                return {"status": "wrong_result", "error": f"max relative error {err:.3g} > {tolerance:g}"}
        before = gpu.clocks.read()
        eager_before = gpu.eager_timings
        timing = protocol.run(first_call_s, lambda n, r: [gpu.time_launches(launch, n) for _ in range(r)],
                              incumbent_s=incumbent_s)
        after = gpu.clocks.read()
    except CudaError as exc:
        if exc.sticky:
            raise GpuContextLost(f"the kernel faulted and took the CUDA context with it: {exc}") from None
        raise
    finally:
        _release(gpu, pointers, release)
    state = dict(after)
    state["graph_timed"] = float(gpu.eager_timings == eager_before)  # 0: launches timed one by one
    if "sm_clock_mhz" in before:
        state["sm_clock_mhz_before"] = before["sm_clock_mhz"]
    return {"status": "ok", "samples": timing.samples, "number": timing.number, "contention": timing.contention,
            "dropped": timing.dropped, "timing": timing.mode, "device_state": state}


def _release(gpu: GpuSession, pointers: list[int], release: Callable[[], None]) -> None:
    """Free a kernel's buffers and binary; a lost context is reported by the caller, not here."""
    try:
        gpu.synchronize()
        gpu.release_graphs()
        release()
        for pointer in pointers:
            gpu.free(pointer)
    except CudaError:
        pass


def _loaded(gpu: GpuSession, manifest: dict[str, Any], pointers: list[int]):
    """``(launch, release)`` for a manifest: one enqueued call of the kernel, and its unloading."""
    if manifest["output"] == "cubin":
        module, function = gpu.load(Path(manifest["path"]).read_bytes(), manifest["entry"],
                                    manifest["dynamic_shared_bytes"])
        arguments = [pointers[i] for i in manifest["arguments"]]
        launch = gpu.launcher(function, manifest["grid"], manifest["block"], manifest["dynamic_shared_bytes"],
                              arguments)
        return launch, lambda: gpu.unload(module)
    if manifest["output"] == "library":
        return _library_launch(gpu, manifest, pointers)
    raise ValueError(f"unknown kernel output {manifest['output']!r}")


def _library_launch(gpu: GpuSession, manifest: dict[str, Any], pointers: list[int]):
    """Bind a CUTLASS library (the ``tg_*`` C interface of :mod:`tensorgym.cuda.kernel`) to the buffers."""
    library = load_library(manifest["path"])
    library.tg_prepare.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_longlong),
                                   ctypes.POINTER(ctypes.c_ulonglong)]
    library.tg_initialize.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    library.tg_run.argtypes = [ctypes.c_void_p]
    library.tg_last_error.restype = ctypes.c_char_p
    runtime = list(manifest.get("runtime", ())) or [0]
    workspace_bytes = ctypes.c_ulonglong(0)
    status = library.tg_prepare((ctypes.c_void_p * len(pointers))(*pointers),
                                (ctypes.c_longlong * len(runtime))(*runtime), ctypes.byref(workspace_bytes))
    if status != 0:
        message = library.tg_last_error().decode(errors="replace")
        unload_library(library)
        raise KernelRejected(f"the CUTLASS operator refused the problem: {message}")
    workspace = gpu.alloc(workspace_bytes.value) if workspace_bytes.value else 0
    stream = ctypes.c_void_p(gpu.stream_handle)

    def release() -> None:
        if workspace:
            gpu.free(workspace)
        unload_library(library)

    if library.tg_initialize(ctypes.c_void_p(workspace), stream) != 0:
        message = library.tg_last_error().decode(errors="replace")
        release()
        raise KernelRejected(f"the CUTLASS operator failed to initialise: {message}")

    def launch() -> None:
        if library.tg_run(stream) != 0:
            gpu.synchronize()  # raises CudaError (sticky: the context is lost) if the kernel faulted
            raise KernelRejected(f"the CUTLASS operator failed: {library.tg_last_error().decode(errors='replace')}")

    return launch, release
