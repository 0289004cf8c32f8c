"""How the ``cutlass`` space's configs become kernels: CUTLASS operators emitted by ``cutlass_library``.

:class:`CutlassBuilder` instantiates the CUTLASS template of a config of a
:class:`~.space.CutlassSpace` with its C interface (:meth:`CutlassBuilder.cuda_kernel`),
which the CUDA runner's build task compiles into a shared library. A conv runs
in CUTLASS's NHWC/KRSC layouts: the builder repacks the NCHW/OIHW inputs outside
the timed region and turns the NHWC output back for the check, minus the known
bias of a ``bias_relu`` layer.
"""

from __future__ import annotations

import numpy as np

from ...config import Config
from ...cuda.kernel import CudaKernel
from ...workloads import Conv2d
from ..base import SpaceError
from ..builder import KernelBuilder
from . import emit
from .templates import FAMILY_2X


class CutlassBuilder(KernelBuilder):
    """Emits the CUTLASS operators of a :class:`~.space.CutlassSpace`'s configs (see the module docs)."""

    def kernel_arguments(self, config: Config, inputs) -> list[np.ndarray]:
        """A and B (a conv's activations NHWC and weights KRSC), the bias of a ``bias_relu`` layer, the output."""
        wl = self.workload
        if isinstance(wl, Conv2d):
            data, weights = inputs
            arrays = [np.ascontiguousarray(x.transpose(0, 2, 3, 1)) for x in (data, weights)]  # NHWC, KRSC
            output = np.zeros((wl.N, wl.OH, wl.OW, wl.F), dtype=wl.output_dtype)
        else:
            arrays = [np.ascontiguousarray(a) for a in inputs]
            output = np.zeros(wl.output_shape, dtype=wl.output_dtype)
        if config["epilogue"] != emit.EPILOGUE_NONE:
            arrays.append(self.space.bias())
        return [*arrays, output]

    def canonical_output(self, config: Config, arguments) -> np.ndarray:
        out = np.asarray(arguments[-1], dtype=np.float64)
        if config["epilogue"] != emit.EPILOGUE_NONE:
            out = out - self.space.bias()
        if isinstance(self.workload, Conv2d):
            out = out.transpose(0, 3, 1, 2)
        return out

    def apply(self, config: Config):
        raise SpaceError("the cutlass space's kernels are CUTLASS templates, not TVM schedules: see cuda_kernel()")

    def cuda_kernel(self, config: Config) -> CudaKernel:
        """The CUTLASS operator of ``config`` and its C interface, to compile into a shared library."""
        space = self.space
        space.check(config)
        tile, wl = space.tile(config), self.workload
        common = dict(alignment=config["alignment"], output_alignment=space.output_alignment,
                      swizzle=config["swizzle"], epilogue=config["epilogue"])
        if isinstance(wl, Conv2d):
            source = emit.conv2d_source(tile, wl.dtype, N=wl.N, H=wl.H, W=wl.W, C=wl.C, F=wl.F, R=wl.R, S=wl.S,
                                        pad=wl.padding, stride=wl.stride, **common)
        else:
            source = emit.gemm_source(tile, wl.dtype, M=wl.M, N=wl.N, K=wl.K, **common)
        if tile.family == FAMILY_2X:
            major, minor = self.target.device.compute_capability
            # 2.x kernels are compiled from sm_80 PTX into the target's own machine code.
            gencode = (f"arch=compute_80,code=sm_{major}{minor}",)
        else:
            gencode = ("arch=compute_90a,code=sm_90a",)  # wgmma and TMA need the arch-specific target
        return CudaKernel(source=source, output="library", gencode=gencode, flags=emit.NVCC_FLAGS,
                          include_dirs=emit.include_dirs(), runtime=(config["split_k"],))
