"""Vendor-library references: the same layer computed by oneDNN, MKL or OpenBLAS, the way a user on this CPU would,
or on a GPU by cuBLAS and cuDNN (through PyTorch).

Each reference is timed in its own fresh worker process, with every core, the
same :class:`~tensorgym.measure.TimingProtocol` as tensorgym's kernels (so it
also records the CPU contention of its timing), and the same inputs; its
output is checked against the NumPy reference too. Each process reports the
*kernel family* it ran (``VendorResult.kernel``): oneDNN's implementation
name from its verbose output (e.g. ``brg_conv_fwd:avx512_core``), MKL's code
path from its verbose banner, OpenBLAS's core type from threadpoolctl; the
tables show it.

References (``vendor_choices``), as ``(backend, layout)``, float32:

* conv2d: ``torch`` ``NCHW`` and ``NHWC`` (``torch.nn.functional.conv2d`` on
  contiguous or channels-last tensors: oneDNN reorders the weights to its
  blocked layout on every call) and ``onednn`` ``NHWC pre-packed`` (oneDNN's
  convolution with weights reordered once, before timing, as a framework does
  at load: ``torch.ops.mkldnn._convolution_pointwise``);
* matmul: ``numpy`` (the OpenBLAS NumPy ships), ``torch`` (``torch.mm``: MKL's
  sgemm), ``onednn`` ``row-major`` (oneDNN's matmul, plain weights) and
  ``pre-packed`` (weights reordered once), ``mkl`` ``pre-packed`` (MKL's packed
  GEMM, weights packed once).

int8 (uint8 activations x int8 weights, what a PyTorch user of this CPU reaches for):

* conv2d: ``torch`` ``quantized pre-packed``: PyTorch's quantized conv
  (``torch.ops.quantized.conv2d``, the ``x86`` engine) with unit scales,
  zero zero-points and weights pre-packed once (``conv2d_prepack``, outside the
  timed call: the functional API re-packs them on every call). Its output is
  requantized to uint8 (the int32 accumulators are not exposed), with the
  output scale ``max|ref| / 127`` and zero point 128, so the check is "within
  half an output step": ``max_rel_error`` is about 1/254 for a correct kernel.
  The ``x86`` engine runs oneDNN on CPUs with AVX512-VNNI and FBGEMM on the
  others (``should_use_onednn_quant``); ``onednn`` ``quantized pre-packed`` is
  the ``onednn`` engine, oneDNN on every CPU;
* matmul: ``torch`` ``int_mm``: ``torch._int_mm`` (int8 x int8 -> int32,
  oneDNN's ``gemm_api`` s8s8s32 on CPUs, named ``gemm_api:<isa>``). It takes
  signed activations, so the call computes
  ``(A - 128) @ B + 128 * colsum(B)`` (the compensation oneDNN itself applies to
  uint8 inputs), exactly ``A @ B``; shapes it refuses (M <= 16, K or N not
  multiples of 8) have no reference.

**int8 without VNNI** (AVX2 CPUs, Skylake-X): oneDNN's int8 kernels (the
``gemm_api`` of ``torch._int_mm``, ``jit_uni_int8:avx2`` convolutions) and
FBGEMM's multiply uint8 x int8 with ``vpmaddubsw``, whose int16 pair sums
saturate: for the full uint8 range of tensorgym's inputs they are *not exact*
(``max_rel_error`` 0.1-0.2; the frameworks' quantizers keep activations to 7
bits there). The kernel family says so (``int16-saturating``); the timing is
still the library's, which tensorgym's exact kernels are compared with. On a
restricted CPU (``TENSORGYM_CPU=x86-64-v3``) the host still reports VNNI to
PyTorch, so the ``x86`` engine is steered to FBGEMM, restricted to the same ISA
(``FBGEMM_ENABLE_INSTRUCTIONS``), as it would be on a real AVX2 CPU.

bf16: ``torch`` conv2d (NHWC and NCHW) and ``torch.mm`` on bfloat16 tensors;
the output is bfloat16, so ``max_rel_error`` is about 4e-3 (its rounding).
oneDNN runs them on CPUs with AVX-512 (``brg_matmul:avx512_core_bf16``); below
that (AVX2, or a restricted CPU) PyTorch uses its own kernels, named by the
ATen operator that ran (``not oneDNN: aten::mm``, ``aten::_slow_conv2d_forward``:
im2col and PyTorch's own GEMM, bf16 widened to fp32), far slower.

**Like with like.** ``VendorResult.weights`` says whether the weights were
prepared once outside the timing (``pre-packed``) or are taken as given on
every call (``per call``); compare a tensorgym kernel timed with pre-packed
weights with the former, one that packs its weights itself with the latter.

**The machine's environment.** Some machines set ``OPENBLAS_CORETYPE`` or
``OPENBLAS_L2_SIZE``, which make OpenBLAS run an older kernel than the CPU
supports. ``time_vendor(..., native_blas=True)`` clears them in the vendor's
own process only (benchmarks do; tests and CI keep the machine's environment),
and the result says so (``VendorResult.environment``).

**A restricted CPU.** When the local CPU acts as a smaller one
(``TENSORGYM_CPU=x86-64-v3``: kernels compiled for AVX2 + FMA), the vendor's
process is restricted the same way: ``ONEDNN_MAX_CPU_ISA=AVX2`` (oneDNN, inside
PyTorch too), ``MKL_ENABLE_INSTRUCTIONS=AVX2`` and ``OPENBLAS_CORETYPE=Haswell``
(:meth:`tensorgym.target.Target.vendor_environment`); ``environment`` lists them.

**GPUs.** For a CUDA target (``target=``, a :class:`~tensorgym.target.Target` of kind
``"cuda"``) the references run on the GPU, timed as tensorgym's CUDA kernels are
(:data:`~tensorgym.measure.runner.GPU_TIMING`: CUDA events, one call per sample, the L2
flushed before each, the call replayed from a CUDA graph), with NVML's clocks recorded
(``VendorResult.device_state``; its ``graph_timed`` is 0 where the call could not be captured):

* ``cublas``: ``torch.mm``; float16/bf16 inputs give an fp32 output (``out_dtype``, summed
  in fp32) where the PyTorch build has it, else the library's 16-bit output (said in
  ``library``); float32 in full fp32 (TF32 off), ``cublas-tf32`` with TF32 tensor cores;
* ``cudnn``: ``torch.nn.functional.conv2d`` with cuDNN's autotuner (``benchmark``) on,
  NCHW or channels-last (``NHWC``); float32 with TF32 off (``cudnn-tf32``: on); float16/bf16
  convolutions write 16-bit outputs (cuDNN through PyTorch has no fp32 output for them).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError, TensorgymError
from tensorgym.measure.contention import is_busy
from tensorgym.measure.protocol import TimingProtocol, callable_sampler, robust_spread
from tensorgym.measure.runner import GPU_TIMING
from tensorgym.measure.worker import Worker
from tensorgym.record import summarize_samples
from tensorgym.target import Target, local_cpu
from tensorgym.networks import Network
from tensorgym.spaces.builder import KernelBuilder
from tensorgym.workloads import Conv2d, Matmul, Workload

log = logging.getLogger(__name__)

BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # what ``native_blas=True`` clears
PER_CALL, PRE_PACKED = "per call", "pre-packed"
# The backends time_against_vendor can call beside a kernel: PyTorch's float32 calls. NumPy's OpenBLAS and the
# int8 / bf16 references are only timed apart.
PAIRED_BACKENDS = ("torch", "onednn", "mkl")
# Two thread pools in one process, called in turn: each pool's threads spin for a while after their work (to
# start the next call sooner), on the cores the other pool's call then needs. Measured on a 2-vCPU Zen 4, the
# vendor ran 6.9x slower between kernel calls than alone. Neither pool spins in time_against_vendor's process,
# and both of its ratios are taken under that setting.
PAIRED_THREAD_POOLS = {"TVM_THREAD_POOL_SPIN_COUNT": "0", "OMP_WAIT_POLICY": "PASSIVE"}


class VendorUnavailable(TensorgymError, RuntimeError):
    """The library needed for a reference is not installed."""


@dataclass(frozen=True)
class VendorResult:
    library: str  # e.g. "torch 2.13.0 oneDNN [brg_conv_fwd:avx512_core]": the library and its kernel family
    layout: str  # e.g. "NHWC" or "NHWC, weights pre-packed"
    backend: str  # what time_vendor takes: "torch", "onednn", "mkl", "numpy"; on a GPU "cublas", "cudnn", ...
    latency_s: float
    latency_cv: float
    samples: tuple[float, ...]
    gflops: float  # GOP/s for int8 workloads
    max_rel_error: float
    kernel: str = ""  # the kernel family the library ran
    weights: str = PER_CALL  # "per call" or "pre-packed" (see the module docs)
    contention: float | None = None  # CPU contention share of the timing (see tensorgym.measure.contention)
    environment: str = ""  # e.g. "OPENBLAS_CORETYPE cleared" (native_blas)
    choice: str = ""  # the layout argument of time_vendor that made it
    device_state: tuple[tuple[str, float], ...] = ()  # a GPU's clocks while timing (NVML)

    @property
    def busy(self) -> bool:
        """Timed while other processes took a share of the cores: no ratio may be drawn from it."""
        return is_busy(self.contention)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def vendor_choices(workload: Workload, target: Target | None = None) -> list[tuple[str, str]]:
    """``(backend, layout)`` pairs available for a workload on ``target`` (default: this CPU), the primary first."""
    if target is not None and target.kind == "cuda":
        if workload.dtype == "int8" or (isinstance(workload, Conv2d) and workload.layout != "NCHW"):
            return []
        tf32 = workload.dtype == "float32"
        if isinstance(workload, Conv2d):
            return [("cudnn", "NCHW"), ("cudnn", "NHWC")] + ([("cudnn-tf32", "NHWC")] if tf32 else [])
        if isinstance(workload, Matmul):
            return [("cublas", "row-major")] + ([("cublas-tf32", "row-major")] if tf32 else [])
        return []
    if workload.dtype == "int8":
        if isinstance(workload, Conv2d):
            return [("torch", "quantized pre-packed"), ("onednn", "quantized pre-packed")]
        return [("torch", "int_mm")] if isinstance(workload, Matmul) else []
    if workload.dtype == "bf16":
        if isinstance(workload, Conv2d):
            return [("torch", "NHWC"), ("torch", "NCHW")]
        return [("torch", "row-major")] if isinstance(workload, Matmul) else []
    if isinstance(workload, Conv2d):
        return [("torch", "NHWC"), ("torch", "NCHW"), ("onednn", "NHWC pre-packed")]
    if isinstance(workload, Matmul):
        return [("torch", "row-major"), ("numpy", "row-major"), ("onednn", "row-major"), ("onednn", "pre-packed"),
                ("mkl", "pre-packed")]
    return []


def best_vendor(timings: list[dict[str, Any]], weights: str | None = None) -> dict[str, Any] | None:
    """The fastest of a list of ``VendorResult.to_json()`` dicts (optionally only per-call or pre-packed ones)."""
    usable = [t for t in timings if t.get("gflops") and (weights is None or t.get("weights") == weights)]
    return max(usable, key=lambda t: t.get("remeasured_gflops") or t["gflops"], default=None)


def ratio_text(gflops: float | None, ref: "VendorResult | dict[str, Any]", *, kernel_busy: bool = False) -> str:
    """``"1.23x vendor"``, or why no ratio is given: a ratio from a contended timing is never printed."""
    contention = ref.contention if isinstance(ref, VendorResult) else ref.get("contention")
    ref_gflops = ref.gflops if isinstance(ref, VendorResult) else ref.get("gflops")
    if not gflops or not ref_gflops:
        return ""
    if kernel_busy or is_busy(contention):
        return "no ratio: timed on a busy machine"
    return f"{gflops / ref_gflops:.2f}x vendor"


def _vendor_choice(workload: Workload, library: str | None, layout: str | None,
                   target: Target | None = None) -> tuple[str, str]:
    """The ``(library, layout)`` asked for, completed from :func:`vendor_choices` (default: the primary one)."""
    choices = vendor_choices(workload, target)
    if not choices:
        raise VendorUnavailable(f"no vendor reference for {workload.op}"
                                + (f" {workload.dtype} on {target.label}" if target is not None else ""))
    library = library or choices[0][0]
    layout = layout or next((lay for lib, lay in choices if lib == library), "")
    if (library, layout) not in choices:
        raise ValueError(f"no {library} {layout} reference for {workload.op}; choices: {choices}")
    return library, layout


def time_vendor(workload: Workload, library: str | None = None, layout: str | None = None, *,
                protocol: TimingProtocol | None = None, timeout: float = 600.0,
                native_blas: bool = False, target: Target | None = None) -> VendorResult:
    """Time a vendor reference on ``workload`` in a fresh process (default: the primary one).

    ``native_blas`` clears :data:`BLAS_OVERRIDES` in the vendor's process (see the module docs). With a
    CUDA ``target`` the libraries are the GPU's (cuBLAS, cuDNN) and the protocol defaults to the GPU one.
    """
    library, layout = _vendor_choice(workload, library, layout, target)
    gpu = target is not None and target.kind == "cuda"
    # A CPU restricted to a smaller ISA (TENSORGYM_CPU=x86-64-v3) restricts its vendors the same way.
    restriction = {} if gpu else (target or local_cpu()).vendor_environment()
    cleared = [k for k in BLAS_OVERRIDES if k in os.environ and k not in restriction] if native_blas else []
    with tempfile.TemporaryDirectory(prefix="tensorgym-vendor-") as logs:
        worker = Worker("vendor", logs, env={"OMP_NUM_THREADS": str(local_cpu().num_cores), **restriction},
                        block_torch=False, preload=(), unset=BLAS_OVERRIDES if native_blas else ())
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
            raise VendorUnavailable(outcome.error.strip().splitlines()[-1].split(": ", 1)[-1])
        raise RuntimeError(f"timing {library} on {workload.label} failed ({outcome.kind}): {outcome.error[:500]}")
    environment = ", ".join(([f"{', '.join(cleared)} cleared"] if cleared else [])
                            + [f"{k}={v}" for k, v in restriction.items()])
    return VendorResult(**outcome.value, environment=environment, choice=layout)



def time_references(workload: Workload, choices: Sequence[tuple[str, str]] | None = None, *,
                    native_blas: bool = False) -> list[dict[str, Any]]:
    """Time each ``(backend, layout)`` of ``choices`` (default: every :func:`vendor_choices`) on ``workload``:
    a ``VendorResult.to_json()`` dict each, or ``{library, layout, gflops: None, error}`` for one that could
    not be timed (logged; the others still are). The one path of a layer's references and a network's
    (:func:`time_network_references`)."""
    timings = []
    for library, layout in vendor_choices(workload) if choices is None else choices:
        try:
            timings.append(time_vendor(workload, library, layout, native_blas=native_blas).to_json())
        except (VendorUnavailable, RuntimeError, ValueError) as exc:
            log.warning("vendor %s %s on %s: %s", library, layout, workload.label, exc)
            timings.append({"library": library, "layout": layout, "gflops": None, "error": str(exc)[:500]})
    return timings


def time_network_references(network: Network, *, native_blas: bool = False, progress: bool = False
                            ) -> list[dict[str, Any]]:
    """The vendor reference of a network, as a layer's references are listed: PyTorch's weighted sum
    ``sum_i w_i * t_i`` over the live layers (weight 0: skipped), ``t_i`` the faster of PyTorch's layouts of layer
    ``i`` (:func:`time_references`: each timed in its own process with tensorgym's protocol and checked against
    NumPy), the strongest reference a PyTorch user gets per layer. It estimates what a scheduler's ``f`` does: the
    time the model spends in these layers. One dict, with ``latency_s`` (the sum), ``gflops`` (the layers' FLOPs
    over it) and ``layers`` (per task: label, key, weight, and the fastest layout's timing or the last error)."""
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(network.live_tasks), desc=f"PyTorch on {network.name}", unit="layer", dynamic_ncols=True)
    layers = []
    for task in network.tasks:
        entry: dict[str, Any] = {"label": task.label, "key": task.workload.key, "weight": task.weight}
        if task.live:
            timings = time_references(task.workload, [c for c in vendor_choices(task.workload) if c[0] == "torch"],
                                      native_blas=native_blas)
            timed = [t for t in timings if "error" not in t]
            entry.update([("error", t["error"]) for t in timings if "error" in t][-1:])  # the last failure, if any
            if timed:
                best = min(timed, key=lambda t: t["latency_s"])
                entry.update({k: best[k] for k in ("library", "layout", "latency_s", "latency_cv", "max_rel_error")},
                             layouts={t["layout"]: t["latency_s"] for t in timed})
            if bar is not None:
                bar.update(1)
        layers.append(entry)
    if bar is not None:
        bar.close()
    estimate = network.estimate([layer.get("latency_s") for layer in layers])
    families = [layer["library"].split(" [")[0].split()[-1] for layer in layers if layer.get("library")]
    return [{"library": f"PyTorch weighted sum ({', '.join(dict.fromkeys(families)) or 'torch'})",
             "layout": "", "latency_s": estimate,
             "gflops": network.gflop / estimate if estimate else None, "layers": layers}]

