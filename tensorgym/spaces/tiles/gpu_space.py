"""The ``tiles`` space on a CUDA target: Ansor's GPU sketch with seed 000's hops and the device's limits.

Every spatial loop is split into 5 levels ``(grid, vthread, threads, reg1, reg2)`` and
every reduction loop into 3 ``(k0, k1, k2)``, outermost first, each level a divisor and
the levels' product the loop's extent (:class:`~.gpu_features.GPUTiling`'s convention).
The loop nest is Ansor's CUDA sketch ``SSSRRSRS``::

    S0  spatial level 0 of every loop, fused          -> blockIdx.x
    S1  level 1, fused                                -> vthread (unrolled into each thread)
    S2  level 2, fused                                -> threadIdx.x
      R0  reduction level 0                           <- each input's tile is copied to shared memory
                                                         here, by all threads (cooperative fetch)
        R1  S3  R2  S4                                <- the thread's register tile: out.local += ...
      out.local -> out                                <- written once, after the whole reduction

(:class:`~.gpu_builder.GpuTilesBuilder` schedules it and has TVM generate the CUDA source.)

A conv's zero padding is inlined into the shared-memory fetch (the one place a branch is
cheap on a GPU), so a config is one kernel. fp16/bf16 inputs are fetched and kept in
shared memory as they are and summed in fp32 registers. Two scalar knobs:
``unroll``, Ansor's GPU ``auto_unroll_max_step`` choices (0, 16, 64, 512, 1024), and
nothing else (thread binding follows from the tiles).

**Hops** are seed 000's: levels 1..4 of a spatial loop and 1..2 of a reduction loop move
in the loop's divisor list, level 0 is derived (see :class:`~.space.TilesSpace`).

**Limits** (:meth:`GpuTilesSpace.limit_violations`, from the target's
:class:`~tensorgym.target.CudaDevice`); masks, samples and hops stay within them:

* threads per block (S2's product) between a warp (32, seed 000's pruning) and the
  device's maximum (1024);
* virtual threads (S1's product) at most ``max_vthread`` (Ansor's default, 8): they are
  unrolled into every thread;
* shared memory of one stage (every input's footprint on the block tile, at the inputs'
  dtype) at most the device's opt-in limit per block (227 KiB on an H100); a kernel above
  the static 48 KiB uses dynamic shared memory;
* registers: the thread's register tile (fp32 accumulators plus the input fragments of
  one step, seed 000's ``totalReg``) plus 20 for addresses and indices, at most 255 per
  thread and, times the threads, at most the registers of a block (65536). Beyond that
  ptxas would cap registers at ``__launch_bounds__`` and spill.

**Features**: seed 000's seven analytical GPU features
(:mod:`~tensorgym.spaces.tiles.gpu_features`), and generic ones (log tile sizes and
per-level products) for Ansor-style models.
"""

from __future__ import annotations

import dataclasses
from math import log2, prod

import numpy as np

from ...checks import integer
from ...config import Config
from ...target import Target
from ...workloads import Conv2d, Workload, numpy_dtype
from ..base import SpaceError
from .features import footprint
from .gpu_builder import GpuTilesBuilder
from .gpu_features import (
    GPU_FEATURE_NAMES, GPUHardware, GPUTiling, gpu_features, normalised_gpu_features, scaled_gpu_features,
)
from .space import MAX_INNERMOST, TilesSpace

GPU_SPATIAL_LEVELS = 5  # grid, vthread, threads, reg1, reg2
GPU_REDUCTION_LEVELS = 3  # k0, k1, k2
GPU_UNROLL_CHOICES = (0, 16, 64, 512, 1024)  # Ansor's GPU auto-unroll max steps
MAX_VTHREAD = 8  # Ansor's max_vthread_extent
REGISTER_OVERHEAD = 20  # registers per thread beyond the tile (addresses, indices): seed 000's artifact
_SPATIAL_NAMES = ("grid", "vthread", "threads", "reg1", "reg2")
_REDUCTION_NAMES = ("k0", "k1", "k2")


