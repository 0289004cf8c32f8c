"""The hardware intrinsics a mapping can target, as data: one registry, one place to add a new one.

Each :class:`Intrinsic` says what it computes (its axes, their extents, the
operand types), which ISA flags it needs (masked out on CPUs without them), and
for which inputs it is exact. Two shapes of computation (seed 002's compute
abstraction, with the operator's data, weights and output in the roles of
``A``, ``B`` and ``C``):

``dot`` (2 axes: ``i`` spatial, ``r`` reduction)
    ``C[i] += sum_r A[r] * B[i, r]`` for ``i < lanes``, ``r < depth``: a vector
    of ``lanes`` accumulators, each a dot product of ``depth`` pairs (AVX-512
    VNNI ``vpdpbusd``, AVX512-BF16 ``vdpbf16ps``, AVX2 ``vpmaddwd``) or a single
    FMA (``depth`` 1, an outer-product step).
``tile`` (3 axes: ``i1``, ``i2`` spatial, ``r`` reduction)
    ``C[i1, i2] += sum_r A[i1, r] * B[r, i2]`` on ``rows x lanes`` accumulators
    with ``depth``-long reductions: Intel AMX tile multiplies (``tdpbusd``,
    ``tdpbf16ps``), the exact analogue of a Tensor Core ``mma``. The plain ones
    multiply one 16 x 16 accumulator tile by one 64-byte-deep step; the ``_2x2``
    ones keep 2 x 2 accumulator tiles in 4 of the 8 tile registers over two
    steps (A and B tiles each feed two multiplies; the accumulators travel to
    memory once per 8 multiplies instead of once per multiply).

The weights are packed so that one call reads them contiguously: groups of
``group`` consecutive reduction elements (4 int8 for ``vpdpbusd``, 2 int8 for
``vpmaddwd``, 2 bf16 for ``vdpbf16ps``, 1 for an FMA: what the instruction sums
into one 32-bit lane) for ``lanes`` consecutive outputs, i.e.
``[F / lanes, ..., R / group, lanes, group]`` (the VNNI layout; an AMX B tile
is 16 consecutive rows of it, 16 lanes wide).

The TIR descriptions and implementations live in :mod:`.tir` (they need TVM);
they are registered with TVM under the :attr:`Intrinsic.tvm_name` names
(``tensorgym.<name>``), never under TVM's stock names.

Exactness for int8 (uint8 activations x int8 weights -> int32):

* ``vpdpbusd`` (``vnni512``, ``vnni256``) and AMX ``tdpbusd`` (``amx_int8``)
  multiply and add in 32 bits: exact for every uint8 x int8 input;
* ``vpmaddubsw`` + ``vpmaddwd`` (``pmadd512``, the fallback without VNNI) adds
  two uint8 x int8 products into a *saturating* int16 (255 * 127 * 2 > 32767):
  exact only for activations <= 127 (7 bits, as oneDNN feeds it). tensorgym's
  int8 workloads use the full uint8 range, so the mapping space masks it with
  that reason;
* ``vpmaddwd`` alone on operands widened to int16 (``pmaddwd256``, AVX2: uint8
  activations zero-extended, int8 weights sign-extended) multiplies into 32
  bits and adds pairs of products (at most 2 * 255 * 128 = 65280 in magnitude)
  in 32 bits: exact for every input, at half ``vpmaddubsw``'s multiply-adds per
  instruction (16 per ``ymm`` instead of 32; ``vpmaddubsw`` needs a
  ``vpmaddwd`` after it, so per multiply-add they cost the multiply ports about
  the same), plus one ``vpaddd`` per call. The kernel packs the activations
  widened (``packed_activations="int16"``: a ``vpbroadcastd`` from memory per
  row and step) and sign-extends the int8 weights in the call (``vpmovsxbw``,
  shared by the rows of the register block). A depth-4 form (two ``vpmaddwd``
  per call) would only repeat the same instructions in a larger call.

**The AVX2 intrinsics** (Haswell, Zen 1-3: AVX2 + FMA, 16 ``ymm`` registers,
no VNNI, no bf16 arithmetic): ``fma256`` (fp32, 8 lanes), ``pmaddwd256``
(int8, 8 lanes x depth 2, group 2) and ``bf16fma256``. They need nothing
beyond ``x86-64-v3``, so AVX-512 CPUs keep them as candidates too (as they keep
``vnni256`` beside ``vnni512``).

**bf16 without a bf16 dot product** (AVX2, and AVX-512 CPUs without
AVX512-BF16: Skylake-X, Cascade Lake): *widen to fp32 and FMA*
(``bf16fma256``), rather than masking bf16. A bf16 is the upper half of an
fp32, so the widening (``vpmovzxwd`` + ``vpslld 16``) is exact and cheap, each
product of two bf16 is exact in fp32 and the accumulation is fp32, like
``vdpbf16ps``'s: the result meets the bf16 workloads' tolerance, and the
operands stay bf16 in memory (half of fp32's traffic and cache footprint).
That is also what the vendors do there (oneDNN has no bf16 kernels below
AVX-512; PyTorch widens to fp32 in its own kernels), so a bf16 layer can be
tuned and compared on every x86-64-v3 CPU; masking it would only have hidden
the layer. It computes at fp32's FMA rate, not faster.

bf16 and fp32: each bf16 x bf16 product is exact in fp32; the accumulation is
fp32 (its order differs from the reference, see :mod:`tensorgym.workloads`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...target import Target

Shape = Literal["dot", "tile"]

# Bytes per element of each workload dtype's operands (data and weights).
OPERAND_BYTES = {"int8": 1, "bf16": 2, "float32": 4}
# Bytes per element of the types an intrinsic's kernel may pack its operands in (``packed_activations``, ...).
PACKED_BYTES = {"int16": 2}
UINT8_MAX = 255


@dataclass(frozen=True)
class Intrinsic:
    """One hardware intrinsic (see the module docs)."""

    name: str  # tensorgym's name, e.g. "vnni512"
    dtype: str  # the workload dtype it computes ("int8", "bf16", "float32")
    shape: Shape
    lanes: int  # extent of the (last) spatial axis: i (dot) or i2 (tile)
    depth: int  # extent of the reduction axis r, in elements
    group: int  # reduction elements per 32-bit lane of the weights' packing
    rows: int = 1  # extent of i1 (tile); 1 for dot
    isa: tuple[tuple[str, ...], ...] = ()  # alternatives, each a set of /proc/cpuinfo flags that suffices
    instruction: str = ""  # the machine instruction, for messages and tables
    vector_registers: int = 0  # dot: vector registers one call needs (accumulator, weights, broadcast activations)
    tile_registers: int = 0  # tile: AMX tile registers one call needs (C, A, B) of the 8
    activation_max: int | None = None  # exact only for activations <= this (None: every input)
    # Which TIR implementation of :mod:`.tir` computes it ("amx", "vnni", "pmaddubsw", "pmaddwd", "dpbf16",
    # "fma"), each generic in the lanes, depth and operand types: a new intrinsic of a known form is one line here.
    form: str = ""
    # The type the kernel packs the activations (weights) in when it is not the workload's: ``"int16"`` for
    # vpmaddwd, so that the widening happens once per element while packing, not in every call.
    packed_activations: str = ""
    packed_weights: str = ""

    @property
    def tvm_name(self) -> str:
        """The name its TensorIntrin is registered under in TVM."""
        return f"tensorgym.{self.name}"

    @property
    def axes(self) -> tuple[str, ...]:
        return ("i", "r") if self.shape == "dot" else ("i1", "i2", "r")

    @property
    def extents(self) -> dict[str, int]:
        if self.shape == "dot":
            return {"i": self.lanes, "r": self.depth}
        return {"i1": self.rows, "i2": self.lanes, "r": self.depth}

    @property
    def macs(self) -> int:
        """Multiply-adds of one call."""
        return self.rows * self.lanes * self.depth

    @property
    def label(self) -> str:
        sizes = "x".join(str(e) for e in self.extents.values())
        return f"{self.name} {sizes} ({self.instruction})"

    def missing_isa(self, target: Target) -> str | None:
        """None if ``target`` can run it, else what it lacks (e.g. ``"amx_int8"``)."""
        if target.kind != "llvm":
            return f"target kind {target.kind}"
        flags = set(target.cpu_flags)
        if any(set(option) <= flags for option in self.isa):
            return None
        return " or ".join("+".join(sorted(set(option) - flags)) for option in self.isa)

    def inexact_for(self, dtype: str) -> str | None:
        """None if it computes a ``dtype`` workload's random inputs exactly, else why not."""
        if self.activation_max is not None and dtype == "int8" and self.activation_max < UINT8_MAX:
            return (f"{self.instruction} saturates its int16 pair sums: exact only for activations <= "
                    f"{self.activation_max}, and int8 workloads use all of 0-{UINT8_MAX}")
        return None

    def why_not_runs(self, target: Target) -> str | None:
        """None if the mapping space runs it on ``target`` for its own dtype, else why not (one clause)."""
        missing = self.missing_isa(target)
        return f"the CPU lacks {missing}" if missing else self.inexact_for(self.dtype)


