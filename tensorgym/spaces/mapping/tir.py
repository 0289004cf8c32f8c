"""TIR descriptions and implementations of the intrinsics of :mod:`.intrinsics` (needs TVM 0.27 + LLVM 22).

:func:`register_tensor_intrinsics` registers every intrinsic with
``TensorIntrin.register`` under tensorgym's names (``tensorgym.vnni512``, ...;
TVM's stock ones are left alone) in the calling process; build workers call it
before ``sch.tensorize``. It does not import ``tvm.s_tir.tensor_intrin``, whose
first import costs 20-30 s.

Notes on the forms below, each found the hard way with TVM 0.27 and its LLVM 22:

* **VNNI**: LLVM 22's ``llvm.x86.avx512.vpdpbusd.512`` takes
  ``(<16 x i32>, <64 x i8>, <64 x i8>)``; TVM's stock ``dot_16x4_vnni`` passes
  ``<16 x i32>`` operands and fails LLVM's verifier. Here the 4 activation bytes
  are reinterpreted as one int32, broadcast, and reinterpreted back to bytes.
  Implementations are one nested expression: a ``x = ...`` binding in an
  implementation becomes a workspace allocation per parallel task.
* **bf16**: TVM legalizes bfloat16 before LLVM sees it (arithmetic to fp32,
  storage to uint16), so a ``bfloat16x32`` operand can never reach
  ``llvm.x86.avx512bf16.dpbf16ps.512``. The operands are read through int16
  views of the same buffers (``T.decl_buffer(..., data=X.data)``) and passed to
  a tiny always-inline LLVM IR function, linked in with the
  ``pragma_import_llvm`` attribute, that bitcasts them to ``<32 x bfloat>`` and
  calls the intrinsic: after inlining, one ``vdpbf16ps``.
* **FP32 FMA**: the description has no reduction loop; a unit loop would be
  dropped by ``blockize`` and the match would fail. The same form takes bf16
  operands (``bf16fma256``): cast to fp32 in the description as in the
  kernel's computation, widened by TVM's bf16 legalization in the
  implementation.
* **AVX2 vpmaddwd** (``pmaddwd256``): the description and implementation take
  the operands in their packed types (int16 activations, which the kernel
  packs widened, and int8 weights); the int8 ones are widened with plain casts
  (``int8x16 -> int16x16``) that LLVM selects as ``vpmovsxbw``; the two
  activation words travel as one int32, broadcast, as for VNNI
  (``vpbroadcastd`` from memory). The int32 sum is added outside the LLVM
  intrinsic (``vpmaddwd`` has no accumulator operand).
* **AMX**: the non-``.internal`` LLVM intrinsics take tile registers as
  immediates, so no ``x86_amx`` value appears in TIR. A call loads its
  accumulator tiles, multiplies A and B tiles (16 rows x 64 bytes) into them
  step by step, and stores them back (:func:`_amx_blocking`); the tile
  configuration (palette 1, all 8 tiles 16 rows x 64 bytes) is loaded by the
  companion *init* intrinsic, tensorized onto the reduction's init block, so
  each thread loads it before its first tile instruction. Linux grants AMX state to a process
  only on request: :func:`request_amx` (``arch_prctl``) runs once in every
  process that runs AMX kernels. The target must have the ``amx-*`` LLVM
  features (:meth:`tensorgym.target.Target.tvm_target` adds them); without them
  LLVM aborts the process.
* Every buffer of a description and implementation has ``offset_factor=1``:
  without it ``tensorize`` matches but ``LowerMatchBuffer`` rejects any offset.
"""

from __future__ import annotations

import ctypes
import logging
from functools import lru_cache

from .intrinsics import INTRINSICS, Intrinsic

log = logging.getLogger(__name__)

_ARCH_PRCTL = 158  # x86-64 syscall number
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18

# The 64-byte AMX tile configuration: palette 1; all 8 tiles have 16 rows of 64 bytes.
_TILE_CONFIG = bytearray(64)
_TILE_CONFIG[0] = 1
for _tile in range(8):
    _TILE_CONFIG[16 + 2 * _tile] = 64  # colsb, little-endian u16
    _TILE_CONFIG[48 + _tile] = 16  # rows