class GpuTilesSpace(TilesSpace):
    """Ansor's GPU multi-level tiling (SSSRRSRS) of a conv2d or matmul on a CUDA target (see the module docs).

    Built by ``make_space("tiles", workload, cuda_target)`` (and so by the envs with
    ``target="cuda"``). Its configs look like ``{"i": [16, 2, 8, 4, 1], "j": [...], "k": [96, 8, 1],
    "unroll": 64}``.
    """

    builder_class = GpuTilesBuilder
    feature_names = GPU_FEATURE_NAMES
    supported_dtypes = ("float32", "float16", "bf16")
    target_kind = "cuda"
    spatial_levels = GPU_SPATIAL_LEVELS
    reduction_levels = GPU_REDUCTION_LEVELS

    def __init__(self, workload: Workload, target: Target, *, unroll_choices: tuple[int, ...] = GPU_UNROLL_CHOICES,
                 max_innermost: int = MAX_INNERMOST, max_vthread: int = MAX_VTHREAD):
        if target.kind != "cuda" or target.device is None:
            raise SpaceError(f"the GPU tiles space needs a CUDA target with a device description; got "
                             f"{target.label} (tensorgym.target.cuda_target('h100') describes one)")
        if isinstance(workload, Conv2d) and workload.layout != "NCHW":
            raise SpaceError(f"the GPU tiles space tiles NCHW conv2d workloads; {workload.label} is {workload.layout}")
        self.max_vthread = integer("max_vthread", max_vthread, minimum=1)
        self.element_bytes = numpy_dtype(workload.element_types[0]).itemsize
        self.hardware = dataclasses.replace(GPUHardware.from_target(target), element_bytes=self.element_bytes)
        super().__init__(workload, target, unroll_choices=unroll_choices, max_innermost=max_innermost)
        self.spatial = [lp.name for lp in self.loops if lp.kind == "spatial"]
        self.reduction = [lp.name for lp in self.loops if lp.kind == "reduction"]
        self.generic_feature_names = self._generic_feature_names()

    def __getstate__(self):
        return {**super().__getstate__(), "max_vthread": self.max_vthread}

    def __setstate__(self, state):
        self.__init__(state["workload"], state["target"], unroll_choices=state["unroll_choices"],
                      max_innermost=state["max_innermost"], max_vthread=state["max_vthread"])

    def _dtype_refusal(self) -> str:
        return (f"the GPU tiles space tunes {', '.join(self.supported_dtypes)} kernels; {self.workload.label} is "
                f"{self.workload.dtype}")

    def scalar_knob_choices(self) -> dict[str, tuple[int, ...]]:
        return {"unroll": self.unroll_choices}

    # -- the device's limits ------------------------------------------------------------
    def resources(self, config: Config) -> dict[str, int]:
        """What a config's kernel needs: threads and virtual threads per block, blocks, shared memory
        bytes of one stage, and registers per thread (the estimate the limits use)."""
        tiles = {lp.name: config[lp.name] for lp in self.loops}
        spatial = [tiles[n] for n in self.spatial]
        shared_ext = {n: prod(tiles[n][1:]) for n in self.spatial} | {n: tiles[n][1] * tiles[n][2]
                                                                     for n in self.reduction}
        register_ext = {n: tiles[n][1] * tiles[n][3] * tiles[n][4] for n in self.spatial} | dict.fromkeys(
            self.reduction, 1)
        inputs = list(self.workload.accesses)[:-1]
        accesses = self.workload.accesses
        register_tile = prod(register_ext[n] for n in self.spatial) + sum(
            footprint(accesses[x], register_ext) for x in inputs)
        return {
            "threads": prod(t[2] for t in spatial),
            "vthreads": prod(t[1] for t in spatial),
            "blocks": prod(t[0] for t in spatial),
            "shared_bytes": self.element_bytes * sum(footprint(accesses[x], shared_ext) for x in inputs),
            "registers": register_tile + REGISTER_OVERHEAD,
        }

    def limit_violations(self, config: Config) -> list[str]:
        """The limits of the target's GPU that ``config`` exceeds (see the module docs)."""
        gpu = self.target.device
        spatial = [config[n] for n in self.spatial]
        threads = prod(t[2] for t in spatial)
        vthreads = prod(t[1] for t in spatial)
        problems = []
        if not gpu.warp_size <= threads <= gpu.max_threads_per_block:
            problems.append(f"{threads} threads per block (allowed: {gpu.warp_size} to {gpu.max_threads_per_block})")
        if vthreads > self.max_vthread:
            problems.append(f"{vthreads} virtual threads (at most {self.max_vthread})")
        if problems:  # cheap checks first: most random tilings fail them
            return problems
        need = self.resources(config)
        if need["shared_bytes"] > gpu.max_shared_memory_per_block_optin:
            problems.append(f"{need['shared_bytes']} B of shared memory per block "
                            f"(at most {gpu.max_shared_memory_per_block_optin})")
        if need["registers"] > gpu.max_registers_per_thread:
            problems.append(f"~{need['registers']} registers per thread (at most {gpu.max_registers_per_thread})")
        elif need["registers"] * threads > gpu.registers_per_block:
            problems.append(f"~{need['registers']} registers x {threads} threads > {gpu.registers_per_block} "
                            f"registers per block")
        return problems

    # -- features ------------------------------------------------------------------------------
    def gpu_tiling(self, config: Config) -> GPUTiling:
        """``config``'s tiles as seed 000's features read them."""
        self.check(config)
        return GPUTiling(self.workload, {lp.name: config[lp.name] for lp in self.loops})

    def features(self, config: Config) -> np.ndarray:
        """Seed 000's seven GPU features (:data:`GPU_FEATURE_NAMES`) for the target's GPU."""
        return gpu_features(self.gpu_tiling(config), self.hardware)

    def scaled_features(self, config: Config) -> np.ndarray:
        return scaled_gpu_features(self.features(config))

    def normalised_features(self, config: Config) -> np.ndarray:
        return normalised_gpu_features(self.features(config))

    def _generic_feature_names(self) -> tuple[str, ...]:
        names = [f"log2_{lp.name}.{level}" for lp in self.loops if lp.extent > 1
                 for level in range(self.levels[lp.name])]
        names += [f"log2_{level}" for level in (*_SPATIAL_NAMES, *_REDUCTION_NAMES)]
        return tuple(names + ["log2_register_tile", "log2_shared_tile", "log2_unroll"])

    def generic_features(self, config: Config) -> np.ndarray:
        """Machine-independent features: every tile size, each level's product over the loops (the
        block, vthread, thread, register and reduction extents), the register and shared tiles, unroll;
        all as log2."""
        self.check(config)
        out = [log2(t) for lp in self.loops if lp.extent > 1 for t in config[lp.name]]
        out += [log2(prod(config[n][level] for n in self.spatial)) for level in range(GPU_SPATIAL_LEVELS)]
        out += [log2(prod(config[n][level] for n in self.reduction)) for level in range(GPU_REDUCTION_LEVELS)]
        register = prod(config[n][1] * config[n][3] * config[n][4] for n in self.spatial)
        shared = self.resources(config)["shared_bytes"] / self.element_bytes
        out += [log2(register), log2(max(shared, 1.0)), log2(1 + config["unroll"])]
        return np.asarray(out, dtype=np.float64)

    def info(self, config: Config) -> dict:
        """What the config's kernel needs of the GPU (:meth:`resources`) and where its inputs are staged."""
        self.check(config)
        return {**self.resources(config), "shared_scope": self.shared_scope(config)}

    # -- where the inputs are staged (the builder's schedule follows it) ----------------------------
    def shared_scope(self, config: Config) -> str:
        """``"shared"`` (static arrays) up to the device's static limit, ``"shared.dyn"`` above it."""
        static = self.target.device.max_shared_memory_per_block
        return "shared" if self.resources(config)["shared_bytes"] <= static else "shared.dyn"


TilesSpace.register_variant(GpuTilesSpace)