# Records store a config's candidate as an index into the candidates of its dtype, enumerated in registry
# order: a new intrinsic goes after the existing ones of its dtype, so that earlier records keep their meaning.
INTRINSICS: dict[str, Intrinsic] = {i.name: i for i in (
    Intrinsic("amx_int8", "int8", "tile", lanes=16, depth=64, group=4, rows=16, form="amx",
              isa=(("amx_tile", "amx_int8"),), instruction="AMX tdpbusd", tile_registers=3),
    Intrinsic("amx_int8_2x2", "int8", "tile", lanes=32, depth=128, group=4, rows=32, form="amx",
              isa=(("amx_tile", "amx_int8"),), instruction="AMX tdpbusd, 2x2 tiles", tile_registers=8),
    Intrinsic("vnni512", "int8", "dot", lanes=16, depth=4, group=4, form="vnni", isa=(("avx512_vnni",),),
              instruction="AVX512-VNNI vpdpbusd zmm", vector_registers=3),
    Intrinsic("vnni256", "int8", "dot", lanes=8, depth=4, group=4, form="vnni",
              isa=(("avx512_vnni", "avx512vl"), ("avx_vnni",)), instruction="VNNI vpdpbusd ymm",
              vector_registers=3),
    Intrinsic("pmadd512", "int8", "dot", lanes=16, depth=4, group=4, form="pmaddubsw", isa=(("avx512bw",),),
              instruction="AVX512BW vpmaddubsw+vpmaddwd", vector_registers=4, activation_max=127),
    Intrinsic("amx_bf16", "bf16", "tile", lanes=16, depth=32, group=2, rows=16, form="amx",
              isa=(("amx_tile", "amx_bf16"),), instruction="AMX tdpbf16ps", tile_registers=3),
    Intrinsic("amx_bf16_2x2", "bf16", "tile", lanes=32, depth=64, group=2, rows=32, form="amx",
              isa=(("amx_tile", "amx_bf16"),), instruction="AMX tdpbf16ps, 2x2 tiles", tile_registers=8),
    Intrinsic("bf16dot512", "bf16", "dot", lanes=16, depth=2, group=2, form="dpbf16", isa=(("avx512_bf16",),),
              instruction="AVX512-BF16 vdpbf16ps zmm", vector_registers=3),
    Intrinsic("fma512", "float32", "dot", lanes=16, depth=1, group=1, form="fma", isa=(("avx512f",),),
              instruction="AVX-512 vfmadd231ps zmm", vector_registers=3),
    # AVX2 + FMA (Haswell, Zen 1-3, and every later x86-64 CPU): 16 ymm registers.
    # vector_registers: the accumulator, the widened weights, the broadcast activations and vpmaddwd's product
    # (added to the accumulator by a separate vpaddd).
    # The activations are packed as int16 (each is broadcast to every lane of many calls: widening them once
    # while packing saves a zero-extension per call); the weights stay int8 in memory and are sign-extended
    # in the call (one vpmovsxbw per weight vector, shared by the rows of the register block).
    Intrinsic("pmaddwd256", "int8", "dot", lanes=8, depth=2, group=2, form="pmaddwd", isa=(("avx2",),),
              instruction="AVX2 vpmaddwd ymm on int16-widened operands", vector_registers=4,
              packed_activations="int16"),
    Intrinsic("bf16fma256", "bf16", "dot", lanes=8, depth=1, group=1, form="fma", isa=(("avx2", "fma"),),
              instruction="AVX2 bf16->fp32 + FMA3 vfmadd231ps ymm", vector_registers=3),
    Intrinsic("fma256", "float32", "dot", lanes=8, depth=1, group=1, form="fma", isa=(("avx2", "fma"),),
              instruction="FMA3 vfmadd231ps ymm", vector_registers=3),
)}


def runnable_dtypes(target: Target) -> frozenset[str]:
    """The dtypes the mapping space has an exact intrinsic for on ``target`` (what ``tensorgym info`` lists)."""
    return frozenset(i.dtype for i in INTRINSICS.values() if i.why_not_runs(target) is None)


def intrinsics_for(dtype: str) -> tuple[Intrinsic, ...]:
    """The registered intrinsics that compute ``dtype`` workloads, in registry order."""
    return tuple(i for i in INTRINSICS.values() if i.dtype == dtype)