# -- in the vendor's process --------------------------------------------------------------------------
def _capture_stdout(fn) -> str:
    """What ``fn`` writes to file descriptor 1 (the C libraries' verbose output), not shown."""
    sys.stdout.flush()
    with tempfile.TemporaryFile(mode="w+") as sink:
        saved = os.dup(1)
        os.dup2(sink.fileno(), 1)
        try:
            fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        return sink.read()


def onednn_kernel(verbose: str) -> str:
    """The implementation of the main oneDNN primitive in its verbose output, with the reorders per call."""
    impls, reorders = [], 0
    for line in verbose.splitlines():
        fields = line.split(",")
        if len(fields) > 6 and fields[0] == "onednn_verbose" and fields[2] == "primitive" and fields[3] == "exec":
            if fields[5] == "reorder":
                reorders += 1
            else:
                impls.append(f"{fields[5]} {fields[6]}")
    if not impls:
        return "not oneDNN: PyTorch's own kernel"
    return impls[-1] + (f" + {reorders} reorder{'s' * (reorders > 1)} per call" if reorders else "")


def mkl_kernel(verbose: str) -> str:
    """MKL's version and code path from its verbose banner, e.g. ``oneMKL 2024.0, AVX-512 code path``."""
    banner = next((line for line in verbose.splitlines() if line.startswith("MKL_VERBOSE") and "Intel(R) 64" in line),
                  "")
    version = re.search(r"MKL_VERBOSE (\S*MKL \S+)", banner)
    paths = [("AVX-512", "AVX-512"), ("AVX2", "AVX2"), ("AVX", "AVX")]
    path = next((name for key, name in paths if key in banner), "unknown")
    amx = " (AMX available)" if "Advanced Matrix Extensions" in banner else ""
    return f"{version.group(1) if version else 'MKL'} sgemm, {path} code path{amx}"


