"""How the ``tiles`` space's configs become kernels on the LLVM CPU target (see :mod:`.space` for the sketch).

:class:`TilesBuilder` schedules the SSRSRS loop nest of a config with TVM's
``s_tir`` schedule primitives; for a packed NCHW conv2d it computes the NCHWc
nest, with the packing stages (:func:`packed_te_func`) scheduled in parallel, and
with ``packing="weights"`` its kernels take the weights packed by a cached
pre-pass outside the timed region (:func:`packed_weights`).
"""

from __future__ import annotations

import numpy as np

from ...config import Config
from ...workloads import Conv2d, Workload
from ..builder import KernelBuilder
from .tiling import REDUCTION_LEVELS, SPATIAL_LEVELS


class TilesBuilder(KernelBuilder):
    """Schedules the configs of a :class:`~.space.TilesSpace` (CPU)."""

    def apply(self, config: Config):
        """The SSRSRS schedule of ``config`` (see :mod:`.space`), packing stages included."""
        import tvm

        space = self.space
        space.check(config)
        func = packed_te_func(space.nest, self.workload, space.packing) if space.packing else self.workload.te_func()
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
        block = sch.get_sblock(_main_block(self.workload))
        split = {}
        handles = dict(zip((lp.name for lp in space.nest.loops), sch.get_loops(block)))
        for lp in space.loops:
            split[lp.name] = sch.split(handles[lp.name], list(config[lp.name]))
        spatial = [lp.name for lp in space.loops if lp.kind == "spatial"]
        reduction = [lp.name for lp in space.loops if lp.kind == "reduction"]
        level = lambda names, i: [split[n][i] for n in names]  # noqa: E731
        s0, s1, s2, s3 = (level(spatial, i) for i in range(SPATIAL_LEVELS))
        r0, r1 = (level(reduction, i) for i in range(REDUCTION_LEVELS))
        sch.reorder(*s0, *s1, *r0, *s2, *r1, *s3)
        if config["cache_write"]:
            local = sch.cache_write(block, 0, "global")
            sch.reverse_compute_at(local, s1[-1], preserve_unit_loops=True)
            sch.vectorize(sch.get_loops(local)[-1])
        outer = sch.fuse(*s0)
        sch.parallel(outer)
        sch.vectorize(s3[-1])
        if config["unroll"]:
            sch.annotate(outer, "pragma_auto_unroll_max_step", int(config["unroll"]))
            sch.annotate(outer, "pragma_unroll_explicit", 1)
        if space.packing:
            _schedule_packing(sch)
        elif getattr(self.workload, "padding", 0):
            _schedule_pad(sch)
        sch.decompose_reduction(block, r0[0])
        return sch.mod

    def kernel_arguments(self, config: Config, inputs):
        """With ``packing="weights"`` the weights arrive packed by the cached pre-pass (:func:`packed_weights`)."""
        if self.space.packing != "weights":
            return super().kernel_arguments(config, inputs)
        return [inputs[0], packed_weights(self.space.nest, inputs[1]),
                np.zeros(self.workload.output_shape, dtype=self.workload.dtype)]


def packed_weights(nest: Conv2d, kernel: np.ndarray) -> np.ndarray:
    """The weights pre-pass: OIHW weights in ``nest``'s blocked layout (OIhw16i16o, OIhw8i8o), computed once
    and cached."""
    key = (nest, kernel.shape, kernel.tobytes())
    if key not in _PACKED:
        _PACKED.clear()  # one layer at a time
        packed = nest.layout_inputs(np.zeros(nest.canonical().input_shapes[0], dtype="float32"), kernel)[1]
        packed.setflags(write=False)
        _PACKED[key] = packed
    return _PACKED[key]


_PACKED: dict = {}


def packed_te_func(nest: Conv2d, workload: Conv2d, packing: str):
    """The NCHW conv2d computed as ``nest`` (its NCHWc form): pack (and pad) the input, pack the weights (unless
    they come packed), convolve with a block of output channels innermost, unpack to NCHW. Stages: dpack, kpack,
    conv, unpack."""
    import tvm
    from tvm import te

    b, wl, p, st = nest.channel_block, workload, workload.padding, workload.stride
    data = te.placeholder(wl.input_shapes[0], wl.dtype, name="data")
    dpack = te.compute(
        (wl.N, wl.C // b, wl.H + 2 * p, wl.W + 2 * p, b),
        lambda n, cb, h, w, ci: tvm.tirx.if_then_else(
            tvm.tirx.all(h >= p, h < wl.H + p, w >= p, w < wl.W + p), data[n, cb * b + ci, h - p, w - p],
            tvm.tirx.const(0.0, wl.dtype)),
        name="dpack")
    if packing == "weights":
        kernel = kpack = te.placeholder(nest.input_shapes[1], wl.dtype, name="kernel_packed")
    else:
        kernel = te.placeholder(wl.input_shapes[1], wl.dtype, name="kernel")
        kpack = te.compute(nest.input_shapes[1],
                           lambda fo, cb, r, s, ci, fi: kernel[fo * b + fi, cb * b + ci, r, s], name="kpack")
    rco = te.reduce_axis((0, wl.C // b), name="rco")
    ry, rx = te.reduce_axis((0, wl.R), name="ry"), te.reduce_axis((0, wl.S), name="rx")
    rci = te.reduce_axis((0, b), name="rci")
    conv = te.compute(
        nest.output_shape,
        lambda n, fo, y, x, fi: te.sum(dpack[n, rco, y * st + ry, x * st + rx, rci] * kpack[fo, rco, ry, rx, rci, fi],
                                       axis=[rco, ry, rx, rci]),
        name="conv")
    out = te.compute(wl.output_shape, lambda n, f, y, x: conv[n, f // b, y, x, f % b], name="unpack")
    return te.create_prim_func([data, kernel, out])


def _schedule_packing(sch) -> None:
    """Packing stages in parallel: dpack over (n, c/16, h) and kpack over (f/16, c/16), 16 lanes vectorised;
    the unpack over (n, f), vectorised along x."""
    for name, fused in (("dpack", 3), ("kpack", 2), ("unpack", 2)):
        try:
            block = sch.get_sblock(name)
        except Exception:  # noqa: BLE001 - kpack is absent when the weights arrive packed
            continue
        loops = sch.get_loops(block)
        sch.parallel(sch.fuse(*loops[:fused]))
        sch.vectorize(loops[-1])


def _main_block(workload: Workload) -> str:
    return {"conv2d": "conv", "matmul": "C"}[workload.op]


def _schedule_pad(sch) -> None:
    """Run the materialised pad stage of a conv in parallel over (n, c), vectorised along w."""
    loops = sch.get_loops(sch.get_sblock("pad"))
    sch.parallel(sch.fuse(loops[0], loops[1]))
    sch.vectorize(loops[-1])