_TILE_CONFIG_LL = """
@tensorgym_amx_config = linkonce_odr constant [64 x i8] c"%s", align 64
define weak_odr void @tensorgym_amx_load_config() #0 {
  call void @llvm.x86.ldtilecfg(ptr @tensorgym_amx_config)
  ret void
}
declare void @llvm.x86.ldtilecfg(ptr)
attributes #0 = { alwaysinline nounwind "target-features"="+amx-tile" }
""" % "".join("\\%02X" % b for b in _TILE_CONFIG)


def init_name(intrinsic: Intrinsic) -> str:
    """The TVM name of a tile intrinsic's init (zero the accumulator tile, load the tile configuration)."""
    return f"{intrinsic.tvm_name}.init"


@lru_cache(maxsize=1)
def request_amx() -> bool:
    """Ask Linux for AMX tile state in this process (once); False if refused (AMX kernels would then SIGILL)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        granted = libc.syscall(_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        granted = False
    if not granted:
        log.warning("the kernel refused AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM): AMX kernels cannot run")
    return granted


_registered = False


def register_tensor_intrinsics() -> None:
    """Register every intrinsic of the registry with TVM in this process (idempotent)."""
    global _registered
    if _registered:
        return
    from tvm.s_tir import TensorIntrin

    for intrinsic in INTRINSICS.values():
        desc, impl = _definitions(intrinsic)
        # override=True: re-registering in a process that imported an older copy is harmless; the names are ours.
        TensorIntrin.register(intrinsic.tvm_name, desc, impl, override=True)
        if intrinsic.shape == "tile":
            TensorIntrin.register(init_name(intrinsic), *_amx_init(intrinsic), override=True)
    _registered = True


_ELEMENT_TYPES = {"int8": ("uint8", "int8", "int32"), "bf16": ("bfloat16", "bfloat16", "float32"),
                  "float32": ("float32", "float32", "float32")}


def _definitions(intrinsic: Intrinsic):
    """(description, implementation) of an intrinsic, by its :attr:`~.intrinsics.Intrinsic.form`."""
    a_type, b_type, c_type = _ELEMENT_TYPES[intrinsic.dtype]
    # operands the kernel packs widened are matched in their packed type (the kernel's A_pack / W_pack)
    types = (intrinsic.packed_activations or a_type, intrinsic.packed_weights or b_type, c_type)
    lanes = intrinsic.lanes
    if intrinsic.form == "amx":
        return _amx_desc(intrinsic), _amx_impl(intrinsic)
    if intrinsic.form == "fma":
        return _fma_desc(lanes, types[0]), _fma_impl(lanes, types[0])
    desc = _dot_desc(lanes, intrinsic.depth, *types)
    if intrinsic.form == "vnni":
        return desc, _vnni_impl(lanes)
    if intrinsic.form == "pmaddubsw":
        return desc, _pmadd_impl()
    if intrinsic.form == "pmaddwd":
        return desc, _pmaddwd_impl(lanes, *types[:2])
    if intrinsic.form == "dpbf16":
        return desc, _bf16_dot_impl(lanes)
    raise ValueError(f"no TIR implementation for intrinsic {intrinsic.name!r} (form {intrinsic.form!r})")


# -- dot products --------------------------------------------------------------------------------------------
def _dot_desc(lanes: int, depth: int, a_type: str, b_type: str, c_type: str):
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def desc(A: T.Buffer((depth,), a_type, offset_factor=1), B: T.Buffer((lanes, depth), b_type, offset_factor=1),
             C: T.Buffer((lanes,), c_type, offset_factor=1)) -> None:
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:depth], B[0:lanes, 0:depth])
            T.writes(C[0:lanes])
            for i in T.serial(0, lanes):
                for k in T.serial(0, depth):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        C[vi] = C[vi] + T.cast(A[vk], c_type) * T.cast(B[vi, vk], c_type)

    return desc


def _vnni_impl(lanes: int):
    from tvm.script import tirx as T

    nbytes = 4 * lanes
    name = {16: "llvm.x86.avx512.vpdpbusd.512", 8: "llvm.x86.avx512.vpdpbusd.256"}[lanes]

    @T.prim_func(s_tir=True)
    def impl(A: T.Buffer((4,), "uint8", offset_factor=1), B: T.Buffer((lanes, 4), "int8", offset_factor=1),
             C: T.Buffer((lanes,), "int32", offset_factor=1)) -> None:
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:4], B[0:lanes, 0:4])
            T.writes(C[0:lanes])
            C[T.ramp(T.int32(0), 1, lanes)] = T.call_llvm_pure_intrin(
                T.llvm_lookup_intrinsic_id(name),
                C.vload([0], dtype=f"int32x{lanes}"),
                T.reinterpret(T.broadcast(T.reinterpret(A.vload([0], "uint8x4"), dtype="int32"), lanes),
                              dtype=f"uint8x{nbytes}"),
                B.vload([0, 0], dtype=f"int8x{nbytes}"),
                dtype=f"int32x{lanes}")

    return impl


def _pmadd_impl():
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def impl(A: T.Buffer((4,), "uint8", offset_factor=1), B: T.Buffer((16, 4), "int8", offset_factor=1),
             C: T.Buffer((16,), "int32", offset_factor=1)) -> None:
        with T.sblock("root"):
            T.reads(C[0:16], A[0:4], B[0:16, 0:4])
            T.writes(C[0:16])
            C[T.ramp(T.int32(0), 1, 16)] = C.vload([0], dtype="int32x16") + T.call_llvm_pure_intrin(
                T.llvm_lookup_intrinsic_id("llvm.x86.avx512.pmaddw.d.512"),
                T.call_llvm_pure_intrin(
                    T.llvm_lookup_intrinsic_id("llvm.x86.avx512.pmaddubs.w.512"),
                    T.reinterpret(T.broadcast(T.reinterpret(A.vload([0], "uint8x4"), dtype="int32"), 16),
                                  dtype="uint8x64"),
                    B.vload([0, 0], dtype="int8x64"), dtype="int16x32"),
                T.broadcast(T.int16(1), 32), dtype="int32x16")

    return impl


def _pmaddwd_impl(lanes: int, a_type: str = "uint8", b_type: str = "int8"):
    """``vpmaddwd`` on int16 operands: exact for every uint8 x int8 input.

    The operands are int16: packed so by the kernel (``packed_activations``, ``packed_weights``) or widened
    here (uint8 activations zero-extended, int8 weights sign-extended; a cast of an int16 is a no-op). The 2
    activation words travel as one int32, broadcast to every lane; each 32-bit lane gets ``a0 * b0 + a1 *
    b1``, at most ``2 * 255 * 128 = 65280`` in magnitude: no saturation (``vpmaddwd`` saturates only for
    ``-32768 * -32768`` twice), unlike ``vpmaddubsw``'s int16 sums.
    """
    from tvm.script import tirx as T

    words = 2 * lanes
    name = {8: "llvm.x86.avx2.pmadd.wd", 16: "llvm.x86.avx512.pmaddw.d.512"}[lanes]

    @T.prim_func(s_tir=True)
    def impl(A: T.Buffer((2,), a_type, offset_factor=1), B: T.Buffer((lanes, 2), b_type, offset_factor=1),
             C: T.Buffer((lanes,), "int32", offset_factor=1)) -> None:
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:2], B[0:lanes, 0:2])
            T.writes(C[0:lanes])
            C[T.ramp(T.int32(0), 1, lanes)] = C.vload([0], dtype=f"int32x{lanes}") + T.call_llvm_pure_intrin(
                T.llvm_lookup_intrinsic_id(name),
                T.reinterpret(T.broadcast(T.reinterpret(T.cast(A.vload([0], f"{a_type}x2"), "int16x2"),
                                                        dtype="int32"), lanes), dtype=f"int16x{words}"),
                T.cast(B.vload([0, 0], dtype=f"{b_type}x{words}"), f"int16x{words}"),
                dtype=f"int32x{lanes}")

    return impl


def _bf16_wrapper_ll(lanes: int) -> str:
    """An always-inline LLVM IR function: int16 vectors -> bfloat vectors -> ``vdpbf16ps``."""
    pairs = 2 * lanes
    bits = 32 * lanes
    return f"""