def blas_kernel() -> str:
    """NumPy's BLAS, its version, the core type it runs and its threads (threadpoolctl)."""
    from threadpoolctl import threadpool_info

    for info in threadpool_info():
        if info.get("user_api") == "blas":
            arch = info.get("architecture") or "unknown core type"
            return f"{info.get('internal_api', 'BLAS')} {info.get('version', '')} {arch}, " \
                   f"{info.get('num_threads')} threads"
    return "BLAS (threadpoolctl found none)"


def time_against_vendor(builder: KernelBuilder, config: Config, library_path: str, library: str | None = None,
                        layout: str | None = None, *, pairs: int = 30, protocol: TimingProtocol | None = None,
                        native_blas: bool = False, timeout: float = 600.0) -> dict[str, Any]:
    """A built kernel's latency over a vendor's, both timed in one fresh process, two ways.

    * **separate**: the kernel timed with the protocol, then the vendor (as a comparison that times them
      apart does): their ratio carries whatever the machine did between the two timings;
    * **paired** (:mod:`tensorgym.measure.paired`): ``pairs`` samples of the kernel, each between two of the
      vendor's, each kept as its ratio to them: two timings a few milliseconds apart share the machine's state.

    ``library_path`` is the kernel's library (a :class:`~tensorgym.measure.Measurer` builder's artifact);
    ``library``/``layout`` pick the vendor (default: the workload's primary one, as :func:`time_vendor`).
    Returns the vendor's name and kernel family, both ratios (the paired one with its samples' spread), the
    vendor's drift over the paired samples and the hypervisor's steal meanwhile.
    """
    library, layout = _vendor_choice(builder.workload, library, layout)
    return _beside_vendor("_against_vendor_here", builder, config, library_path, library, layout,
                          protocol or TimingProtocol(), pairs, native_blas=native_blas, timeout=timeout)


