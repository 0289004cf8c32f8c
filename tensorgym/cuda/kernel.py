"""What a CUDA space hands the builder: a kernel's source and how to run it.

Two kinds of kernel (``output``):

``"cubin"``
    one ``__global__`` function (``entry``) of a TVM-generated source, launched directly
    through the driver with ``grid``, ``block`` and ``dynamic_shared_bytes``; its
    parameters are device pointers, parameter ``i`` pointing at array ``arguments[i]`` of
    the space's ``kernel_arguments`` (TVM orders them by buffer name, not as the function).
``"library"``
    a shared library with a C interface (a CUTLASS operator and its host code), called
    through :mod:`ctypes`:

    * ``int tg_prepare(void* const* pointers, const long long* runtime, unsigned long long* workspace_bytes)``:
      bind the device pointers (``kernel_arguments`` order) and the ``runtime`` integers
      (split-K slices ...), check the problem can run, and say how much workspace it needs;
    * ``int tg_initialize(void* workspace, void* stream)``; ``int tg_run(void* stream)``:
      enqueue one call on the stream;
    * ``const char* tg_last_error()``. Each returns 0 on success.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class CudaKernel:
    """The CUDA source of one config and how to launch what nvcc makes of it (see the module docs)."""

    source: str
    output: Literal["cubin", "library"]
    gencode: tuple[str, ...]  # nvcc -gencode values, e.g. "arch=compute_90,code=sm_90"
    flags: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    entry: str = ""  # cubin: the kernel's symbol
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    dynamic_shared_bytes: int = 0
    arguments: tuple[int, ...] = ()  # cubin: the array each kernel parameter points at
    runtime: tuple[int, ...] = ()  # library: the integers passed to tg_prepare (not part of the binary)

    def manifest(self, path: str, resources: dict[str, Any]) -> dict[str, Any]:
        """What the runner needs to run the compiled file at ``path`` (JSON-serialisable)."""
        data = asdict(self)
        for key in ("source", "flags", "include_dirs", "gencode"):
            data.pop(key)
        return {**data, "path": path, "resources": resources}
