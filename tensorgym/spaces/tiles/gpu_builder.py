"""How the GPU ``tiles`` space's configs become CUDA kernels (see :mod:`.gpu_space` for the sketch and limits).

:class:`GpuTilesBuilder` schedules Ansor's SSSRRSRS sketch with TVM, then has TVM
generate the kernel's CUDA source, which the CUDA runner's build task compiles
with nvcc (:meth:`GpuTilesBuilder.cuda_kernel`: the source and its launch).
"""

from __future__ import annotations

import re

from ...config import Config
from ...cuda.kernel import CudaKernel
from ...cuda.nvcc import TVM_FLAGS
from ..base import SpaceError
from ..builder import KernelBuilder


class GpuTilesBuilder(KernelBuilder):
    """Schedules the configs of a :class:`~.gpu_space.GpuTilesSpace` and generates their CUDA kernels."""

    def apply(self, config: Config):
        """The scheduled IRModule (Ansor's SSSRRSRS sketch; see the module docs)."""
        import tvm

        space = self.space
        space.check(config)
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": self.workload.te_func()}))
        block = sch.get_sblock(_MAIN_BLOCK[self.workload.op])
        split = {lp.name: sch.split(loop, list(config[lp.name])) for lp, loop in zip(space.loops, sch.get_loops(block))}
        s = [[split[n][level] for n in space.spatial] for level in range(space.spatial_levels)]
        r = [[split[n][level] for n in space.reduction] for level in range(space.reduction_levels)]
        sch.reorder(*s[0], *s[1], *s[2], *r[0], *r[1], *s[3], *r[2], *s[4])
        threads = space.resources(config)["threads"]

        local = sch.cache_write(block, 0, "local")  # the accumulators live in registers
        bx, vt, tx = sch.fuse(*s[0]), sch.fuse(*s[1]), sch.fuse(*s[2])
        sch.bind(bx, "blockIdx.x")
        sch.bind(vt, "vthread.x")
        sch.bind(tx, "threadIdx.x")
        sch.reverse_compute_at(local, tx, preserve_unit_loops=True)

        scope = space.shared_scope(config)
        for index in range(len(sch.get(block).reads)):  # every input -> shared memory, at R0
            shared = sch.cache_read(block, index, scope)
            sch.compute_at(shared, r[0][-1], preserve_unit_loops=True)
            copy = sch.fuse(*sch.get_loops(shared)[3 + len(space.reduction):])  # below bx, vthread, tx and R0
            _, thread = sch.split(copy, [None, threads])
            sch.bind(thread, "threadIdx.x")
        if getattr(self.workload, "padding", 0):
            sch.compute_inline(sch.get_sblock("pad"))  # after cache_read: the zero fill lands in the fetch
        if config["unroll"]:
            sch.annotate(bx, "pragma_auto_unroll_max_step", int(config["unroll"]))
            sch.annotate(bx, "pragma_unroll_explicit", 1)
        sch.decompose_reduction(block, r[0][0])
        return sch.mod

    def cuda_kernel(self, config: Config) -> CudaKernel:
        """The CUDA source TVM generates for ``config``, with its launch configuration (needs TVM)."""
        import tvm
        from tvm.tirx.build import codegen_build, split_host_device_mods

        mod = self.apply(config)
        buffers = [p.name for p in mod["main"].params]  # kernel_arguments order
        target = self.target.tvm_target()
        mod = tvm.tirx.transform.BindTarget(target.with_host(target.host))(mod)
        pipeline, _, finalize_device = tvm.tirx.get_default_tir_pipeline(target)
        _, device_mods = split_host_device_mods(pipeline(mod))
        if len(device_mods) != 1:
            raise SpaceError(f"expected one CUDA module, TVM made {len(device_mods)}")
        ((device_target, device_mod),) = device_mods.items()
        device_mod = finalize_device()(device_mod)
        if len(device_mod.functions) != 1:
            raise SpaceError(f"expected one kernel, TVM made {len(device_mod.functions)}")
        ((symbol, kernel),) = device_mod.functions.items()
        source = codegen_build(device_mod, device_target).inspect_source()
        grid, block = _launch_extents(kernel.script())
        allocated = {str(k): int(v) for k, v in
                     dict(tvm.s_tir.analysis.calculate_allocated_bytes(kernel).get("main", {})).items()}
        # TVM orders a kernel's pointer parameters by buffer name ("A_ptr", "B_ptr", "C_ptr"): map them back.
        arguments = []
        for param in kernel.params:
            name = re.sub(r"_ptr$", "", param.name)
            if name not in buffers:
                raise SpaceError(f"kernel parameter {param.name!r} is not one of the buffers {buffers}")
            arguments.append(buffers.index(name))
        major, minor = self.target.device.compute_capability
        return CudaKernel(
            source=source, output="cubin", gencode=(f"arch=compute_{major}{minor},code=sm_{major}{minor}",),
            flags=TVM_FLAGS, entry=symbol.name_hint, grid=grid, block=block,
            dynamic_shared_bytes=allocated.get("shared.dyn", 0), arguments=tuple(arguments),
        )


_MAIN_BLOCK = {"conv2d": "conv", "matmul": "C"}


def _launch_extents(script: str) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block) from the ``T.launch_thread`` statements of a lowered kernel (static shapes)."""
    extents = dict(re.findall(r'T\.launch_thread\("((?:blockIdx|threadIdx)\.[xyz])", (\d+)\)', script))
    grid = tuple(int(extents.get(f"blockIdx.{axis}", 1)) for axis in "xyz")
    block = tuple(int(extents.get(f"threadIdx.{axis}", 1)) for axis in "xyz")
    return grid, block  # type: ignore[return-value]