def _beside_vendor(function: str, builder: KernelBuilder, config: Config, library_path: str, library: str,
                   layout: str, protocol: TimingProtocol, *args: Any, native_blas: bool, timeout: float) -> Any:
    """``function`` of this module run in a fresh vendor worker, where a built kernel and the vendor are timed in
    one process: both thread pools told not to spin, every core used, the CPU's restriction applied."""
    threads = local_cpu().num_cores
    with tempfile.TemporaryDirectory(prefix="tensorgym-vendor-") as logs:
        worker = Worker("vendor", logs, env={"OMP_NUM_THREADS": str(threads), "TVM_NUM_THREADS": str(threads),
                                             **PAIRED_THREAD_POOLS, **local_cpu().vendor_environment()},
                        block_torch=False, preload=(), unset=BLAS_OVERRIDES if native_blas else ())
        try:
            outcome = worker.call(f"tensorgym.baselines.vendor:{function}", builder, config, library_path, library,
                                  layout, protocol, threads, *args, timeout=timeout)
        finally:
            worker.close()
    if not outcome.ok:
        raise RuntimeError(f"timing {config.key} beside {library} on {builder.workload.label} failed "
                           f"({outcome.kind}): {outcome.error[-500:]}")
    return outcome.value


def _against_vendor_here(builder: KernelBuilder, config: Config, path: str, library: str, layout: str,
                         protocol: TimingProtocol, threads: int, pairs: int) -> dict[str, Any]:
    """Runs in the vendor worker (see :func:`time_against_vendor`)."""
    import numpy as np
    import torch
    import tvm

    from tensorgym.measure.paired import PairedSampler
    from tensorgym.measure.tasks import main_sampler, reference_data

    workload = builder.workload
    builder.prepare_runtime()
    inputs, _ = reference_data(workload)
    module = tvm.runtime.load_module(path)
    args = [tvm.runtime.tensor(a, tvm.cpu(0)) for a in builder.kernel_arguments(config, inputs)]
    kernel = main_sampler(module, tvm.cpu(0), args)
    torch.set_num_threads(threads)
    with torch.no_grad():
        call, name = _torch_call(torch, workload, library, layout, workload.random_inputs(seed=0))
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            family = onednn_kernel(_capture_stdout(call))

        vendor = callable_sampler(call, warm=True)  # warmed as TVM warms each of the kernel's samples
        vendor_s, _ = summarize_samples(protocol.time_callable(call).samples)
        kernel_timing = protocol.run(protocol.first_call(lambda: module["main"](*args)), kernel)
        kernel_s, _ = summarize_samples(kernel_timing.samples)
        paired = PairedSampler(kernel, vendor, reference_s=vendor_s,
                               reference_number=PairedSampler.reference_calls(vendor_s, protocol.min_repeat_ms))
        ratios = np.array(paired(kernel_timing.number, pairs)) / vendor_s
    state = paired.state()
    return {"vendor": f"{name} [{family}]", "layout": layout, "kernel_s": kernel_s, "vendor_s": vendor_s,
            "thread_pools": ", ".join(f"{k}={v}" for k, v in PAIRED_THREAD_POOLS.items()),
            "separate_ratio": kernel_s / vendor_s, "paired_ratio": float(np.median(ratios)),
            "paired_spread": float(robust_spread(list(ratios))), "paired_ratios": [float(r) for r in ratios],
            "vendor_drift": state.get("reference_drift"), "steal": state.get("steal")}


