"""Tensorized kernels of a mapped nest: the TE computation and its schedule (runs in build workers; needs TVM).

The computation (:func:`mapped_prim_func`) is written directly in the mapped
form (the candidate's fused and padded axes, the packed layouts of
:mod:`.nest`), with the intrinsic's axes innermost, so that after the
schedule's splits ``sch.tensorize`` matches the intrinsic's description:

* ``W_pack``: the weights in ``[lanes blocks, *T, Rfp / group, lanes, group]``,
  zero where the padding is (a kernel argument when the space is pre-packed);
* ``A_pack``: the activations packed along the fused reduction (a dot
  product's ``[N, C?, OH|Hp, OW|Wp, Rfp]``; a tile's ``[*spatial, *T, Ifp,
  Rfp]``; a matmul's zero-padded ``A``, or ``A`` itself), zero on the padding
  ring and past the reduction, every index clamped so that a speculated load
  stays in bounds;
* ``Acc``: the accumulators, blocked so that each call's outputs are
  contiguous (dot: ``[..., lanes]``; tile: ``[..., rows, lanes]``);
* ``Out``: the output in its canonical layout, cropped from ``Acc``.

The schedule (:func:`schedule`) tiles the residual loops as the ``tiles``
space does (``S0 S1 R0 S2 R1 S3``, every tile a divisor; ``S0`` fused and
parallel, ``S3`` the register block, unrolled), puts the intrinsic's loops
innermost, computes the write-back ``Out`` at ``S1`` (``cache_write=1``) or
once per parallel task (0) (a tile conv's fused rows do not cover whole output
rows, so there it is a separate parallel pass), runs the packing stages as
parallel passes before it, splits the init of the reduction off
(``decompose_reduction``; a tile's init zeroes the accumulator tile and loads
the AMX tile configuration in the thread) and tensorizes.
"""

from __future__ import annotations

from ...config import Config
from .nest import MappedNest
from .tir import init_name, register_tensor_intrinsics

TVM_TYPES = {"int8": ("uint8", "int8", "int32"), "bf16": ("bfloat16", "bfloat16", "float32"),
             "float32": ("float32", "float32", "float32")}


def _cast(value, dtype: str):
    return value if value.dtype == dtype else value.astype(dtype)


def _widen(value, dtype: str, packed: str):
    """A packed element in the packed operand's type (``dtype`` -> ``packed``: uint8/int8 -> int16 for vpmaddwd)."""
    return value if packed == dtype else value.astype(packed)


def _decode(index, loops: tuple[str, ...], extents: dict[str, int]) -> dict:
    """A fused index -> the value of each of its loops (row-major over ``loops``)."""
    values, rest = {}, index
    for i, loop in enumerate(reversed(loops)):
        values[loop] = rest % extents[loop] if i < len(loops) - 1 else rest
        rest = rest // extents[loop]
    return values


def _fuse(values: dict, loops: tuple[str, ...], extents: dict[str, int]):
    """The fused index of ``loops`` (row-major) from their values."""
    index = 0
    for loop in loops:
        index = index * extents[loop] + values[loop]
    return index


