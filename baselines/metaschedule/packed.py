"""What MetaSchedule tunes for int8 and bf16 workloads: blocked layouts its dot-product rule can tensorize.

MetaSchedule auto-tensorizes with ``MultiLevelTilingWithIntrin``, which maps a
block's innermost loops onto an intrinsic but does not change buffer layouts:
the 4 (int8) or 2 (bf16) reduction elements of a dot product must already be
contiguous in both operands, and the 16 outputs too. So, as TVM's own graph
flows arrange with layout rewriting, the kernel MetaSchedule tunes takes

* conv2d: channels-last activations ``[N, H, W, Cp]`` (zero-padded inside the
  kernel), weights blocked ``[Fp / 16, R, S, Cp / g, 16, g]`` (``g`` = 4 int8, 2
  bf16), and writes channels-last outputs ``[N, OH, OW, Fp]``;
* matmul: ``A[M, Kp]``, ``B`` blocked ``[Np / 16, Kp / g, 16, g]``, ``C[M, Np]``;

with ``Cp, Kp`` rounded up to ``g`` and ``Fp, Np`` to 16 (zero channels). These
layout changes happen outside its timed kernel (:func:`kernel_arguments`,
:func:`canonical_output`), unlike the ``mapping`` space's default kernels, which
pack inside the timed call.

The intrinsic is tensorgym's (``tensorgym.vnni512``: AVX-512 VNNI ``vpdpbusd``;
``tensorgym.bf16dot512``: AVX512-BF16 ``vdpbf16ps``), named in MetaSchedule's
rules (:func:`space_generator`); TVM's stock ``dot_16x4_vnni`` fails LLVM 22's
verifier and is not used.
"""

from __future__ import annotations

import numpy as np

from tensorgym.spaces.mapping.intrinsics import INTRINSICS
from tensorgym.spaces.mapping.nest import round_up
from tensorgym.workloads import Conv2d, Workload

LANES = 16
INTRINSIC = {"int8": INTRINSICS["vnni512"], "bf16": INTRINSICS["bf16dot512"]}


def is_packed(workload: Workload) -> bool:
    """Whether MetaSchedule tunes the blocked formulation of ``workload`` (int8 and bf16)."""
    return workload.dtype in INTRINSIC


def _group(workload: Workload) -> int:
    return INTRINSIC[workload.dtype].group