PAIRING_VARIANTS = ("blocks", "paired", "paired, vendor warmed", "kernel / its copy", "vendor / its copy")


def pairing_bias(builder: KernelBuilder, config: Config, library_path: str, *, rounds: int = 5, pairs: int = 30,
                 protocol: TimingProtocol | None = None, timeout: float = 600.0) -> dict[str, Any]:
    """Does pairing itself move a kernel/vendor ratio? Five ways of timing the same two kernels, in one process.

    Paired ratios read the kernel faster than separate timings did, on every layer tried; this tells the
    method's share from the machine's. Each of ``rounds`` rounds takes, in a rotated order, ``pairs`` samples of:

    * **blocks**: the kernel's samples back to back, then the vendor's (the separate ratio, taken seconds apart);
    * **paired**: each kernel sample between two of the vendor's, the vendor's samples cold (as
      ``time_against_vendor`` took them until this experiment: 1-3 % in the kernel's favour);
    * **paired, vendor warmed**: the same, but each vendor sample preceded by one untimed call, as TVM's
      ``time_evaluator`` precedes each kernel sample (as ``time_against_vendor`` takes them now);
    * **kernel / its copy** and **vendor / its copy**: each paired with itself on separate buffers (A/A):
      a pairing without bias reads 1.

    Returns the vendor's name and, per variant, its ratio (median of samples) in each round.
    """
    if rounds < 1 or pairs < 1:
        raise InvalidArgumentError(f"pairing_bias needs at least one round and one pair, got {rounds} and {pairs}")
    library, layout = _vendor_choice(builder.workload, "onednn", None)
    return _beside_vendor("_pairing_bias_here", builder, config, library_path, library, layout,
                          protocol or TimingProtocol(), rounds, pairs, native_blas=True, timeout=timeout)


