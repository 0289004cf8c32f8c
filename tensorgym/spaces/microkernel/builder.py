"""How the ``microkernel`` space's configs become kernels: a :class:`~.codegen.Plan`, its TIR, its layouts.

:class:`MicrokernelBuilder` turns a config of a :class:`~.space.MicrokernelSpace`
into the codegen's :class:`~.codegen.Plan` (the microkernel's sizes, the
λ-combination, the reuse loop, the tile stack and its parallel loops), generates
its TIR (:func:`~.codegen.build_prim_func`), and gives the runner the kernel's
arguments in the layouts the space's ``packing`` asks for: the workload's own
(``"in-kernel"``), the weights packed once by a cached pre-pass (``"weights"``), or
every tensor packed outside the timed call (``"all"``), with the output unpacked
back for the check.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...config import Config
from ...workloads import Conv2d
from ..builder import KernelBuilder
from .codegen import (
    IN_KERNEL, WEIGHTS_PACKED, Plan, build_prim_func, pack_conv2d, pack_conv2d_weights, pack_matmul_weights,
    unpack_conv2d,
)


class MicrokernelBuilder(KernelBuilder):
    """Generates the kernels of a :class:`~.space.MicrokernelSpace`'s configs (see the module docs)."""

    def plan(self, config: Config) -> Plan:
        """What the codegen emits for ``config``: sizes, combination, reuse, tile stack, parallel loops, packing."""
        space = self.space
        space.check(config)
        selection = space.selection_of(config)
        stack = space.stack_of(config)
        mk = selection.kernel
        sizes = tuple((dim, getattr(mk, field_name)) for dim, field_name in space.size_of.items())
        p = config["parallel"]  # the parallel loops are the p outermost (see MicrokernelSpace.parallel_run)
        return Plan(space.op, sizes, selection.combo, config["reuse"], tuple(stack), (0, p), space.lanes,
                    space.packing)

    def apply(self, config: Config):
        import tvm

        return tvm.IRModule({"main": build_prim_func(self.workload, self.plan(config))})

    def kernel_arguments(self, config: Config, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        space = self.space
        wl, V = self.workload, space.lanes
        if space.packing == IN_KERNEL:
            return super().kernel_arguments(config, inputs)
        if space.packing == WEIGHTS_PACKED:  # the pre-pass: weights packed once, cached
            if isinstance(wl, Conv2d):
                packed = pack_conv2d_weights(wl, V, inputs[1])
            else:
                packed = pack_matmul_weights(wl, V, inputs[1])
            return [inputs[0], packed, np.zeros(wl.output_shape, dtype=wl.dtype)]
        if isinstance(wl, Conv2d):
            ip, kp = pack_conv2d(wl, V, *inputs)
            return [ip, kp, np.zeros((wl.N, space.extents["f"], wl.OH, wl.OW, V), dtype="float32")]
        a, b = inputs
        nv = space.extents["j"]
        out_cols = wl.N if wl.N % V == 0 else nv * V
        return [np.ascontiguousarray(a), pack_matmul_weights(wl, V, b), np.zeros((wl.M, out_cols), dtype="float32")]

    def canonical_output(self, config: Config, arguments: Sequence[np.ndarray]) -> np.ndarray:
        out = arguments[-1]
        if not self.space.prepacked:
            return out
        if isinstance(self.workload, Conv2d):
            return unpack_conv2d(self.workload, out)
        return out[:, : self.workload.N]