# -- the computation ----------------------------------------------------------------------------------------
def mapped_prim_func(nest: MappedNest, prepacked: bool):
    """The ``PrimFunc`` (data, weights [packed if ``prepacked``], output) of a mapped nest."""
    from tvm import te, tirx

    wl, intr = nest.workload, nest.intrinsic
    a_type, b_type, c_type = TVM_TYPES[wl.dtype]
    # the packed operands' types: the intrinsic's where it widens them in packing (int16 for vpmaddwd)
    a_packed, w_packed = intr.packed_activations or a_type, intr.packed_weights or b_type
    e = nest.extents
    lanes, group, depth, rows = intr.lanes, intr.group, intr.depth, intr.rows
    zero_a, zero_b = tirx.const(0, a_type), tirx.const(0, b_type)

    data = te.placeholder(wl.input_shapes[0], a_type, name="data")
    # -- weights ---------------------------------------------------------------------------------
    if prepacked:
        weights = w_pack = te.placeholder(nest.weight_shape, w_packed, name="W_pack")
    else:
        weights = te.placeholder(wl.input_shapes[1], b_type, name="weights")
        w_pack = te.compute(nest.weight_shape,
                            lambda *idx: _widen(_weight_value(nest, weights, idx, zero_b), b_type, w_packed),
                            name="W_pack")
    # -- activations -------------------------------------------------------------------------------
    shape = nest.activation_shape
    if shape is None:
        a_pack = data
    else:
        a_pack = te.compute(shape, lambda *idx: _widen(_activation_value(nest, data, idx, zero_a), a_type, a_packed),
                            name="A_pack")

    # -- accumulation -----------------------------------------------------------------------------
    outer_red = {r: te.reduce_axis((0, e[r]), name=r) for r in nest.outer_reductions}
    blocks = te.reduce_axis((0, nest.reduction_padded // depth), name=nest.names["reduction"])
    inner = te.reduce_axis((0, depth), name="ri") if depth > 1 else None
    axes = [*outer_red.values(), blocks] + ([inner] if inner is not None else [])
    t_idx = [outer_red[r] for r in nest.outer_reductions]

    def fused_r():
        return blocks * depth + inner if inner is not None else blocks

    def weight_at(lane_block, lane):
        # one group row per dot call; depth / group consecutive rows per tile call
        if inner is None:
            return w_pack[(lane_block, *t_idx, blocks, lane, 0)]
        return w_pack[(lane_block, *t_idx, blocks * (depth // group) + inner // group, lane, inner % group)]

    if nest.tile:
        def acc_body(*idx):
            *outer, m_block, f_block, mi, fi = idx
            a = a_pack[(*outer, *t_idx, m_block * rows + mi, fused_r())] if nest.conv else \
                a_pack[(m_block * rows + mi, fused_r())]
            return te.sum(_cast(a, c_type) * _cast(weight_at(f_block, fi), c_type), axis=axes)

        acc_shape = (*(e[s] for s in nest.outer_spatial), nest.rows_padded // rows, nest.lanes_padded // lanes,
                     rows, lanes)
    elif nest.conv:
        def acc_body(n, f_block, y, x, fi):
            index = [n]
            if "rc" not in nest.fused_reduction:
                index.append(outer_red["rc"])
            st = wl.stride
            index.append(y if "ry" in nest.fused_reduction else y * st + outer_red["ry"])
            index.append(x if "rx" in nest.fused_reduction else x * st + outer_red["rx"])
            a = a_pack[(*index, fused_r())]
            return te.sum(_cast(a, c_type) * _cast(weight_at(f_block, fi), c_type), axis=axes)

        acc_shape = (wl.N, nest.lanes_padded // lanes, wl.OH, wl.OW, lanes)
    else:
        def acc_body(i, j_block, ji):
            a = a_pack[i, fused_r()]
            return te.sum(_cast(a, c_type) * _cast(weight_at(j_block, ji), c_type), axis=axes)

        acc_shape = (wl.M, nest.lanes_padded // lanes, lanes)
    acc = te.compute(acc_shape, acc_body, name="Acc")

    # -- write-back in the canonical layout ---------------------------------------------------------------
    if nest.conv and nest.tile:
        def out_body(n, f, y, x):
            values = {"n": n, "y": y, "x": x}
            m = _fuse(values, nest.fused_rows, e)
            outer = [values[s] for s in nest.outer_spatial]
            return acc[(*outer, m // rows, f // lanes, m % rows, f % lanes)]
    elif nest.conv:
        def out_body(n, f, y, x):
            return acc[n, f // lanes, y, x, f % lanes]
    elif nest.tile:
        def out_body(i, j):
            return acc[i // rows, j // lanes, i % rows, j % lanes]
    else:
        def out_body(i, j):
            return acc[i, j // lanes, j % lanes]
    out = te.compute(wl.output_shape, out_body, name="Out")
    return te.create_prim_func([data, weights, out])


def _weight_value(nest: MappedNest, weights, idx, zero):
    """``W_pack[lane block, *T, group row, lane, in-group]`` from the canonical weights (OIHW or [K, N])."""
    from tvm import tirx

    intr = nest.intrinsic
    e = nest.extents
    lane_block, *rest = idx
    t_values = dict(zip(nest.outer_reductions, rest[:len(nest.outer_reductions)]))
    group_row, lane, in_group = rest[len(nest.outer_reductions):]
    out_channel = lane_block * intr.lanes + lane
    fused = group_row * intr.group + in_group
    valid = [out_channel < nest.lane_extent, fused < nest.reduction_extent]
    out_channel = tirx.min(out_channel, nest.lane_extent - 1)
    fused = tirx.min(fused, nest.reduction_extent - 1)
    if not nest.conv:  # B[k, j]
        return tirx.if_then_else(tirx.all(*valid), weights[fused, out_channel], zero)
    values = {**t_values, **_decode(fused, nest.fused_reduction, e)}
    return tirx.if_then_else(tirx.all(*valid), weights[out_channel, values["rc"], values["ry"], values["rx"]], zero)


def _activation_value(nest: MappedNest, data, idx, zero):
    """One element of ``A_pack`` (see the module docs) from the canonical activations (NCHW or [M, K])."""
    from tvm import tirx

    wl = nest.workload
    e = nest.extents
    *outer, fused = idx
    checks = []
    if nest.reduction_padded != nest.reduction_extent:
        checks.append(fused < nest.reduction_extent)
        fused = tirx.min(fused, nest.reduction_extent - 1)
    if not nest.conv:  # a zero-padded A[M, K]
        (row,) = outer
        if nest.rows_padded != wl.M and nest.tile:
            checks.append(row < wl.M)
            row = tirx.min(row, wl.M - 1)
        return tirx.if_then_else(tirx.all(*checks), data[row, fused], zero) if checks else data[row, fused]
    values = _decode(fused, nest.fused_reduction, e)
    if nest.tile:
        *spatial, rows_index = outer
        values.update(zip(nest.outer_spatial, spatial[:len(nest.outer_spatial)]))
        values.update(zip(nest.outer_reductions, spatial[len(nest.outer_spatial):]))
        if nest.rows_padded != nest.rows_extent:
            checks.append(rows_index < nest.rows_extent)
            rows_index = tirx.min(rows_index, nest.rows_extent - 1)
        values.update(_decode(rows_index, nest.fused_rows, e))
        h = values["y"] * wl.stride + values["ry"]  # in the zero-padded image
        w = values["x"] * wl.stride + values["rx"]
    else:
        n, *rest = outer
        values["n"] = n
        if "rc" not in nest.fused_reduction:
            values["rc"] = rest.pop(0)
        h_index, w_index = rest
        h = h_index * wl.stride + values["ry"] if "ry" in nest.fused_reduction else h_index
        w = w_index * wl.stride + values["rx"] if "rx" in nest.fused_reduction else w_index
    p = wl.padding
    checks += [h >= p, h < wl.H + p, w >= p, w < wl.W + p]
    hi = tirx.max(tirx.min(h - p, wl.H - 1), 0)
    wi = tirx.max(tirx.min(w - p, wl.W - 1), 0)
    c = tirx.min(values["rc"], wl.C - 1)
    n = tirx.min(values["n"], wl.N - 1)
    return tirx.if_then_else(tirx.all(*checks), data[n, c, hi, wi], zero)


# -- the schedule -------------------------------------------------------------------------------------------
def build_module(nest: MappedNest, tiles: Config, prepacked: bool):
    """The scheduled, tensorized ``IRModule`` of a mapped nest with the tile knobs of ``tiles``."""
    import tvm

    register_tensor_intrinsics()
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": mapped_prim_func(nest, prepacked).with_attr(
        "global_symbol", "main")}))
    schedule(sch, nest, tiles, prepacked)
    return sch.mod


def schedule(sch, nest: MappedNest, tiles: Config, prepacked: bool) -> None:
    """Tile, order, parallelise and tensorize the ``Acc`` block of ``sch`` (see the module docs)."""
    intr = nest.intrinsic
    acc = sch.get_sblock("Acc")
    loops = sch.get_loops(acc)
    n_spatial, n_intr = len(nest.spatial), (2 if nest.tile else 1)
    spatial_loops = loops[:n_spatial]
    intr_spatial = loops[n_spatial:n_spatial + n_intr]
    rest = loops[n_spatial + n_intr:]
    reduction_loops = rest[:len(nest.reductions)]
    intr_reduction = rest[len(nest.reductions):]

    levels_s = [sch.split(loop, list(tiles[lp.name])) for lp, loop in zip(nest.spatial, spatial_loops)]
    levels_r = [sch.split(loop, list(tiles[lp.name])) for lp, loop in zip(nest.reductions, reduction_loops)]
    s0, s1, s2, s3 = ([split[level] for split in levels_s] for level in range(4))
    r0, r1 = ([split[level] for split in levels_r] for level in range(2))
    sch.reorder(*s0, *s1, *r0, *s2, *r1, *s3, *intr_spatial, *intr_reduction)

    out = sch.get_sblock("Out")
    outer = sch.fuse(*s0)
    sch.parallel(outer)
    if nest.conv and nest.tile:
        _parallel_pass(sch, out)
    else:
        sch.reverse_compute_at(out, s1[-1] if tiles["cache_write"] else outer, preserve_unit_loops=True)
        if not nest.conv:  # rows of Acc blocks: vectorise by whole blocks (contiguous in Acc and in the output)
            _, inner = sch.split(sch.get_loops(out)[-1], [None, intr.lanes])
            sch.vectorize(inner)
    if tiles["unroll"]:
        sch.annotate(outer, "pragma_auto_unroll_max_step", int(tiles["unroll"]))
        sch.annotate(outer, "pragma_unroll_explicit", 1)

    _schedule_packing(sch, nest, prepacked)
    init = sch.decompose_reduction(acc, r0[0])
    if nest.tile:
        sch.tensorize(sch.get_loops(init)[-2], init_name(intr))
    else:
        sch.vectorize(sch.get_loops(init)[-1])
    sch.tensorize(intr_spatial[0], intr.tvm_name)
    for loop in s3:
        sch.unroll(loop)


def _parallel_pass(sch, block, tasks: int = 16) -> None:
    """Run a stage as its own pass, in parallel over its leading loops (fused until they give ``tasks``)."""
    loops = sch.get_loops(block)
    extents = [int(sch.get(loop).extent) for loop in loops]
    count, product = 1, extents[0]
    while count < len(loops) - 1 and product < tasks:
        product *= extents[count]
        count += 1
    sch.parallel(sch.fuse(*loops[:count]) if count > 1 else loops[0])


def _schedule_packing(sch, nest: MappedNest, prepacked: bool) -> None:
    """The packing stages as parallel passes; the fused reduction loop split by its loops' extents when exact.

    Splitting the fused loop by the extents of the loops it fuses (e.g. ``r`` -> ``(c, ry, rx)``) turns the
    per-element div/mod of the index decode into plain loop variables.
    """
    if nest.activation_shape is not None:
        block = sch.get_sblock("A_pack")
        loops = sch.get_loops(block)
        if nest.conv and nest.reduction_padded == nest.reduction_extent and len(nest.fused_reduction) > 1:
            radices = [nest.extents[r] for r in nest.fused_reduction][1:]
            sch.split(loops[-1], [None, *radices])
        if nest.conv and nest.tile and nest.rows_padded == nest.rows_extent and len(nest.fused_rows) > 1:
            radices = [nest.extents[r] for r in nest.fused_rows][1:]
            sch.split(loops[-2], [None, *radices])
        _parallel_pass(sch, block)
    if not prepacked:
        _parallel_pass(sch, sch.get_sblock("W_pack"))
