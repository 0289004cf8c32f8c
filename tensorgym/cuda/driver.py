"""One GPU through the CUDA driver API (``cuda-bindings``) and NVML (``nvidia-ml-py``).

Importing this module loads neither library. :func:`describe_gpu` reads a device's
properties (no context is created); :class:`GpuSession` owns the primary context of one
device, a stream, and what kernels need: device memory, loaded modules, launches, CUDA
events, and an L2 flush. :class:`GpuClocks` reads the clocks NVML reports.

Errors: :class:`GpuUnavailable` when no GPU can be used (package, driver or device
missing); :class:`CudaError` when a driver call fails. A kernel fault (illegal address,
misaligned access) leaves the context unusable: :class:`CudaError` then has ``sticky``
set, and the process holding the session must be replaced.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

# Driver errors after which the context is lost (CUDA's "sticky" errors).
_STICKY_ERRORS = {
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ECC_UNCORRECTABLE", "CUDA_ERROR_CONTEXT_IS_DESTROYED",
}
_FLUSH_FACTOR = 2  # the L2 flush overwrites this many times the L2 size


class GpuUnavailable(RuntimeError):
    """No GPU can be used from this process; the message says what is missing."""


class CudaError(RuntimeError):
    """A CUDA driver call failed. ``sticky``: the context is lost (a kernel faulted)."""

    def __init__(self, call: str, code: str, message: str):
        super().__init__(f"{call} failed: {code} ({message})")
        self.code = code
        self.sticky = code in _STICKY_ERRORS


def _driver():
    """The ``cuda.bindings.driver`` module, initialised; :class:`GpuUnavailable` says what is missing."""
    try:
        from cuda.bindings import driver
    except ImportError:
        raise GpuUnavailable("the cuda-bindings package is not installed (pip install 'tensorgym[cuda]')") from None
    try:
        (err,) = driver.cuInit(0)
    except Exception:  # noqa: BLE001 - cuda-bindings raises its own loader errors without libcuda
        raise GpuUnavailable("no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded)") from None
    if err != driver.CUresult.CUDA_SUCCESS:
        raise GpuUnavailable(f"the NVIDIA driver cannot be initialised ({err.name}): no GPU visible to this process?")
    return driver


def _checked(call: str, result: Any) -> Any:
    """A cuda-bindings result ``(err, *values)``: raise :class:`CudaError` or return the value(s)."""
    from cuda.bindings import driver

    err, *values = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, text = driver.cuGetErrorString(err)
        raise CudaError(call, err.name, text.decode() if text else "no description")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def describe_gpu(ordinal: int = 0) -> dict[str, Any]:
    """The properties of GPU ``ordinal`` (the fields of :class:`tensorgym.target.CudaDevice` but ``toolkit``).

    Reads device attributes (no context is created) and, where NVML is available, the
    driver version and the maximum clocks. Raises :class:`GpuUnavailable`.
    """
    cu = _driver()
    count = _checked("cuDeviceGetCount", cu.cuDeviceGetCount())
    if count <= ordinal:
        raise GpuUnavailable(f"no CUDA device {ordinal} (this process sees {count})")
    device = _checked("cuDeviceGet", cu.cuDeviceGet(ordinal))
    attr = cu.CUdevice_attribute

    def get(name: str) -> int:
        return int(_checked("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(getattr(attr, name), device)))

    name = _checked("cuDeviceGetName", cu.cuDeviceGetName(256, device))
    name = name.split(b"\0")[0].decode() if isinstance(name, bytes) else str(name)
    memory = int(_checked("cuDeviceTotalMem", cu.cuDeviceTotalMem(device)))
    driver_version = int(_checked("cuDriverGetVersion", cu.cuDriverGetVersion()))
    properties = {
        "name": name,
        "compute_capability": (get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                               get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")),
        "num_sms": get("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        "l2_bytes": get("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
        "memory_bytes": memory,
        "max_sm_clock_mhz": get("CU_DEVICE_ATTRIBUTE_CLOCK_RATE") // 1000,
        "max_memory_clock_mhz": get("CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE") // 1000,
        "max_threads_per_block": get("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
        "max_threads_per_sm": get("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"),
        "max_blocks_per_sm": get("CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR"),
        "max_shared_memory_per_block": get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
        "max_shared_memory_per_block_optin": get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        "shared_memory_per_sm": get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        "registers_per_block": get("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"),
        "registers_per_sm": get("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR"),
        "warp_size": get("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
        "driver": f"CUDA {driver_version // 1000}.{driver_version % 1000 // 10}",
    }
    clocks = GpuClocks(ordinal)
    if clocks.available:
        properties["driver"] = f"{clocks.driver_version()} ({properties['driver']})"
        properties["max_sm_clock_mhz"] = clocks.max_sm_mhz() or properties["max_sm_clock_mhz"]
        properties["max_memory_clock_mhz"] = clocks.max_memory_mhz() or properties["max_memory_clock_mhz"]
    return properties


class GpuClocks:
    """What NVML says about a GPU's clocks and condition; every reading is empty where NVML is not available."""

    def __init__(self, ordinal: int = 0):
        self._nvml = None
        self._handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = self._find(pynvml, ordinal)
            self._nvml = pynvml
        except Exception:  # noqa: BLE001 - no NVML library, no permission, no device: no readings
            self._nvml = None

    @staticmethod
    def _find(pynvml, ordinal: int):
        """NVML's handle of CUDA device ``ordinal``, matched by PCI bus id (NVML numbers devices its own way)."""
        try:
            from cuda.bindings import driver as cu

            device = _checked("cuDeviceGet", cu.cuDeviceGet(ordinal))
            bus_id = _checked("cuDeviceGetPCIBusId", cu.cuDeviceGetPCIBusId(32, device))
            bus_id = bus_id.split(b"\0")[0] if isinstance(bus_id, bytes) else str(bus_id).encode()
            return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        except Exception:  # noqa: BLE001 - fall back to NVML's own numbering
            return pynvml.nvmlDeviceGetHandleByIndex(ordinal)

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def driver_version(self) -> str:
        if not self.available:
            return ""
        version = self._nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)

    def max_sm_mhz(self) -> int:
        if not self.available:
            return 0
        return int(self._nvml.nvmlDeviceGetMaxClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))

    def max_memory_mhz(self) -> int:
        if not self.available:
            return 0
        return int(self._nvml.nvmlDeviceGetMaxClockInfo(self._handle, self._nvml.NVML_CLOCK_MEM))

    def read(self) -> dict[str, float]:
        """The SM and memory clocks (MHz), temperature (C), power (W) and clock-event reasons (bit mask) now."""
        if not self.available:
            return {}
        nvml, handle = self._nvml, self._handle
        out: dict[str, float] = {}
        readers = {
            "sm_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "memory_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "power_w": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "clock_event_reasons": lambda: _clock_event_reasons(nvml, handle),
        }
        for key, reader in readers.items():
            try:
                out[key] = float(reader())
            except Exception:  # noqa: BLE001 - a reading the driver refuses (permissions, old GPU) is left out
                continue
        return out