def prim_func(workload: Workload):
    """The ``PrimFunc`` MetaSchedule tunes (float32: the workload's own)."""
    if not is_packed(workload):
        return workload.te_func()
    import tvm
    from tvm import te

    data_t, weight_t, out_t = workload.element_types
    g = _group(workload)
    if isinstance(workload, Conv2d):
        wl = workload
        cp, fp = round_up(wl.C, g), round_up(wl.F, LANES)
        data = te.placeholder((wl.N, wl.H, wl.W, cp), data_t, name="data")
        weights = te.placeholder((fp // LANES, wl.R, wl.S, cp // g, LANES, g), weight_t, name="weights")
        p, st = wl.padding, wl.stride
        pad = te.compute(
            (wl.N, wl.H + 2 * p, wl.W + 2 * p, cp),
            lambda n, h, w, c: tvm.tirx.if_then_else(tvm.tirx.all(h >= p, h < wl.H + p, w >= p, w < wl.W + p),
                                                     data[n, h - p, w - p, c], tvm.tirx.const(0, data_t)),
            name="pad")
        rc = te.reduce_axis((0, cp), name="rc")
        ry = te.reduce_axis((0, wl.R), name="ry")
        rx = te.reduce_axis((0, wl.S), name="rx")
        out = te.compute(
            (wl.N, wl.OH, wl.OW, fp),
            lambda n, y, x, f: te.sum(pad[n, y * st + ry, x * st + rx, rc].astype(out_t)
                                      * weights[f // LANES, ry, rx, rc // g, f % LANES, rc % g].astype(out_t),
                                      axis=[ry, rx, rc]),
            name="conv")
        return te.create_prim_func([data, weights, out])
    wl = workload
    kp, np_ = round_up(wl.K, g), round_up(wl.N, LANES)
    a = te.placeholder((wl.M, kp), data_t, name="A")
    b = te.placeholder((np_ // LANES, kp // g, LANES, g), weight_t, name="B")
    k = te.reduce_axis((0, kp), name="k")
    c = te.compute((wl.M, np_), lambda i, j: te.sum(
        a[i, k].astype(out_t) * b[j // LANES, k // g, j % LANES, k % g].astype(out_t), axis=k), name="C")
    return te.create_prim_func([a, b, c])


def kernel_arguments(workload: Workload, inputs) -> list[np.ndarray]:
    """The blocked kernel's arguments from the canonical inputs (see the module docs)."""
    data, weights = inputs
    g = _group(workload)
    _, _, out_t = workload.element_types
    if isinstance(workload, Conv2d):
        wl = workload
        cp, fp = round_up(wl.C, g), round_up(wl.F, LANES)
        nhwc = np.zeros((wl.N, wl.H, wl.W, cp), dtype=data.dtype)
        nhwc[..., :wl.C] = data.transpose(0, 2, 3, 1)
        blocked = np.zeros((fp, wl.R, wl.S, cp), dtype=weights.dtype)
        blocked[:wl.F, :, :, :wl.C] = weights.transpose(0, 2, 3, 1)
        blocked = blocked.reshape(fp // LANES, LANES, wl.R, wl.S, cp // g, g).transpose(0, 2, 3, 4, 1, 5)
        return [nhwc, np.ascontiguousarray(blocked), np.zeros((wl.N, wl.OH, wl.OW, fp), dtype=out_t)]
    wl = workload
    kp, np_ = round_up(wl.K, g), round_up(wl.N, LANES)
    a = np.zeros((wl.M, kp), dtype=data.dtype)
    a[:, :wl.K] = data
    b = np.zeros((np_, kp), dtype=weights.dtype)
    b[:wl.N, :wl.K] = weights.T
    b = b.reshape(np_ // LANES, LANES, kp // g, g).transpose(0, 2, 1, 3)
    return [a, np.ascontiguousarray(b), np.zeros((wl.M, np_), dtype=out_t)]


def canonical_output(workload: Workload, out: np.ndarray) -> np.ndarray:
    """The output in the workload's layout (NCHW, or ``[M, N]``) from the blocked kernel's."""
    if isinstance(workload, Conv2d):
        return out[..., :workload.F].transpose(0, 3, 1, 2)
    return out[:, :workload.N]


def space_generator(workload: Workload):
    """MetaSchedule's post-order-apply generator: its LLVM rules with ``MultiLevelTiling`` replaced by
    ``MultiLevelTilingWithIntrin`` on tensorgym's dot product, and ``RewriteTensorize`` added (needs TVM)."""
    from tvm.s_tir import meta_schedule as ms

    from tensorgym.spaces.mapping.tir import register_tensor_intrinsics

    register_tensor_intrinsics()
    intrinsic = INTRINSIC[workload.dtype].tvm_name
    rules = []
    for rule in ms.ScheduleRule.create("llvm"):
        if type(rule).__name__ == "MultiLevelTiling":
            rule = ms.schedule_rule.MultiLevelTilingWithIntrin(
                intrinsic, structure="SSRSRS", tile_binds=None, max_innermost_factor=64, vector_load_lens=None,
                reuse_read=None, reuse_write=ms.schedule_rule.ReuseType(req="may", levels=[1, 2], scope="global"))
        rules.append(rule)
    postprocs = [*ms.Postproc.create("llvm"), ms.postproc.RewriteTensorize(vectorize_init_loop=True)]
    return ms.space_generator.PostOrderApply(sch_rules=rules, postprocs=postprocs, mutator_probs="llvm")
