"""TIR generation for the ``microkernel`` space: packing stages, the tile nest, the λ-sequence and the microkernel.

The kernel is written directly as TIR with TVM's IR builder (the TVMScript
``T.*`` builder), the way seed 003's own generator writes C: one pass over the
loop specifiers, outermost first, with the microkernel as straight-line
vector code at the bottom. TVM lowers it and LLVM compiles it.

Why not ``s_tir`` schedule primitives (split/reorder/unroll/vectorize)? They
were tried first (on ResNet-50 R5), and they do not express this space in TVM 0.27:

* the microkernel keeps its output tile in vector registers across the reuse
  loop, while reduction tile loops (other levels of c, r, s) may sit anywhere
  *above* it, so the microkernel must load its accumulators from the output
  and store them back around the reuse loop (seed 003's microkernels do
  exactly this). ``cache_write`` can only place a register tile above every
  reduction loop. ``cache_inplace`` on the blockized microkernel emits
  unbound block variables (an InternalError at build), and ``read_at``/``write_at``
  reject the in-place accumulator. Without the register tile, R5 ran at
  25-100 GFLOP/s; with it, this generator reaches ~200 GFLOP/s;
* the λ-combination is a *sequence* of two loop nests sharing the loops
  above it, which is trivial to emit here (``loop_partition`` exists, but every
  partition then needs its own blockize/cache stage, which hits the first problem).

Layouts (k vectorised, seed 003 B.1):

* conv2d: input ``Ip[n][h][w][c]`` (NHWC, zero-padded; see :func:`channel_stride`), weights
  ``Kp[k/V][r][s][c][V]`` (the reuse loop on c reads consecutive vectors),
  output ``Op[n][k/V][h][w][V]`` (NCHWc). What the kernel packs itself depends
  on the workload's layout and the plan's ``packing``: an NHWC input without
  padding is read in place, an NHWC (with ``F % V == 0``) or NCHWc (with
  ``V == 16``) output is written in place, NCHW tensors are packed and unpacked;
  weights are packed in the kernel (``in-kernel``) or received packed
  (``weights``: a pre-pass packs them once, :func:`pack_conv2d_weights`);
  ``all`` receives and returns every tensor in the kernel's layouts;
* matmul: ``A[i][k]`` as given (broadcast along k), ``Bp[j/V][k][V]``, ``C[i][j]``
  written directly when ``N % V == 0`` (padded ``Cp[i][Np]`` otherwise).

Output channels (conv) or columns (matmul) that are not a multiple of the
vector width are zero-padded up to one (seed 003 does the same for Yolo9000-23).

Where a whole kernel loses the peak its microkernel reaches alone (calibration
times the microkernel on hot, pre-packed data), as ``bench/kernel_anatomy.py``
shows without timing anything:

* not in the microkernel's code: the hottest loop of the 28-accumulator
  ``vec2 h1 w14`` microkernel on ResNet-50 R5 is 28 FMAs, 14 broadcasts, 2
  weight loads and 5 loop instructions, with no spill; two FMA pipes need 14
  cycles for it, and its loads and instructions fit beside them;
* in the packing the kernel does itself: with NCHW tensors packed in the
  kernel, R5 moves 2.84 MB per call through its packing stages, twice the
  1.39 MB the convolution itself must read and write, in 3 more parallel
  regions (launches and barriers of the thread pool). The weights pre-pass
  leaves 1.67 MB, and an NHWC or NCHWc layer with the weights pre-pass 0.86 MB
  (the zero-padded input copy) in one more region; everything pre-packed, none;
* what remains: input and weights stream from L2 for every microkernel call
  (in calibration they stay in L1), and the reduction tile loops above the
  reuse loop load and store the accumulators once per trip.

The zero-padded input copy keeps every read in bounds, but the microkernel does
not multiply the taps that fall on its border: calls at the image's edges take a
body generated without them (:func:`border_cases`), as oneDNN does, as far as a
compile-time budget allows (:data:`BORDER_FMA_BUDGET`). On a 7x7 output with a
3x3 filter those taps are a fifth of the nominal work.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ...workloads import Conv2d, Matmul, Workload

LAMBDA = "λ"  # the stack entry of a λ-sequence
# What the kernel receives packed (the rest it packs itself, timed with it):
IN_KERNEL = "in-kernel"  # nothing: it takes the workload's tensors and packs inside
WEIGHTS_PACKED = "weights"  # the weights, packed once by a pre-pass (as frameworks do at load)
ALL_PACKED = "all"  # input, weights and output in the kernel's own layouts
PACKINGS = (IN_KERNEL, WEIGHTS_PACKED, ALL_PACKED)
REPEAT = "repeat"  # a stack loop that repeats the same work (microkernel benchmarks only)

# Roles of a workload's loops (seed 003, B.1 "Generalisation"): the vectorised
# dimension, the composition dimension (λ) and the reuse dimension.
ROLES = {
    "conv2d": {"vec": "f", "comp": "y", "reuse": "rc"},
    "matmul": {"vec": "j", "comp": "i", "reuse": "k"},
}


@dataclass(frozen=True)
class Plan:
    """A checked config of the microkernel space, resolved for code generation.

    ``sizes`` is the microkernel's extent per loop (the vector dimension in
    vectors; the composition dimension ``h1``). ``stack`` lists the tile loops
    outermost first, as ``(loop, trip count)``, with ``(LAMBDA, 1)`` for the
    λ-sequence. ``parallel`` is ``(first stack index, number of loops)`` fused
    into one parallel loop (count 0: sequential).
    """

    op: str
    sizes: tuple[tuple[str, int], ...]
    combo: tuple[int, int, int, int] | None
    reuse: int
    stack: tuple[tuple[str, int], ...]
    parallel: tuple[int, int]
    lanes: int
    packing: str = IN_KERNEL  # what the kernel packs itself (see PACKINGS)

    @property
    def prepacked(self) -> bool:
        """Input, weights and output all in the kernel's layouts, packed outside."""
        return self.packing == ALL_PACKED

    def size(self, dim: str) -> int:
        return dict(self.sizes).get(dim, 1)