def _clock_event_reasons(nvml, handle) -> int:
    """Why the clocks are below their maximum (NVML bit mask; 0: they are not held back)."""
    if hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons"):
        return nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    return nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)


class GpuSession:
    """The primary context of one GPU, a stream, and the operations kernels need.

    Use one session per process; :meth:`close` releases the context. Device pointers are
    plain ``int`` addresses, valid in this context (also for the CUDA runtime, which uses
    the same primary context, e.g. in a CUTLASS library loaded with :mod:`ctypes`).
    """

    def __init__(self, ordinal: int = 0):
        cu = _driver()
        self.cu = cu
        self.ordinal = ordinal
        self.device = _checked("cuDeviceGet", cu.cuDeviceGet(ordinal))
        self.context = _checked("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(self.device))
        _checked("cuCtxSetCurrent", cu.cuCtxSetCurrent(self.context))
        self.stream = _checked("cuStreamCreate", cu.cuStreamCreate(0))
        self.l2_bytes = int(_checked("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, self.device)))
        self._start = _checked("cuEventCreate", cu.cuEventCreate(0))
        self._end = _checked("cuEventCreate", cu.cuEventCreate(0))
        self._flush_bytes = max(_FLUSH_FACTOR * self.l2_bytes, 1 << 20)
        self._flush_buffer = self.alloc(self._flush_bytes)
        self._graphs: dict[tuple[int, int], tuple[Any, Any]] = {}  # (launch id, calls) -> (launch, graph exec)
        self.eager_timings = 0  # launches (and call counts) that could not be captured: timed as plain launches
        self.clocks = GpuClocks(ordinal)

    @property
    def stream_handle(self) -> int:
        """The stream as an address (a ``cudaStream_t`` for code that uses the CUDA runtime)."""
        return int(self.stream)

    # -- memory ---------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        return int(_checked("cuMemAlloc", self.cu.cuMemAlloc(max(int(nbytes), 1))))

    def free(self, pointer: int) -> None:
        _checked("cuMemFree", self.cu.cuMemFree(pointer))

    def upload(self, array: np.ndarray) -> int:
        """A new device buffer holding ``array``'s bytes."""
        array = np.ascontiguousarray(array)
        pointer = self.alloc(array.nbytes)
        _checked("cuMemcpyHtoD", self.cu.cuMemcpyHtoD(pointer, array.ctypes.data, array.nbytes))
        return pointer

    def download(self, pointer: int, like: np.ndarray) -> np.ndarray:
        """A host copy of the device buffer at ``pointer``, with ``like``'s shape and dtype."""
        out = np.empty(like.shape, like.dtype)
        self.synchronize()
        _checked("cuMemcpyDtoH", self.cu.cuMemcpyDtoH(out.ctypes.data, pointer, out.nbytes))
        return out

    def synchronize(self) -> None:
        _checked("cuStreamSynchronize", self.cu.cuStreamSynchronize(self.stream))

    # -- kernels ------------------------------------------------------------------------------
    def load(self, cubin: bytes, name: str, dynamic_shared_bytes: int = 0) -> tuple[Any, Any]:
        """Load a cubin and return ``(module, function)``; opts the function in to its dynamic shared memory."""
        module = _checked("cuModuleLoadData", self.cu.cuModuleLoadData(cubin))
        function = _checked("cuModuleGetFunction", self.cu.cuModuleGetFunction(module, name.encode()))
        if dynamic_shared_bytes > 48 * 1024:  # above 48 KiB a kernel must opt in
            _checked("cuFuncSetAttribute", self.cu.cuFuncSetAttribute(
                function, self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                int(dynamic_shared_bytes)))
        return module, function

    def unload(self, module: Any) -> None:
        _checked("cuModuleUnload", self.cu.cuModuleUnload(module))

    def launcher(self, function: Any, grid: Sequence[int], block: Sequence[int], dynamic_shared_bytes: int,
                 pointers: Sequence[int]):
        """A callable that enqueues one launch of ``function`` on the stream with pointer arguments."""
        values = np.array([int(p) for p in pointers], dtype=np.uint64)
        # kernelParams: an array of addresses, each pointing at one argument's value.
        params = np.array([values.ctypes.data + 8 * i for i in range(len(values))], dtype=np.uint64)
        cu, stream = self.cu, self.stream
        gx, gy, gz = (int(g) for g in grid)
        bx, by, bz = (int(b) for b in block)
        shared = int(dynamic_shared_bytes)
        address = params.ctypes.data

        def launch() -> None:
            _ = (values, params)  # the argument values and their addresses must outlive every launch
            _checked("cuLaunchKernel", cu.cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream, address, 0))

        return launch

    # -- timing ---------------------------------------------------------------------------------
    def flush_l2(self) -> None:
        """Overwrite twice the L2's size on the stream, so the next kernel starts with a cold L2."""
        _checked("cuMemsetD8Async", self.cu.cuMemsetD8Async(self._flush_buffer, 0, self._flush_bytes, self.stream))

    def time_launches(self, launch, number: int, *, flush: bool = True) -> float:
        """Seconds per call of ``launch`` over ``number`` back-to-back calls, by CUDA events.

        The calls are captured once into a CUDA graph and replayed: the host then enqueues one
        graph launch, not ``number`` kernel launches whose host cost (several microseconds each,
        as long as a short kernel) would be timed. A launch that cannot be captured is timed as
        plain launches (:attr:`eager_timings` counts them). With ``flush``, the L2 is flushed
        before the calls (the flush also keeps the GPU busy while the host enqueues them).
        """
        cu = self.cu
        graph = self._graph(launch, number)
        if flush:
            self.flush_l2()
        _checked("cuEventRecord", cu.cuEventRecord(self._start, self.stream))
        if graph is None:
            for _ in range(number):
                launch()
        else:
            _checked("cuGraphLaunch", cu.cuGraphLaunch(graph, self.stream))
        _checked("cuEventRecord", cu.cuEventRecord(self._end, self.stream))
        _checked("cuEventSynchronize", cu.cuEventSynchronize(self._end))
        milliseconds = _checked("cuEventElapsedTime", cu.cuEventElapsedTime(self._start, self._end))
        return float(milliseconds) / 1e3 / number

    def _graph(self, launch, number: int) -> Any | None:
        """The executable graph of ``number`` calls of ``launch`` (captured once per launch and count)."""
        key = (id(launch), number)
        if key in self._graphs:
            return self._graphs[key][1]
        cu = self.cu
        _checked("cuStreamBeginCapture", cu.cuStreamBeginCapture(
            self.stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
        captured = True
        try:
            for _ in range(number):
                launch()
        except Exception:  # noqa: BLE001 - the launch refused capture; it is timed as plain launches
            captured = False
        graph = cu.cuStreamEndCapture(self.stream)
        executable = None
        if captured and graph[0] == cu.CUresult.CUDA_SUCCESS:
            done = cu.cuGraphInstantiate(graph[1], 0)
            cu.cuGraphDestroy(graph[1])
            if done[0] == cu.CUresult.CUDA_SUCCESS:
                executable = done[1]
        elif graph[0] == cu.CUresult.CUDA_SUCCESS and graph[1] is not None:
            cu.cuGraphDestroy(graph[1])
        if executable is None:
            self.eager_timings += 1
            self.synchronize()  # a failed capture leaves no work behind; a kernel fault shows here
        self._graphs[key] = (launch, executable)  # the launch is kept so that its id stays its own
        return executable

    def release_graphs(self) -> None:
        """Destroy the captured graphs (before the kernels they launch are unloaded)."""
        for _, executable in self._graphs.values():
            if executable is not None:
                self.cu.cuGraphExecDestroy(executable)
        self._graphs.clear()

    def close(self) -> None:
        cu = self.cu
        try:
            self.release_graphs()
        except Exception:  # noqa: BLE001 - a lost context cannot destroy its graphs; the process ends anyway
            pass
        for call in (lambda: cu.cuMemFree(self._flush_buffer), lambda: cu.cuEventDestroy(self._start),
                     lambda: cu.cuEventDestroy(self._end), lambda: cu.cuStreamDestroy(self.stream),
                     lambda: cu.cuDevicePrimaryCtxRelease(self.device)):
            try:
                call()
            except Exception:  # noqa: BLE001 - releasing a lost context may fail; the process ends anyway
                pass


def load_library(path: str) -> ctypes.CDLL:
    """A shared library with a C interface (a compiled CUTLASS kernel), loaded privately (``RTLD_LOCAL``)."""
    return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)


def unload_library(library: ctypes.CDLL) -> None:
    """Close a library loaded with :func:`load_library` (its kernels must not run any more)."""
    import _ctypes

    _ctypes.dlclose(library._handle)