def _pairing_bias_here(builder: KernelBuilder, config: Config, path: str, library: str, layout: str,
                       protocol: TimingProtocol, threads: int, rounds: int, pairs: int) -> dict[str, Any]:
    """Runs in the vendor worker (see :func:`pairing_bias`)."""
    import numpy as np
    import torch
    import tvm

    from tensorgym.measure.paired import PairedSampler
    from tensorgym.measure.tasks import main_sampler, reference_data

    workload = builder.workload
    builder.prepare_runtime()
    inputs, _ = reference_data(workload)
    module = tvm.runtime.load_module(path)

    def kernel_on_own_buffers():
        args = [tvm.runtime.tensor(a, tvm.cpu(0)) for a in builder.kernel_arguments(config, inputs)]
        return main_sampler(module, tvm.cpu(0), args)

    kernel, kernel_copy = kernel_on_own_buffers(), kernel_on_own_buffers()
    torch.set_num_threads(threads)
    with torch.no_grad():
        call, name = _torch_call(torch, workload, library, layout, workload.random_inputs(seed=0))
        call_copy, _ = _torch_call(torch, workload, library, layout, workload.random_inputs(seed=1))
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            family = onednn_kernel(_capture_stdout(call))
        vendor, vendor_copy = callable_sampler(call), callable_sampler(call_copy)
        call_copy()
        kernel_copy(1, 1)
        kernel_s = float(np.median(kernel(1, 5)))
        vendor_s = float(np.median(vendor(1, 5)))
        k_number = PairedSampler.reference_calls(kernel_s, protocol.min_repeat_ms)
        v_number = PairedSampler.reference_calls(vendor_s, protocol.min_repeat_ms)

        def paired(first, first_number, second, second_number) -> float:
            sampler = PairedSampler(first, second, reference_s=1.0, reference_number=second_number)
            return float(np.median(sampler(first_number, pairs)))

        variants = {
            "blocks": lambda: float(np.median(kernel(k_number, pairs)) / np.median(vendor(v_number, pairs))),
            "paired": lambda: paired(kernel, k_number, vendor, v_number),
            "paired, vendor warmed": lambda: paired(kernel, k_number, callable_sampler(call, warm=True), v_number),
            "kernel / its copy": lambda: paired(kernel, k_number, kernel_copy, k_number),
            "vendor / its copy": lambda: paired(vendor, v_number, vendor_copy, v_number),
        }
        out: dict[str, list[float]] = {v: [] for v in PAIRING_VARIANTS}
        for round_no in range(rounds):
            for k in range(len(PAIRING_VARIANTS)):
                variant = PAIRING_VARIANTS[(k + round_no) % len(PAIRING_VARIANTS)]
                out[variant].append(variants[variant]())
    return {"vendor": f"{name} [{family}]", "layout": layout, "kernel_s": kernel_s, "vendor_s": vendor_s,
            "kernel_number": k_number, "vendor_number": v_number, "pairs": pairs, "ratios": out}


def _time_here(workload: Workload, library: str, layout: str, protocol: TimingProtocol, threads: int) -> dict:
    """Runs in the vendor worker."""
    from tensorgym.measure.tasks import relative_error

    inputs = workload.random_inputs(seed=0)
    reference = workload.reference(*inputs)
    weights = PRE_PACKED if "pre-packed" in layout else PER_CALL
    if library == "numpy":
        import numpy as np

        a, b = inputs
        call = lambda: a @ b  # noqa: E731
        out = call()
        name = f"numpy {np.__version__}"
        kernel = blas_kernel()
        timing = protocol.time_callable(call)
    else:
        import torch

        torch.set_num_threads(threads)
        with torch.no_grad():
            if workload.dtype != "float32":
                call, name, result = _torch_low_precision_call(torch, workload, library, layout, inputs,
                                                               reference)
                out = result(call())
            else:
                call, name = _torch_call(torch, workload, library, layout, inputs)
                out = _torch_output(workload, call())
            # One call with the library's verbose output on names the kernel it ran; never while timing.
            if workload.dtype != "float32":
                name, kernel = low_precision_kernel(torch, call, name, workload.dtype)
            elif library == "onednn" or isinstance(workload, Conv2d):
                with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                    kernel = onednn_kernel(_capture_stdout(call))
            else:
                with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
                    kernel = mkl_kernel(_capture_stdout(call)) + (", packed weights" if library == "mkl" else "")
            timing = protocol.time_callable(call)
    median, cv = summarize_samples(timing.samples)
    shown_layout = layout.replace(" pre-packed", ", weights pre-packed") if layout != "pre-packed" \
        else "row-major, weights pre-packed"
    return {"library": f"{name} [{kernel}]", "layout": shown_layout, "backend": library, "latency_s": median,
            "latency_cv": cv, "samples": tuple(timing.samples), "gflops": workload.gflops(median),
            "max_rel_error": relative_error(out, reference), "kernel": kernel, "weights": weights,
            "contention": timing.contention}


def _torch_low_precision_call(torch, workload: Workload, library: str, layout: str, inputs, reference):
    """(the timed call, the library's name, a function turning its result into the output as a NumPy array)
    for int8 and bf16 workloads (see the module docs)."""
    import numpy as np

    version = torch.__version__.split("+")[0]
    if workload.dtype == "int8":
        call, result, engine = _torch_int8_call(torch, workload, library, inputs, reference)
        return call, f"torch {version} {engine}", result
    a, b = (torch.from_numpy(np.asarray(x, dtype=np.float32)).to(torch.bfloat16) for x in inputs)

    def result(out):
        return out.float().contiguous().numpy()

    if isinstance(workload, Conv2d):
        if layout == "NHWC":
            a = a.contiguous(memory_format=torch.channels_last)
            b = b.contiguous(memory_format=torch.channels_last)
        return (lambda: torch.nn.functional.conv2d(a, b, stride=workload.stride, padding=workload.padding),
                f"torch {version} oneDNN", result)
    return (lambda: torch.mm(a, b)), f"torch {version} oneDNN", result


# oneDNN's ISA caps (ONEDNN_MAX_CPU_ISA, set by time_vendor for a restricted CPU) without VNNI: on such a CPU
# PyTorch's x86 quantized engine picks FBGEMM.
_CAPS_WITHOUT_VNNI = ("AVX2", "AVX512_CORE")