def channel_stride(channels: int) -> int:
    """Elements between neighbouring pixels of the packed conv input.

    With ``channels * 4`` a multiple of 1 KiB, the pixels a microkernel
    broadcasts from (up to 16 along w) fall into 1-4 sets of the L1 cache and
    evict each other (measured: a 28-accumulator microkernel at 43 % of peak
    with C = 512); one extra 64-byte line per pixel spreads them over the sets.
    """
    return channels + 16 if (channels * 4) % 1024 == 0 else channels


def vector_blocks(extent: int, lanes: int) -> int:
    """Vectors needed to hold ``extent`` elements (the padded vector dimension)."""
    return -(-extent // lanes)


def transpose_vectors(rows: list, lanes: int) -> list:
    """The columns of a ``lanes x lanes`` block held as ``lanes`` row vectors (``lanes`` a power of 2).

    log2(lanes) rounds of perfect-shuffle interleaves, each a two-vector shuffle (one ``vpermt2ps``
    on AVX-512): 64 shuffles for 16x16, where one 16-input shuffle per column lowers to ~4x more.
    """
    from tvm import tirx

    half = lanes // 2
    lo = [tirx.const((k // 2) + (k % 2) * lanes, "int32") for k in range(lanes)]
    hi = [tirx.const(half + (k // 2) + (k % 2) * lanes, "int32") for k in range(lanes)]
    for _ in range(lanes.bit_length() - 1):
        new = [None] * lanes
        for i in range(half):
            pair = [rows[i], rows[i + half]]
            new[2 * i], new[2 * i + 1] = tirx.Shuffle(pair, lo), tirx.Shuffle(pair, hi)
        rows = new
    return rows


def pack_conv2d(wl: Conv2d, lanes: int, data: np.ndarray, kernel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The packed conv input (NHWC, zero-padded by ``wl.padding``, see :func:`channel_stride`) and weights
    (``[k/V][r][s][c][V]``, output channels zero-padded to whole vectors) from tensors in ``wl``'s layout."""
    data, kernel = wl.canonical_inputs(data, kernel)
    p = wl.padding
    ip = np.zeros((wl.N, wl.H + 2 * p, wl.W + 2 * p, channel_stride(wl.C)), dtype="float32")
    ip[:, p:p + wl.H, p:p + wl.W, :wl.C] = data.transpose(0, 2, 3, 1)
    return ip, _pack_weights(wl.canonical(), lanes, kernel)


def _pack_weights(canonical: Conv2d, lanes: int, kernel: np.ndarray) -> np.ndarray:
    wl, fv = canonical, vector_blocks(canonical.F, lanes)
    kp = np.zeros((fv * lanes, wl.C, wl.R, wl.S), dtype="float32")
    kp[:wl.F] = kernel
    return np.ascontiguousarray(kp.reshape(fv, lanes, wl.C, wl.R, wl.S).transpose(0, 3, 4, 2, 1))


def pack_conv2d_weights(wl: Conv2d, lanes: int, kernel: np.ndarray) -> np.ndarray:
    """The weights pre-pass: ``kernel`` (in ``wl``'s layout) as ``[k/V][r][s][c][V]``, computed once per
    workload and cached (frameworks pack a layer's weights once, when the model is loaded)."""

    def pack() -> np.ndarray:
        dummy = np.zeros(wl.input_shapes[0], dtype="float32")
        return _pack_weights(wl.canonical(), lanes, wl.canonical_inputs(dummy, kernel)[1])

    return _packed_once((wl, lanes, kernel.shape, kernel.tobytes()), pack)


def _packed_once(key, pack) -> np.ndarray:
    """``pack()``, read-only, cached under ``key`` (the last layer only: a runner times one layer after another)."""
    cached = _PACKED_WEIGHTS.get(key)
    if cached is None:
        cached = pack()
        cached.setflags(write=False)
        _PACKED_WEIGHTS.clear()
        _PACKED_WEIGHTS[key] = cached
    return cached


_PACKED_WEIGHTS: dict = {}


def pack_matmul_weights(wl: Matmul, lanes: int, b: np.ndarray) -> np.ndarray:
    """The weights pre-pass of a matmul: ``B[k][j]`` as ``Bp[j/V][k][V]`` (columns zero-padded to whole
    vectors), computed once per workload and cached like :func:`pack_conv2d_weights`."""

    def pack() -> np.ndarray:
        nv = vector_blocks(wl.N, lanes)
        bp = np.zeros((wl.K, nv * lanes), dtype="float32")
        bp[:, :wl.N] = b
        return np.ascontiguousarray(bp.reshape(wl.K, nv, lanes).transpose(1, 0, 2))

    return _packed_once((wl, lanes, b.shape, b.tobytes()), pack)


def unpack_conv2d(wl: Conv2d, out: np.ndarray) -> np.ndarray:
    """The output in ``wl``'s layout from the packed NCHWc one ``[n][k/V][h][w][V]`` (padding channels dropped)."""
    nchw = out.transpose(0, 1, 4, 2, 3).reshape(wl.N, -1, wl.OH, wl.OW)[:, :wl.F]
    return wl.from_canonical_output(nchw)


# ---------------------------------------------------------------------------------------------
def build_prim_func(workload: Workload, plan: Plan):
    """The kernel of ``plan`` on ``workload`` as a TIR ``PrimFunc`` named ``main``."""
    if isinstance(workload, Conv2d):
        return _Conv(workload, plan).build()
    if isinstance(workload, Matmul):
        return _Matmul(workload, plan).build()
    raise TypeError(f"the microkernel space supports conv2d and matmul, not {workload.op}")


class _Generator:
    """Shared loop-nest emission; subclasses emit buffers, packing and the microkernel body."""

    def __init__(self, workload: Workload, plan: Plan):
        self.wl = workload
        self.plan = plan
        self.V = plan.lanes
        self.roles = ROLES[plan.op]
        # A repeat loop re-accumulates into the same outputs, like a reduction loop.
        loops = workload.canonical().loops if isinstance(workload, Conv2d) else workload.loops
        self.reduction = (*(lp.name for lp in loops if lp.kind == "reduction"), REPEAT)
        self.strides = self._strides()

    def _strides(self) -> list[int]:
        """Index step of each stack loop: the extent of one iteration's sub-tile along its dimension."""
        plan = self.plan
        unit = {dim: size for dim, size in plan.sizes}
        unit[self.roles["reuse"]] = plan.size(self.roles["reuse"]) * plan.reuse
        if plan.combo is not None:
            h1, a, h2, b = plan.combo
            unit[self.roles["comp"]] = a * h1 + b * h2
        strides = [0] * len(plan.stack)
        for pos in range(len(plan.stack) - 1, -1, -1):
            dim, trips = plan.stack[pos]
            if dim == LAMBDA:
                continue
            if dim != REPEAT:
                strides[pos] = unit.get(dim, 1)
                unit[dim] = unit.get(dim, 1) * trips
        return strides

    # -- the tile nest ---------------------------------------------------------------------------
    def emit_nest(self) -> None:
        from tvm.script.ir_builder import tirx as T

        plan = self.plan
        base: dict[str, Any] = {}
        self._emit(0, base, plan.size(self.roles["comp"]), [], T)

    def _emit(self, pos: int, base: dict[str, Any], h_size: int, reduction_vars: list, T) -> None:
        plan = self.plan
        if pos == len(plan.stack):
            self.emit_microkernel(base, h_size, reduction_vars)
            return
        dim, trips = plan.stack[pos]
        comp = self.roles["comp"]
        if dim == LAMBDA:
            h1, a, h2, b = plan.combo
            origin = base.get(comp, 0)
            with T.serial(0, a) as v:
                self._emit(pos + 1, {**base, comp: origin + (v * h1 if a > 1 else 0)}, h1, reduction_vars, T)
            with T.serial(0, b) as v:
                self._emit(pos + 1, {**base, comp: origin + a * h1 + (v * h2 if b > 1 else 0)}, h2, reduction_vars, T)
            return
        start, count = plan.parallel
        if count and pos == start:
            loops = plan.stack[start:start + count]
            total = prod(t for _, t in loops)
            with T.parallel(0, total) as fused:
                inner = dict(base)
                below = total
                for offset, (d, t) in enumerate(loops):
                    below //= t
                    if t == 1:  # adds nothing; leaving it out keeps constant origins Python ints
                        continue
                    var = fused // below % t if offset else fused // below
                    inner[d] = inner.get(d, 0) + var * self.strides[start + offset]
                self._emit(start + count, inner, h_size, reduction_vars, T)
            return
        with T.serial(0, trips) as v:
            inner = {**base, dim: base.get(dim, 0) + v * self.strides[pos]} if trips > 1 else base
            red = reduction_vars + [v] if dim in self.reduction else reduction_vars
            self._emit(pos + 1, inner, h_size, red, T)

    def first_reduction(self, reduction_vars: list):
        """True where every reduction loop above the microkernel is at its first iteration."""
        from tvm import tirx

        if not reduction_vars:
            return True
        return tirx.all(*[v == 0 for v in reduction_vars])

    def emit_accumulator_init(self, acc, n_vectors: int, load, reduction_vars: list) -> None:
        """Zero the accumulators on the first pass of the reduction, else load the partial sums."""
        from tvm import tirx
        from tvm.script.ir_builder import tirx as T

        V = self.V
        zero = tirx.const(0.0, "float32")
        cond = self.first_reduction(reduction_vars)

        def zeros():
            for i in range(n_vectors):
                T.buffer_store(acc, T.broadcast(zero, V), [T.ramp(i * V, 1, V)])

        def loads():
            for i in range(n_vectors):
                T.buffer_store(acc, load(i), [T.ramp(i * V, 1, V)])

        if cond is True:
            zeros()
            return
        with T.If(cond):
            with T.Then():
                zeros()
            with T.Else():
                loads()

    def emit_microkernel(self, base: dict[str, Any], h_size: int, reduction_vars: list) -> None:
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------
class _Conv(_Generator):
    wl: Conv2d

    def build(self):
        from tvm import tirx
        from tvm.script.ir_builder import IRBuilder
        from tvm.script.ir_builder import tirx as T

        wl, V, packing = self.wl, self.V, self.plan.packing
        self.fv = vector_blocks(wl.F, V)
        hp, wp = wl.H + 2 * wl.padding, wl.W + 2 * wl.padding
        ip_shape = (wl.N, hp, wp, channel_stride(wl.C))
        kp_shape = (self.fv, wl.R, wl.S, wl.C, V)
        op_shape = (wl.N, self.fv, wl.OH, wl.OW, V)
        # The microkernel writes output vectors of V channels; it writes the workload's own output
        # in place when that holds them contiguously (NHWC) or is its own layout (NCHWc blocked by V).
        self.out_layout = "NCHWc"
        with IRBuilder() as ib:
            with T.prim_func():
                T.func_name("main")
                T.func_attr({"global_symbol": "main", "tirx.noalias": True})
                if packing == ALL_PACKED:
                    self.ip = T.arg("data_packed", T.buffer(ip_shape, "float32"))
                    self.kp = T.arg("kernel_packed", T.buffer(kp_shape, "float32"))
                    self.op = T.arg("out_packed", T.buffer(op_shape, "float32"))
                else:
                    data = T.arg("data", T.buffer(wl.input_shapes[0], "float32"))
                    if packing == WEIGHTS_PACKED:
                        self.kp = T.arg("kernel_packed", T.buffer(kp_shape, "float32"))
                    else:
                        kernel = T.arg("kernel", T.buffer(wl.input_shapes[1], "float32"))
                    out = T.arg("out", T.buffer(wl.output_shape, "float32"))
                    in_place = wl.layout == "NHWC" and wl.padding == 0 and channel_stride(wl.C) == wl.C
                    self.ip = data if in_place else T.alloc_buffer(ip_shape, "float32")
                    if wl.layout == "NHWC" and wl.F % V == 0:
                        self.op, self.out_layout = out, "NHWC"
                    elif wl.layout == "NCHWc" and V == wl.channel_block:
                        self.op = out
                    else:
                        self.op = T.alloc_buffer(op_shape, "float32")
                    if packing == IN_KERNEL:
                        self.kp = T.alloc_buffer(kp_shape, "float32")
                    if not in_place:
                        self._pack_input(data, T, tirx)
                    if packing == IN_KERNEL:
                        self._pack_kernel(kernel, T, tirx)
                self.emit_nest()
                if packing != ALL_PACKED and self.op is not out:
                    self._unpack(out, T)
        return ib.get()

    def out_vector(self, n, fo, y, x) -> list:
        """Index of the output vector of channels ``fo*V .. fo*V + V-1`` at (n, y, x) in ``self.op``."""
        from tvm.script.ir_builder import tirx as T

        if self.out_layout == "NHWC":
            return [n, y, x, T.ramp(fo * self.V, 1, self.V)]
        return [n, fo, y, x, T.ramp(0, 1, self.V)]

    def _pack_input(self, data, T, tirx) -> None:
        """The workload's input -> padded NHWC (:func:`channel_stride` channels per pixel). Border rows and
        columns are zero-filled in their own loops, so the interior copy has no branch."""
        wl = self.wl
        p = wl.padding
        hp, wp = wl.H + 2 * p, wl.W + 2 * p
        zero = tirx.const(0.0, "float32")

        def zeros(n, h, w_lo, w_hi):
            with T.serial(w_lo, w_hi) as w:
                if wl.C % self.V == 0:
                    with T.serial(0, wl.C // self.V) as cb:
                        T.buffer_store(self.ip, T.broadcast(zero, self.V), [n, h, w, T.ramp(cb * self.V, 1, self.V)])
                else:
                    with T.serial(0, wl.C) as c:
                        T.buffer_store(self.ip, zero, [n, h, w, c])

        with T.parallel(0, wl.N * hp) as nh:
            n, h = nh // hp, nh % hp

            def interior():
                if p:
                    zeros(n, h, 0, p)
                    zeros(n, h, wl.W + p, wp)
                self._copy_row(data, n, h, T)

            if not p:
                interior()
                return
            with T.If(tirx.all(h >= p, h < wl.H + p)):
                with T.Then():
                    interior()
                with T.Else():
                    zeros(n, h, 0, wp)

    def _copy_row(self, data, n, h, T) -> None:
        """Input row ``h - p`` of the workload's layout into ``Ip[n, h, p:p+W, :C]``."""
        wl, V = self.wl, self.V
        p = wl.padding
        if wl.layout == "NHWC":
            with T.serial(0, wl.W) as w:
                if wl.C % V == 0:
                    with T.serial(0, wl.C // V) as cb:
                        T.buffer_store(self.ip, data[n, h - p, w, T.ramp(cb * V, 1, V)],
                                       [n, h, w + p, T.ramp(cb * V, 1, V)])
                else:
                    with T.serial(0, wl.C) as c:
                        T.buffer_store(self.ip, data[n, h - p, w, c], [n, h, w + p, c])
            return
        if wl.layout == "NCHWc":
            b = wl.channel_block
            with T.serial(0, wl.W) as w:
                with T.serial(0, wl.C // b) as cb:
                    T.buffer_store(self.ip, data[n, cb, h - p, w, T.ramp(0, 1, b)], [n, h, w + p, T.ramp(cb * b, 1, b)])
            return
        if wl.C % V == 0 and wl.W >= V:
            self._transpose_row(data, n, h, T)
            return
        with T.serial(0, wl.C) as c:
            with T.serial(0, wl.W) as w:
                T.buffer_store(self.ip, data[n, c, h - p, w], [n, h, w + p, c])

    def _transpose_row(self, data, n, h, T) -> None:
        """One input row, ``data[n, :, h - p, :]`` (C x W) into ``Ip[n, h, :, :]`` (W x C), by VxV blocks
        transposed in registers. The last w block starts at W - V and overlaps the previous one (its
        values are written twice, identically), so no partial vector is needed."""
        wl, V = self.wl, self.V
        p = wl.padding
        starts = list(range(0, wl.W - V + 1, V))
        if starts[-1] != wl.W - V:
            starts.append(wl.W - V)
        with T.serial(0, wl.C // V) as cb:
            for w0 in starts:
                rows = [data[n, cb * V + i, h - p, T.ramp(w0, 1, V)] for i in range(V)]
                for j, column in enumerate(transpose_vectors(rows, V)):
                    T.buffer_store(self.ip, column, [n, h, w0 + j + p, T.ramp(cb * V, 1, V)])

    def _pack_kernel(self, kernel, T, tirx) -> None:
        wl, V = self.wl, self.V
        zero = tirx.const(0.0, "float32")

        def padded(load):  # filters past F (when V does not divide it) pack as zeros
            if wl.F % V == 0:
                return load
            return lambda f, r, s, c: tirx.if_then_else(f < wl.F, load(tirx.min(f, wl.F - 1), r, s, c), zero)

        if wl.layout == "NHWC":  # HWIO: output channels are already contiguous
            self._pack_filters(T, padded(lambda f, r, s, c: kernel[r, s, c, f]))
            return
        if wl.layout == "NCHWc":  # OIhw16i16o, OIhw8i8o
            b = wl.channel_block
            self._pack_filters(T, lambda f, r, s, c: kernel[f // b, c // b, r, s, c % b, f % b])
            return
        per_filter = wl.C * wl.R * wl.S
        if wl.F % V == 0 and per_filter % V == 0:
            # 16x16 blocks (V filters x V consecutive (c, r, s) elements) transposed in registers:
            # V contiguous vector loads, a shuffle network, V contiguous stores (faster than gathers).
            flat = T.decl_buffer((wl.F * per_filter,), "float32", data=kernel.data)
            with T.parallel(0, self.fv) as fo:
                with T.serial(0, per_filter // V) as block:
                    rows = [flat[T.ramp((fo * V + v) * per_filter + block * V, 1, V)] for v in range(V)]
                    for i, column in enumerate(transpose_vectors(rows, V)):
                        e = block * V + i
                        c, r, s = e // (wl.R * wl.S), e // wl.S % wl.R, e % wl.S
                        T.buffer_store(self.kp, column, [fo, r, s, c, T.ramp(0, 1, V)])
            return
        self._pack_filters(T, padded(lambda f, r, s, c: kernel[f, c, r, s]))

    def _pack_filters(self, T, load) -> None:
        """``Kp[f // V][r][s][c][f % V] = load(f, r, s, c)``, one (filter block, r) pair per parallel task."""
        wl, V = self.wl, self.V
        with T.parallel(0, self.fv * wl.R) as fr:
            fo, r = fr // wl.R, fr % wl.R
            with T.serial(0, wl.S) as s:
                with T.serial(0, wl.C) as c:
                    with T.vectorized(0, V) as v:
                        T.buffer_store(self.kp, load(fo * V + v, r, s, c), [fo, r, s, c, v])

    def _unpack(self, out, T) -> None:
        """The packed ``Op[n][k/V][h][w][V]`` into the workload's output (padding channels dropped)."""
        wl, V = self.wl, self.V
        if wl.layout != "NCHW":
            with T.parallel(0, wl.N * wl.OH) as ny:
                n, y = ny // wl.OH, ny % wl.OH
                with T.serial(0, wl.OW) as x:
                    with T.serial(0, wl.F) as f:
                        value = self.op[n, f // V, y, x, f % V]
                        if wl.layout == "NHWC":
                            T.buffer_store(out, value, [n, y, x, f])
                        else:
                            T.buffer_store(out, value, [n, f // wl.channel_block, y, x, f % wl.channel_block])
            return
        # Rows of one output channel are written contiguously (vectorised along x), read with stride V.
        with T.parallel(0, wl.N * self.fv) as nfo:
            n, fo = nfo // self.fv, nfo % self.fv
            with T.serial(0, wl.OH) as y:
                with T.serial(0, V) as v:
                    if wl.F % V == 0:
                        with T.vectorized(0, wl.OW) as x:
                            T.buffer_store(out, self.op[n, fo, y, x, v], [n, fo * V + v, y, x])
                    else:
                        with T.If(fo * V + v < wl.F):
                            with T.Then():
                                with T.serial(0, wl.OW) as x:
                                    T.buffer_store(out, self.op[n, fo, y, x, v], [n, fo * V + v, y, x])

    def emit_microkernel(self, base: dict[str, Any], h_size: int, reduction_vars: list) -> None:
        from tvm.script.ir_builder import tirx as T

        plan, wl, V = self.plan, self.wl, self.V
        vec, w, cu_n = plan.size("f"), plan.size("x"), plan.size("rc")
        r_n, s_n = plan.size("ry"), plan.size("rx")
        st = wl.stride
        n0, f0, y0, x0 = (base.get(d, 0) for d in ("n", "f", "y", "x"))
        c_base, r0, s0 = (base.get(d, 0) for d in ("rc", "ry", "rx"))
        n_vectors = h_size * w * vec

        def slot(hu: int, wu: int, k: int) -> int:
            return ((hu * w + wu) * vec + k) * V

        def out_index(i: int):
            hu, rest = divmod(i, w * vec)
            wu, k = divmod(rest, vec)
            return self.out_vector(n0, f0 + k, y0 + hu, x0 + wu)

        acc = T.alloc_buffer((n_vectors * V,), "float32", scope="local")
        self.emit_accumulator_init(acc, n_vectors, lambda i: self.op[tuple(out_index(i))], reduction_vars)

        def body(first_row: int | None, first_col: int | None) -> None:
            """The reuse loop, without the taps that fall on the zero border when the first tap's row/column
            of the input is known (``None``: every tap, read from the zero-padded copy)."""
            with T.serial(0, plan.reuse) as cr:
                c0 = c_base + cr * cu_n
                for cu in range(cu_n):
                    for ru in range(r_n):
                        rows = border_taps(first_row, ru, h_size, st, wl.H)
                        for su in range(s_n):
                            cols = border_taps(first_col, su, w, st, wl.W)
                            if not rows or not cols:
                                continue
                            weights = [self.kp[f0 + k, r0 + ru, s0 + su, c0 + cu, T.ramp(0, 1, V)]
                                       for k in range(vec)]
                            for hu in rows:
                                for wu in cols:
                                    x = T.broadcast(self.ip[n0, (y0 + hu) * st + r0 + ru, (x0 + wu) * st + s0 + su,
                                                            c0 + cu], V)
                                    for k in range(vec):
                                        i = slot(hu, wu, k)
                                        T.buffer_store(acc, acc[T.ramp(i, 1, V)] + x * weights[k], [T.ramp(i, 1, V)])

        p = wl.padding
        row_cases = border_cases(y0 * st + r0 - p, p, h_size, r_n, wl.OH, wl.R, st, wl.H)
        col_cases = border_cases(x0 * st + s0 - p, p, w, s_n, wl.OW, wl.S, st, wl.W)
        def fmas(first_row: int | None, first_col: int | None) -> int:  # vector FMAs in one reuse step of body()
            rows = sum(len(border_taps(first_row, ru, h_size, st, wl.H)) for ru in range(r_n))
            cols = sum(len(border_taps(first_col, su, w, st, wl.W)) for su in range(s_n))
            return cu_n * vec * rows * cols

        cases = border_bodies(row_cases, col_cases, fmas, BORDER_FMA_BUDGET // (2 if plan.combo else 1))
        emit_cases(cases, lambda first: body(*first))
        for i in range(n_vectors):
            T.buffer_store(self.op, acc[T.ramp(i * V, 1, V)], out_index(i))


# Border taps (see the module docs). A microkernel call knows where its first tap lies only when its tile's origin
# is a constant; otherwise the call branches once, before its reuse loop, to a body specialised for each border
# position that can occur (its taps on the border dropped at generation) or to the full body. TVM then folds the
# branch's condition into the body's indices, which is why the branch sits at the call: hoisted out of the loops
# that do not move the origin, or tested on a variable of its own, the same bodies ran 10-30 % slower on R11.
# Each body is another copy of the unrolled microkernel, and LLVM's time grows with every vector FMA emitted: on
# a Zen 4, 20 R5 configs compiled in 0.25 s (mean) with the full body alone and 1.25 s with every border body,
# the dearest up to 10 s. So the bodies a call site gets are the richest set that adds at most BORDER_FMA_BUDGET
# vector FMAs a reuse step (:func:`border_bodies`; a λ-combination's two call sites share it): 0.59 s on those
# configs (the 12 dearest: 4.1 s down to 1.0 s), 0.31 s on R11's (0.16 s with none), and the best kernels of R5
# and R11 re-timed as fast as with every body.
BORDER_FMA_BUDGET = 512


def border_taps(first: int | None, tap: int, block: int, stride: int, extent: int) -> list[int]:
    """The block's rows (or columns) whose ``tap``-th tap reads the input, not its zero border, when the block's
    first tap reads input row ``first`` (``None``: unknown, all of them)."""
    if first is None:
        return list(range(block))
    return [u for u in range(block) if 0 <= first + u * stride + tap < extent]


def border_cases(first, padding: int, block: int, taps: int, out_extent: int, filter_extent: int, stride: int,
                 extent: int) -> list[tuple[Any, int | None]]:
    """``(condition, first tap's input row)`` per body a microkernel call may take along one axis, the last
    with condition ``None`` (otherwise). ``first`` is the input row (or column) of the call's first tap; its
    reachable values run from ``-padding`` to the last block's, and the border ones are those whose taps leave
    ``[0, extent)``."""
    if not padding:
        return [(None, None)]
    if isinstance(first, int):  # a constant origin (the nest adds no term for loops of one trip)
        return [(None, first)]
    last = (out_extent - block) * stride + filter_extent - taps - padding
    span = (block - 1) * stride + taps
    border = [t for t in range(-padding, last + 1) if t < 0 or t + span > extent]
    return [((first == t).asobject(), t) for t in border] + [(None, None)]


def border_bodies(row_cases: list, col_cases: list, fmas, budget: int) -> list[tuple[Any, tuple]]:
    """``(condition, (first tap's input row, column))`` per body of one call site (see "Border taps" above), the
    full body last: a body per border position (rows x columns, corners included), else per border row and per
    border column, else per border row, whichever first adds at most ``budget`` vector FMAs (``fmas(row,
    column)`` counts a body's)."""
    from tvm import tirx

    full = (row_cases[-1][1], col_cases[-1][1])
    rows = [(condition, (t, full[1])) for condition, t in row_cases[:-1]]
    cols = [(condition, (full[0], t)) for condition, t in col_cases[:-1]]
    corners = [(tirx.all(row, col), (r, c)) for row, r in row_cases[:-1] for col, c in col_cases[:-1]]
    for border in (corners + rows + cols, rows + cols, rows):
        if sum(fmas(*first) for _, first in border) <= budget:
            return border + [(None, full)]
    return [(None, full)]


def emit_cases(cases: list[tuple[Any, int | None]], emit) -> None:
    """``if cases[0][0]: emit(cases[0][1]) elif ...: else: emit(cases[-1][1])`` as TIR."""
    from tvm.script.ir_builder import tirx as T

    condition, value = cases[0]
    if condition is None:
        emit(value)
        return
    with T.If(condition):
        with T.Then():
            emit(value)
        with T.Else():
            emit_cases(cases[1:], emit)


# ---------------------------------------------------------------------------------------------
class _Matmul(_Generator):
    wl: Matmul

    def build(self):
        from tvm import tirx
        from tvm.script.ir_builder import IRBuilder
        from tvm.script.ir_builder import tirx as T

        wl, V = self.wl, self.V
        self.nv = vector_blocks(wl.N, V)
        self.padded = wl.N % V != 0
        bp_shape = (self.nv, wl.K, V)
        with IRBuilder() as ib:
            with T.prim_func():
                T.func_name("main")
                T.func_attr({"global_symbol": "main", "tirx.noalias": True})
                self.a = T.arg("A", T.buffer((wl.M, wl.K), "float32"))
                if self.plan.prepacked:
                    self.bp = T.arg("B_packed", T.buffer(bp_shape, "float32"))
                    shape = (wl.M, self.nv * V) if self.padded else (wl.M, wl.N)
                    self.c = T.arg("C_packed" if self.padded else "C", T.buffer(shape, "float32"))
                else:
                    if self.plan.packing == WEIGHTS_PACKED:
                        self.bp = T.arg("B_packed", T.buffer(bp_shape, "float32"))
                    else:
                        b = T.arg("B", T.buffer((wl.K, wl.N), "float32"))
                        self.bp = T.alloc_buffer(bp_shape, "float32")
                    c = T.arg("C", T.buffer((wl.M, wl.N), "float32"))
                    self.c = T.alloc_buffer((wl.M, self.nv * V), "float32") if self.padded else c
                    if self.plan.packing == IN_KERNEL:
                        self._pack_b(b, T, tirx)
                self.emit_nest()
                if not self.plan.prepacked and self.padded:
                    with T.parallel(0, wl.M) as i:
                        with T.serial(0, wl.N) as j:
                            T.buffer_store(c, self.c[i, j], [i, j])
        return ib.get()

    def _pack_b(self, b, T, tirx) -> None:
        wl, V = self.wl, self.V
        zero = tirx.const(0.0, "float32")
        with T.parallel(0, self.nv) as jo:
            with T.serial(0, wl.K) as k:
                with T.vectorized(0, V) as v:
                    j = jo * V + v
                    value = b[k, j] if not self.padded else tirx.if_then_else(
                        j < wl.N, b[k, tirx.min(j, wl.N - 1)], zero)
                    T.buffer_store(self.bp, value, [jo, k, v])

    def emit_microkernel(self, base: dict[str, Any], h_size: int, reduction_vars: list) -> None:
        from tvm.script.ir_builder import tirx as T

        plan, V = self.plan, self.V
        vec, cu_n = plan.size("j"), plan.size("k")
        i0, j0, k_base = (base.get(d, 0) for d in ("i", "j", "k"))
        n_vectors = h_size * vec

        def out_index(slot: int):
            hu, k = divmod(slot, vec)
            return [i0 + hu, T.ramp((j0 + k) * V, 1, V)]

        acc = T.alloc_buffer((n_vectors * V,), "float32", scope="local")
        self.emit_accumulator_init(acc, n_vectors, lambda i: self.c[tuple(out_index(i))], reduction_vars)
        with T.serial(0, plan.reuse) as cr:
            k0 = k_base + cr * cu_n
            for cu in range(cu_n):
                weights = [self.bp[j0 + k, k0 + cu, T.ramp(0, 1, V)] for k in range(vec)]
                for hu in range(h_size):
                    x = T.broadcast(self.a[i0 + hu, k0 + cu], V)
                    for k in range(vec):
                        i = (hu * vec + k) * V
                        T.buffer_store(acc, acc[T.ramp(i, 1, V)] + x * weights[k], [T.ramp(i, 1, V)])
        for i in range(n_vectors):
            T.buffer_store(self.c, acc[T.ramp(i * V, 1, V)], out_index(i))
