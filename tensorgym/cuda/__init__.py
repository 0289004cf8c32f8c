"""NVIDIA GPUs without TVM's CUDA runtime: the driver (through ``cuda-bindings``), NVML and nvcc.

* :mod:`.driver`: a CUDA context on one GPU: memory, modules, launches, CUDA events,
  L2 flushes, and the device's clocks through NVML. Importing it touches no driver;
  :class:`~.driver.GpuUnavailable` says what is missing when a GPU cannot be used.
* :mod:`.nvcc`: nvcc found, its version, and compilation to cubins and shared libraries
  (cached by content), with ptxas' register and spill report.
* :mod:`.kernel`: :class:`~.kernel.CudaKernel`, what a CUDA space hands the builder: source,
  launch configuration, argument order.

TVM generates the CUDA source (its CUDA code generator needs no GPU); tensorgym compiles it
with nvcc and launches it itself, so it controls the timing (events, L2 flush between
samples) and keeps a faulting kernel in a process of its own.
"""