def _quantized_engine(torch, library: str) -> str:
    """Set the quantized engine of an int8 conv reference: ``onednn`` for ``library="onednn"``, else the
    ``x86`` engine, or FBGEMM where the ``x86`` engine would choose it but cannot see why (see the module docs).
    """
    supported = torch.backends.quantized.supported_engines
    wanted = ("onednn",) if library == "onednn" else ("x86", "onednn", "fbgemm")
    engine = next((e for e in wanted if e in supported), None)
    if engine is None:
        raise VendorUnavailable(f"no quantized engine among {supported} for {library}")
    without_vnni = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in _CAPS_WITHOUT_VNNI
    if engine == "x86" and without_vnni and "fbgemm" in supported:
        # The x86 engine picks oneDNN when cpuinfo reports AVX512-VNNI, which a restricted CPU still does;
        # on the CPU it stands for (no VNNI) it picks FBGEMM, which the target capped at the same ISA
        # (FBGEMM_ENABLE_INSTRUCTIONS, Target.vendor_environment).
        engine = "fbgemm"
    torch.backends.quantized.engine = engine
    return engine


def _torch_int8_call(torch, workload: Workload, library: str, inputs, reference):
    """(the timed call, a function turning its result into a NumPy array, the engine's name) of PyTorch's
    int8 reference."""
    import numpy as np

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

        return call, lambda out: out.numpy(), "oneDNN"
    engine = _quantized_engine(torch, library)
    qx = torch.quantize_per_tensor(torch.from_numpy(data.astype(np.float32)), 1.0, 0, torch.quint8)
    qw = torch.quantize_per_tensor(torch.from_numpy(weights.astype(np.float32)), 1.0, 0, torch.qint8)
    st, pad = workload.stride, workload.padding
    packed = torch.ops.quantized.conv2d_prepack(qw, None, [st, st], [pad, pad], [1, 1], 1)
    scale = float(np.abs(reference).max()) / 127.0 or 1.0

    def call():
        return torch.ops.quantized.conv2d(qx, packed, scale, 128)

    name = {"fbgemm": "FBGEMM", "qnnpack": "QNNPACK"}.get(engine, "oneDNN")
    return call, lambda out: out.dequantize().numpy(), name


# ATen operators that only allocate, move, view or describe tensors, or dispatch to another operator: the kernel
# is the last operator that is none of them. Allocations are matched by name (``empty``, ``empty_strided``,
# ``zeros``...) rather than listed, so that an allocation a kernel makes for its output, which the profiler lists
# after the kernel's own operator, is never taken for the kernel.
_ATEN_BOOKKEEPING = ("view", "resize_", "as_strided", "as_strided_", "resolve_conj", "contiguous", "clone", "copy_",
                     "_to_copy", "to", "detach", "t", "transpose", "permute", "reshape", "expand", "alias",
                     "lift_fresh", "_nnpack_available", "conv2d", "convolution", "_convolution", "thnn_conv2d",
                     "qscheme", "q_zero_point", "q_scale", "quantize_per_tensor", "dequantize")
_ATEN_ALLOCATION = re.compile(r"^(empty|zeros|ones|full|new_)\w*$|_like$")

# oneDNN's verbose "isa:" line -> its short ISA name (as in implementation names such as jit_uni_int8:avx2).
_ONEDNN_ISAS = (("AMX", "avx512_core_amx"), ("AVX-512 with", "avx512_core_vnni"), ("AVX-512", "avx512_core"),
                ("AVX2 with", "avx2_vnni"), ("AVX2", "avx2"), ("AVX", "avx"), ("SSE", "sse41"))


def aten_kernel(ops: list[str]) -> str:
    """The ATen operator that computed, from the operators a call ran (``torch.profiler``), e.g. ``aten::mm``."""
    names = [op.split("::")[-1] for op in ops]
    compute = [op for op, name in zip(ops, names) if name not in _ATEN_BOOKKEEPING and not _ATEN_ALLOCATION.match(name)]
    return compute[-1] if compute else "unknown operator"


def onednn_isa(verbose: str) -> str:
    """oneDNN's ISA in this process, from its verbose ``isa:`` line (``avx2``, ``avx512_core_vnni``, ...)."""
    line = next((x for x in verbose.splitlines() if ",isa:" in x), "")
    return next((short for key, short in _ONEDNN_ISAS if key in line), "unknown isa")


def low_precision_kernel(torch, call, name: str, dtype: str) -> tuple[str, str]:
    """(the library's name, the kernel family) of an int8 or bf16 reference, from one call with oneDNN's
    verbose output on and the ATen operators it ran.

    oneDNN's ``gemm_api`` (``torch._int_mm``) names no implementation: it is named ``gemm_api:<isa>`` with its
    data types; an int8 kernel on an ISA without VNNI is marked ``int16-saturating`` (see the module docs);
    a call that ran no oneDNN primitive is named by its ATen operator (PyTorch's own kernel), and FBGEMM,
    which has no verbose output, by its instruction set.
    """
    with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        verbose = _capture_stdout(call)
    isa = onednn_isa(verbose)
    kernel = onednn_kernel(verbose)
    if "FBGEMM" in name:
        fbgemm_isa = os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS", "")
        kernel = f"quantized::conv2d fbgemm:{fbgemm_isa.lower() or 'native isa'}"
        saturating = fbgemm_isa in ("AVX2", "AVX512")  # FBGEMM without VNNI: vpmaddubsw
    elif kernel.startswith("not oneDNN"):
        with torch.profiler.profile() as profile:
            call()
        kernel = f"not oneDNN: {aten_kernel([event.name for event in profile.events()])} (PyTorch's own kernel)"
        name = name.replace(" oneDNN", "")
        saturating = False
    else:
        if kernel.startswith("gemm_api"):
            types = re.findall(r"(?:src|wei|dst)_(\w+?)::", verbose)
            kernel = f"gemm_api:{isa} {''.join(types[:3])}" + kernel[len("gemm_api"):].rstrip()
        saturating = "vnni" not in isa and "amx" not in isa
    if dtype == "int8" and saturating:
        kernel += ", int16-saturating (no VNNI)"
    return name, kernel