define weak_odr <{lanes} x float> @tensorgym_dpbf16ps_{bits}(<{lanes} x float> %c, <{pairs} x i16> %a, \
<{pairs} x i16> %b) #0 {{
  %abf = bitcast <{pairs} x i16> %a to <{pairs} x bfloat>
  %bbf = bitcast <{pairs} x i16> %b to <{pairs} x bfloat>
  %r = call <{lanes} x float> @llvm.x86.avx512bf16.dpbf16ps.{bits}(<{lanes} x float> %c, <{pairs} x bfloat> %abf, \
<{pairs} x bfloat> %bbf)
  ret <{lanes} x float> %r
}}
declare <{lanes} x float> @llvm.x86.avx512bf16.dpbf16ps.{bits}(<{lanes} x float>, <{pairs} x bfloat>, \
<{pairs} x bfloat>)
attributes #0 = {{ alwaysinline nounwind "target-features"="+avx512f,+avx512bf16,+avx512vl" }}
"""


def _bf16_dot_impl(lanes: int):
    from tvm.script import tirx as T

    pairs = 2 * lanes
    function = f"tensorgym_dpbf16ps_{32 * lanes}"
    wrapper = _bf16_wrapper_ll(lanes)

    @T.prim_func(s_tir=True)
    def impl(A: T.Buffer((2,), "bfloat16", offset_factor=1), B: T.Buffer((lanes, 2), "bfloat16", offset_factor=1),
             C: T.Buffer((lanes,), "float32", offset_factor=1)) -> None:
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:2], B[0:lanes, 0:2])
            T.writes(C[0:lanes])
            A16 = T.decl_buffer((2,), "int16", data=A.data, elem_offset=A.elem_offset)
            B16 = T.decl_buffer((pairs,), "int16", data=B.data, elem_offset=B.elem_offset)
            with T.attr(0, "pragma_import_llvm", wrapper):
                C[T.ramp(T.int32(0), 1, lanes)] = T.call_pure_extern(
                    f"float32x{lanes}", function, C.vload([0], dtype=f"float32x{lanes}"),
                    T.reinterpret(T.broadcast(T.reinterpret(A16.vload([0], "int16x2"), dtype="int32"), lanes),
                                  dtype=f"int16x{pairs}"),
                    B16.vload([0], f"int16x{pairs}"))

    return impl


def _fma_desc(lanes: int, in_type: str = "float32"):
    from tvm.script import tirx as T

    # Narrower inputs (bf16) are cast to fp32 first, as the kernel's computation does; for fp32 inputs the
    # parser drops the casts (a cast to the same type), so the description is the plain fp32 FMA.
    @T.prim_func(s_tir=True)
    def desc(A: T.Buffer((1,), in_type, offset_factor=1), B: T.Buffer((lanes, 1), in_type, offset_factor=1),
             C: T.Buffer((lanes,), "float32", offset_factor=1)) -> None:
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:1], B[0:lanes, 0:1])
            T.writes(C[0:lanes])
            for i in T.serial(0, lanes):
                with T.sblock("update"):
                    vi = T.axis.remap("S", [i])
                    C[vi] = C[vi] + T.cast(A[0], "float32") * T.cast(B[vi, 0], "float32")

    return desc


def _fma_impl(lanes: int, in_type: str = "float32"):
    """One FMA step: ``C += broadcast(A) * B`` in fp32; bf16 inputs are widened to fp32 first.

    A bf16 is the upper half of an fp32, so widening is exact: zero-extend to 32 bits, shift left 16
    (``vpmovzxwd`` + ``vpslld``), which is what TVM's bf16 legalization makes of the casts. (Buffers the
    kernel computes itself, such as in-kernel packed weights, TVM keeps in fp32: they are read widened.)
    """
    from tvm.script import tirx as T

    name = f"llvm.fma.v{lanes}f32"

    @T.prim_func(s_tir=True)
    def impl(A: T.Buffer((1,), in_type, offset_factor=1), B: T.Buffer((lanes, 1), in_type, offset_factor=1),
             C: T.Buffer((lanes,), "float32", offset_factor=1)) -> None:
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:1], B[0:lanes, 0:1])
            T.writes(C[0:lanes])
            C[T.ramp(T.int32(0), 1, lanes)] = T.call_llvm_pure_intrin(
                T.llvm_lookup_intrinsic_id(name), T.broadcast(T.cast(A[0], "float32"), lanes),
                T.cast(B.vload([0, 0], dtype=f"{in_type}x{lanes}"), f"float32x{lanes}"),
                C.vload([0], dtype=f"float32x{lanes}"), dtype=f"float32x{lanes}")

    return impl


# -- AMX tiles -------------------------------------------------------------------------------------------------
def _amx_types(intrinsic: Intrinsic) -> tuple[str, str, str, str]:
    """(A/B element type, C type, int16-view element for bf16 or the same type, the LLVM multiply)."""
    if intrinsic.dtype == "int8":
        return "uint8", "int8", "int32", "llvm.x86.tdpbusd"
    return "bfloat16", "bfloat16", "float32", "llvm.x86.tdpbf16ps"


def _amx_desc(intrinsic: Intrinsic):
    from tvm.script import tirx as T

    a_type, b_type, c_type, _ = _amx_types(intrinsic)
    rows, lanes, depth, group = intrinsic.rows, intrinsic.lanes, intrinsic.depth, intrinsic.group

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa = T.int32()
        sc = T.int32()
        A = T.match_buffer(a, (rows, depth), a_type, strides=[sa, 1], offset_factor=1)
        B = T.match_buffer(b, (depth // group, lanes, group), b_type, offset_factor=1)
        C = T.match_buffer(c, (rows, lanes), c_type, strides=[sc, 1], offset_factor=1)
        with T.sblock("root"):
            T.reads(C[0:rows, 0:lanes], A[0:rows, 0:depth], B[0:depth // group, 0:lanes, 0:group])
            T.writes(C[0:rows, 0:lanes])
            for i, j, k in T.grid(rows, lanes, depth):
                with T.sblock("update"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], c_type) * T.cast(B[vk // group, vj, vk % group], c_type)

    return desc


def _amx_blocking(intrinsic: Intrinsic) -> tuple[int, int, int, int]:
    """(tile rows TM, tile columns TN, depth steps KK, reduction elements per tile) of a tile intrinsic.

    A call covers ``TM x TN`` accumulator tiles (16 x 16 each) and ``KK`` steps of the reduction, each one
    tile deep (64 bytes: 64 int8 or 32 bf16 elements). C tiles use registers ``0 .. TM*TN-1``, A tiles the
    next ``TM``, B tiles the last ``TN``: at most the 8 the hardware has.
    """
    tile_depth = 64 // (2 if intrinsic.dtype == "bf16" else 1)
    tm, tn, kk = intrinsic.rows // 16, intrinsic.lanes // 16, intrinsic.depth // tile_depth
    if tm * 16 != intrinsic.rows or tn * 16 != intrinsic.lanes or kk * tile_depth != intrinsic.depth:
        raise ValueError(f"{intrinsic.name}: rows, lanes must be multiples of 16 and depth of {tile_depth}")
    if tm * tn + tm + tn > 8:
        raise ValueError(f"{intrinsic.name}: {tm}x{tn} accumulator tiles need more than 8 tile registers")
    return tm, tn, kk, tile_depth


def _amx_impl(intrinsic: Intrinsic):
    from tvm.script import tirx as T

    a_type, b_type, c_type, multiply = _amx_types(intrinsic)
    rows, lanes, depth, group = intrinsic.rows, intrinsic.lanes, intrinsic.depth, intrinsic.group
    tm, tn, steps, tile_depth = _amx_blocking(intrinsic)
    # bf16 operands are addressed through uint16 views (what bf16 storage becomes): access_ptr on a bf16 buffer
    # fails after bf16 legalization.
    view = "uint16" if a_type == "bfloat16" else a_type
    bview = "uint16" if b_type == "bfloat16" else b_type
    a_bytes = 2 if a_type == "bfloat16" else 1
    b_row = lanes * group  # B elements per packed row (one row of a B tile is 16 lanes x group of it)
    a_tile, b_tile = tm * tn, tm * tn + tm  # first A and B tile registers

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa = T.int32()
        sc = T.int32()
        A = T.match_buffer(a, (rows, depth), a_type, strides=[sa, 1], offset_factor=1)
        B = T.match_buffer(b, (depth // group, lanes, group), b_type, offset_factor=1)
        C = T.match_buffer(c, (rows, lanes), c_type, strides=[sc, 1], offset_factor=1)
        with T.sblock("root"):
            T.reads(C[0:rows, 0:lanes], A[0:rows, 0:depth], B[0:depth // group, 0:lanes, 0:group])
            T.writes(C[0:rows, 0:lanes])
            Av = T.decl_buffer((rows, depth), view, data=A.data, elem_offset=A.elem_offset, strides=[sa, 1])
            Bv = T.decl_buffer((depth // group, lanes, group), bview, data=B.data, elem_offset=B.elem_offset)
            for i in T.unroll(tm):
                for j in T.unroll(tn):
                    T.evaluate(T.call_llvm_intrin(
                        "void", "llvm.x86.tileloadd64", T.int8(i * tn + j),
                        C.access_ptr("r", offset=i * 16 * sc + j * 16), T.int64(sc * 4)))
            for k in T.unroll(steps):
                for i in T.unroll(tm):
                    T.evaluate(T.call_llvm_intrin(
                        "void", "llvm.x86.tileloadd64", T.int8(a_tile + i),
                        Av.access_ptr("r", offset=i * 16 * sa + k * tile_depth), T.int64(sa * a_bytes)))
                for j in T.unroll(tn):
                    T.evaluate(T.call_llvm_intrin(
                        "void", "llvm.x86.tileloadd64", T.int8(b_tile + j),
                        Bv.access_ptr("r", offset=k * 16 * b_row + j * 16 * group), T.int64(b_row * a_bytes)))
                for i in T.unroll(tm):
                    for j in T.unroll(tn):
                        T.evaluate(T.call_llvm_intrin("void", multiply, T.int8(i * tn + j), T.int8(a_tile + i),
                                                      T.int8(b_tile + j)))
            for i in T.unroll(tm):
                for j in T.unroll(tn):
                    T.evaluate(T.call_llvm_intrin(
                        "void", "llvm.x86.tilestored64", T.int8(i * tn + j),
                        C.access_ptr("w", offset=i * 16 * sc + j * 16), T.int64(sc * 4)))

    return impl


def _amx_init(intrinsic: Intrinsic):
    """(desc, impl) of the init: zero the C tiles; the impl also loads the tile configuration in this thread."""
    from tvm.script import tirx as T

    _, _, c_type, _ = _amx_types(intrinsic)
    rows, lanes = intrinsic.rows, intrinsic.lanes
    tm, tn, _, _ = _amx_blocking(intrinsic)
    zero = T.int32(0) if c_type == "int32" else T.float32(0)

    @T.prim_func(s_tir=True)
    def desc(c: T.handle) -> None:
        sc = T.int32()
        C = T.match_buffer(c, (rows, lanes), c_type, strides=[sc, 1], offset_factor=1)
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:rows, 0:lanes])
            for i, j in T.grid(rows, lanes):
                with T.sblock("init"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = zero

    @T.prim_func(s_tir=True)
    def impl(c: T.handle) -> None:
        sc = T.int32()
        C = T.match_buffer(c, (rows, lanes), c_type, strides=[sc, 1], offset_factor=1)
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:rows, 0:lanes])
            with T.attr(0, "pragma_import_llvm", _TILE_CONFIG_LL):
                T.evaluate(T.call_extern("void", "tensorgym_amx_load_config"))
            T.evaluate(T.call_llvm_intrin("void", "llvm.x86.tilezero", T.int8(0)))
            for i in T.unroll(tm):
                for j in T.unroll(tn):
                    T.evaluate(T.call_llvm_intrin(
                        "void", "llvm.x86.tilestored64", T.int8(0), C.access_ptr("w", offset=i * 16 * sc + j * 16),
                        T.int64(sc * 4)))

    return desc, impl