def _torch_output(workload: Workload, out) -> Any:
    """The output as a NumPy array in the workload's own layout."""
    out = out.to_dense() if getattr(out, "is_mkldnn", False) else out
    array = out.contiguous().numpy()
    return workload.from_canonical_output(array) if isinstance(workload, Conv2d) else array


def _torch_call(torch, workload: Workload, library: str, layout: str, inputs):
    """The call to time and the library's name (weights prepared here, once, when pre-packed)."""
    version = torch.__version__.split("+")[0]
    if isinstance(workload, Conv2d):
        data, kernel = (torch.from_numpy(a) for a in workload.canonical_inputs(*inputs))
        stride, padding = [workload.stride] * 2, [workload.padding] * 2
        if library == "torch":
            if layout == "NHWC":
                data = data.contiguous(memory_format=torch.channels_last)
                kernel = kernel.contiguous(memory_format=torch.channels_last)
            return (lambda: torch.nn.functional.conv2d(data, kernel, stride=workload.stride,
                                                       padding=workload.padding)), f"torch {version}"
        data = data.contiguous(memory_format=torch.channels_last)
        packed = torch._C._nn.mkldnn_reorder_conv2d_weight(kernel.to_mkldnn(), padding, stride, [1, 1], 1,
                                                           list(data.shape))
        return (lambda: torch.ops.mkldnn._convolution_pointwise(data, packed, None, padding, stride, [1, 1], 1,
                                                                "none", [], "")), f"torch {version} oneDNN"
    a, b = (torch.from_numpy(x) for x in inputs)
    if library == "torch":
        return (lambda: torch.mm(a, b)), f"torch {version} MKL"
    weight = b.t().contiguous()  # linear layers keep weights as [out features, in features]
    if library == "mkl":
        packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, workload.M)
        return (lambda: torch.ops.mkl._mkl_linear(a, packed, weight, None, workload.M)), f"torch {version} MKL"
    if layout == "pre-packed":
        weight = torch.ops.mkldnn._reorder_linear_weight(weight, workload.M)
    return (lambda: torch.ops.mkldnn._linear_pointwise(a, weight, None, "none", [], "")), f"torch {version} oneDNN"


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
    dtype = {"float32": torch.float32, "float16": torch.float16, "bf16": torch.bfloat16}[workload.dtype]
    # NumPy has no bf16 torch understands: go through fp32 (exact, the values are bf16 already).
    a, b = (torch.from_numpy(x.astype("float32")).to(device=device, dtype=dtype) for x in inputs)
    version = torch.__version__.split("+")[0]
    with torch.no_grad():
        if isinstance(workload, Conv2d):
            if layout == "NHWC":
                a = a.contiguous(memory_format=torch.channels_last)
                b = b.contiguous(memory_format=torch.channels_last)
            kernel = f"cuDNN {torch.backends.cudnn.version()}"

            def call():
                return torch.nn.functional.conv2d(a, b, stride=workload.stride, padding=workload.padding)
        else:
            kernel = "cuBLAS"

            def call():
                return torch.mm(a, b)

            if dtype != torch.float32:
                try:
                    torch.mm(a, b, out_dtype=torch.float32)

                    def call():
                        return torch.mm(a, b, out_dtype=torch.float32)
                except (TypeError, RuntimeError):
                    kernel += f" ({workload.dtype} output)"
        if dtype != torch.float32 and isinstance(workload, Conv2d):
            kernel += f" ({workload.dtype} output)"
        if tf32:
            kernel += " TF32"
        out = call().float().contiguous().cpu().numpy()
        flush = torch.empty(2 * torch.cuda.get_device_properties(device).L2_cache_size, dtype=torch.uint8,
                            device=device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        replays: dict[int, Any] = {}  # calls per sample -> the replay of a CUDA graph of them (None: eager)

        def replay_of(number: int):
            # Timed as tensorgym's own kernels are (GpuSession.time_launches): the calls captured once in a CUDA
            # graph and replayed, so PyTorch's host work per call (as long as a short kernel) is not timed.
            if number not in replays:
                try:
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        call()  # capture wants a warm-up off the default stream
                    torch.cuda.current_stream().wait_stream(side)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        for _ in range(number):
                            call()
                    replays[number] = graph.replay
                except RuntimeError:
                    replays[number] = None
            return replays[number]

        def time_samples(number: int, repeat: int) -> list[float]:
            samples = []
            replay = replay_of(number)
            for _ in range(repeat):
                flush.zero_()  # cold L2, as for tensorgym's kernels
                start.record()
                if replay is None:
                    for _ in range(number):
                        call()
                else:
                    replay()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) / 1e3 / number)
            return samples

        clocks = GpuClocks(0)
        first = protocol.first_call(lambda: (call(), torch.cuda.synchronize()))
        timing = protocol.run(first, time_samples)
        state = clocks.read()
        state["graph_timed"] = float(all(replay is not None for replay in replays.values()))
    median, cv = summarize_samples(timing.samples)
    return {"library": f"torch {version} {kernel}", "layout": layout, "backend": library, "latency_s": median,
            "latency_cv": cv, "samples": tuple(timing.samples), "gflops": workload.gflops(median),
            "max_rel_error": relative_error(out, reference), "kernel": kernel, "contention": timing.contention,
            "device_state": tuple(sorted(state.items()))}
