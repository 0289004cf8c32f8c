"""Tensor operator workloads: what is computed, independent of how it is scheduled.

A workload is an immutable value: the operator kind and its shapes, plus a
suite and layer name for display. It knows its FLOP count, the loops of its
iteration space, how to build its TVM tensor expression, and how to compute a
NumPy reference for correctness checks.

The paper suites are data (:mod:`tensorgym.suites`); users build their own
workloads with :func:`conv2d` and :func:`matmul`.

Conventions (those of the seed papers' released scripts): batch 1 by default,
NCHW activations, OIHW weights, fp32, zero padding. A conv2d can also be laid
out the way oneDNN computes it (``layout=``):

* ``"NHWC"``: activations NHWC, weights HWIO (output channels contiguous: the
  layout of TensorFlow and of TVM's NHWC convolutions), output NHWC;
* ``"NCHWc"``: oneDNN's blocked layout, channels in blocks of ``channel_block``
  ``b``, the target's fp32 lane count (16 on AVX-512, 8 on AVX2; ``"NCHW8c"`` and
  ``"NCHW16c"`` name both at once): activations ``[n][c/b][h][w][bc]`` (nChw16c,
  nChw8c), weights ``[f/b][c/b][r][s][bc][bf]`` (OIhw16i16o), output
  ``[n][f/b][h][w][bf]``. The block is part of the key; environments and the
  command line given ``"NCHWc"`` pick the target's lanes.

The layout is part of the workload (its key, its inputs, its reference), not
of a schedule: a network that keeps its tensors in that layout pays no
conversion. :meth:`Conv2d.canonical_inputs` and :meth:`Conv2d.from_canonical_output`
convert from and to NCHW/OIHW.

**Data types** (``dtype``, part of the workload's key, so records never mix):

==========  =====================  ============  ==================  ======================================
dtype       data x weights         accumulates   output              correctness check
==========  =====================  ============  ==================  ======================================
float32     fp32 x fp32            fp32          fp32                max |out - ref| / max |ref| <= the
                                                                     timing protocol's ``rtol`` (1e-3)
int8        uint8 x int8           int32         int32               exact (the x86 dot-product layout:
                                                                     unsigned activations, signed weights)
bf16        bfloat16 x bfloat16    fp32          fp32                max |out - ref| / max |ref| <= 1e-5
                                                                     (on tensor cores: 1e-3)
float16     fp16 x fp16            fp32          fp32                as bf16 (the GPU's mixed precision,
                                                                     seed 001's tensor-core convention)
==========  =====================  ============  ==================  ======================================

The reference is computed in float64 from the inputs as stored (for bf16 the
bf16-rounded values): int8 products and sums are exact in float64, and a
bf16 x bf16 product is exact in fp32, so a bf16 kernel differs from it only by
the fp32 accumulation order (about 1e-7 of the largest output for the
reductions of the suites; 1e-5 leaves a wide margin and still catches a lost
or doubled term; the same holds for fp16). Tensor cores sum a step's products
with truncation rather than rounding, and float32 inputs run on them as tf32,
so kernels that accumulate on tensor cores (``cutlass``) are held to the
protocol's ``rtol`` instead (:meth:`Workload.tolerance`). Random int8
activations cover the full uint8 range 0-255: an intrinsic that is exact only
for 7-bit activations (``vpmaddubsw`` saturates its int16 pair sums) fails the
check and is masked by the spaces that know it. FLOP counts do not depend on the dtype; throughputs are
reported in GOP/s for int8 and GFLOP/s otherwise (:attr:`Workload.throughput_unit`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from math import prod
from typing import Any, ClassVar, Literal

import numpy as np

from .errors import TensorgymError

LoopKind = Literal["spatial", "reduction"]

# How a tensor is indexed: one entry per tensor dimension (outermost first, the last
# one contiguous in memory), each a tuple of (loop name, coefficient) terms.
# Conv input row index ``y * stride + ry`` is (("y", stride), ("ry", 1)).
Access = tuple[tuple[tuple[str, int], ...], ...]

SUPPORTED_DTYPES = ("float32", "int8", "bf16", "float16")

# dtype -> (data, weights, output) element types, as TVM names them.
_ELEMENT_TYPES = {
    "float32": ("float32", "float32", "float32"),
    "int8": ("uint8", "int8", "int32"),
    "bf16": ("bfloat16", "bfloat16", "float32"),
    "float16": ("float16", "float16", "float32"),
}
# dtype -> max |out - ref| / max |ref| of a correct kernel (float32: the timing protocol's rtol). Kernels that
# accumulate on tensor cores are held to the protocol's rtol for every floating-point dtype (see the module docs).
_TOLERANCE = {"int8": 0.0, "bf16": 1e-5, "float16": 1e-5}
BF16_TOLERANCE = _TOLERANCE["bf16"]
CONV_LAYOUTS = ("NCHW", "NHWC", "NCHWc")
# Channels per block of the NCHWc layout: the target's fp32 lanes, as oneDNN blocks (nChw16c on AVX-512,
# nChw8c on AVX2, nChw4c on SSE and NEON). 16 is the default, left out of keys (the block of every NCHWc
# workload measured before the block was a parameter).
CHANNEL_BLOCK = 16
CHANNEL_BLOCKS = (4, 8, 16)

# What a workload may be, refused up front (before any divisor is looked for): every loop extent at
# most MAX_EXTENT, every tensor at most MAX_TENSOR_ELEMENTS elements (1 GiB of float32; the NumPy
# reference computes in float64, twice that), at most MAX_FLOPS floating-point operations (a 16384^3
# matmul is 8.8e12). Larger kernels would take minutes per measurement or not fit in memory.
MAX_EXTENT = 1 << 24
MAX_TENSOR_ELEMENTS = 1 << 28
MAX_FLOPS = 10**13


class WorkloadError(TensorgymError, ValueError):
    """A workload was described with shapes that cannot be computed."""


def parse_layout(layout: str) -> tuple[str, int | None]:
    """``("NCHWc", 8)`` for ``"NCHW8c"``; ``(layout, None)`` for a layout named without a block."""
    match = re.fullmatch(r"NCHW(\d+)c", layout) if isinstance(layout, str) else None
    return ("NCHWc", int(match.group(1))) if match else (layout, None)


@dataclass(frozen=True)
class Loop:
    """One loop of a workload's iteration space."""

    name: str
    extent: int
    kind: LoopKind


@dataclass(frozen=True)
class Workload:
    """Base class of operator workloads. Subclasses are frozen dataclasses."""

    op: ClassVar[str] = ""
    # Every operator also has a ``dtype`` field (its last positional one): see the module docs.

    suite: str = field(default="custom", compare=False, kw_only=True)
    name: str = field(default="", compare=False, kw_only=True)

    # -- identity ---------------------------------------------------------
    # Parameters left out of keys and JSON while they have this value: adding a parameter
    # must not change the key of every workload measured before it existed.
    quiet_defaults: ClassVar[dict[str, Any]] = {}

    @property
    def shape_params(self) -> dict[str, Any]:
        """The parameters that define the computation (not the display names)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("suite", "name")
            and not (f.name in self.quiet_defaults and getattr(self, f.name) == self.quiet_defaults[f.name])
        }

    @property
    def key(self) -> str:
        """Canonical identity used by the database: same computation, same key."""
        params = ",".join(f"{k}={v}" for k, v in self.shape_params.items())
        return f"{self.op}({params})"

    @property
    def label(self) -> str:
        """Short human name, e.g. ``ResNet-50/R5`` or ``ResNet-18/C7[int8]`` (falls back to the key)."""
        if not self.name:
            return self.key
        return f"{self.suite}/{self.name}" + (f"[{self.dtype}]" if self.dtype != "float32" else "")

    def with_dtype(self, dtype: str) -> "Workload":
        """The same computation (and display names) in another data type."""
        return dataclasses.replace(self, dtype=dtype)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, **self.shape_params, "suite": self.suite, "name": self.name}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Workload":
        data = dict(data)
        op = data.pop("op", None)
        cls = _OPS.get(op)
        if cls is None:
            raise WorkloadError(f"unknown operator {op!r}; known: {sorted(_OPS)}")
        return cls(**data)

    # -- to be provided by each operator ----------------------------------
    @property
    def flops(self) -> int:
        raise NotImplementedError

    @property
    def loops(self) -> tuple[Loop, ...]:
        """Loops of the main computation, spatial first, in layout order."""
        raise NotImplementedError

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        raise NotImplementedError

    @property
    def output_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    @property
    def accesses(self) -> dict[str, Access]:
        """Index expressions of every tensor (inputs first, output last) in the loop variables."""
        raise NotImplementedError

    def te_func(self):
        """The TVM ``PrimFunc`` (inputs..., output), unscheduled."""
        raise NotImplementedError

    def reference(self, *inputs: np.ndarray) -> np.ndarray:
        """The correct output, computed with NumPy in float64."""
        raise NotImplementedError

    # -- shared helpers ----------------------------------------------------
    @property
    def gflop(self) -> float:
        return self.flops / 1e9

    @property
    def unpadded_flops(self) -> int:
        """The FLOPs of the multiply-adds that read the input, not a zero border padded around it: what a kernel
        that skips the border's taps computes (oneDNN's convolutions and the microkernels do). :attr:`flops`,
        the convention of every GFLOP/s figure, counts every tap; a share of the machine's peak is of these."""
        return self.flops

    @property
    def element_types(self) -> tuple[str, str, str]:
        """TVM element types of (data, weights, output), e.g. ``("uint8", "int8", "int32")`` for int8."""
        return _ELEMENT_TYPES[self.dtype]

    @property
    def output_dtype(self) -> str:
        """The NumPy / TVM type of the output (int32 for int8 workloads)."""
        return self.element_types[2]

    @property
    def throughput_unit(self) -> str:
        """What throughputs of this workload are called: ``"GOP/s"`` (int8) or ``"GFLOP/s"``."""
        return "GOP/s" if self.dtype == "int8" else "GFLOP/s"

    def tolerance(self, default: float, *, tensor_cores: bool = False) -> float:
        """The largest max |out - ref| / max |ref| a correct kernel may show (``default``, the protocol's
        ``rtol``, for float32, and for every floating-point dtype when it accumulates on ``tensor_cores``)."""
        if tensor_cores and self.dtype != "int8":
            return default
        return _TOLERANCE.get(self.dtype, default)

    @property
    def spatial_loops(self) -> tuple[Loop, ...]:
        return tuple(lp for lp in self.loops if lp.kind == "spatial")

    @property
    def reduction_loops(self) -> tuple[Loop, ...]:
        return tuple(lp for lp in self.loops if lp.kind == "reduction")

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs for correctness checks (data, weights).

        float32, bf16 and float16: uniform in [-1, 1) so sign errors show (bf16: rounded to
        bfloat16, stored as ``ml_dtypes.bfloat16`` arrays; float16: NumPy float16); int8: uint8
        data over the whole range 0-255 and int8 weights over -128-127.
        """
        rng = np.random.default_rng(seed)
        if self.dtype == "int8":
            data_shape, weight_shape = self.input_shapes
            return [rng.integers(0, 256, size=data_shape, dtype=np.uint8),
                    rng.integers(-128, 128, size=weight_shape, dtype=np.int8)]
        arrays = [rng.uniform(-1.0, 1.0, size=s).astype(np.float32) for s in self.input_shapes]
        if self.dtype == "bf16":
            return [to_bfloat16(a) for a in arrays]
        if self.dtype == "float16":
            return [a.astype(np.float16) for a in arrays]
        return arrays

    def gflops(self, seconds: float) -> float:
        return self.flops / seconds / 1e9

    def describe(self) -> str:
        raise NotImplementedError


def _check_positive(workload: "Workload", *names: str) -> None:
    """Each named field is an integer in [1, MAX_EXTENT]; NumPy integers are stored as ``int``."""
    for key in names:
        value = getattr(workload, key)
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise WorkloadError(f"{key} must be an integer, got {type(value).__name__} {value!r:.40}")
        if value < 1:
            raise WorkloadError(f"{key} must be >= 1, got {value}")
        if value > MAX_EXTENT:
            raise WorkloadError(f"{key}={value} is larger than tensorgym's largest extent, {MAX_EXTENT} (2^24)")
        object.__setattr__(workload, key, int(value))  # frozen: JSON and database keys need Python ints


def _check_size(workload: "Workload") -> None:
    """The workload's tensors and FLOP count are within tensorgym's limits (see MAX_TENSOR_ELEMENTS)."""
    for shape in (*workload.input_shapes, workload.output_shape):
        if prod(shape) > MAX_TENSOR_ELEMENTS:
            raise WorkloadError(f"a tensor of shape {shape} has {prod(shape):.3g} elements; tensorgym takes at most "
                                f"{MAX_TENSOR_ELEMENTS} (2^28, 1 GiB of float32) per tensor")
    if workload.flops > MAX_FLOPS:
        raise WorkloadError(f"{workload.describe()} is {workload.flops:.3g} FLOPs; tensorgym tunes kernels of at most "
                            f"{MAX_FLOPS:.0e} FLOPs (each measurement would take minutes)")


def _check_dtype(dtype: str) -> None:
    if not isinstance(dtype, str) or dtype not in SUPPORTED_DTYPES:
        raise WorkloadError(f"dtype {dtype!r} is not supported; use one of {', '.join(SUPPORTED_DTYPES)}")


def to_bfloat16(array: np.ndarray) -> np.ndarray:
    """``array`` rounded to bfloat16 (round to nearest even), as an ``ml_dtypes.bfloat16`` array."""
    import ml_dtypes  # installed with TVM

    return np.asarray(array, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _as_float64(array: np.ndarray) -> np.ndarray:
    # bfloat16 arrays go through float32 (exact); the others convert directly (exact for int8/uint8/float32).
    array = np.asarray(array)
    return array.astype(np.float32).astype(np.float64) if array.dtype.name == "bfloat16" else array.astype(np.float64)


def _cast(value, dtype: str):
    return value if value.dtype == dtype else value.astype(dtype)


def numpy_dtype(element_type: str) -> np.dtype:
    """The NumPy dtype of a TVM element type name (:attr:`Workload.element_types`; bfloat16 comes from
    ``ml_dtypes``, a TVM dependency)."""
    if element_type == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(element_type)


@dataclass(frozen=True)
class Conv2d(Workload):
    """2-D convolution; NCHW activations and OIHW weights unless ``layout`` says otherwise (see the module docs).

    ``H, W`` are the *input* height and width; the output is
    ``(H + 2*padding - R) // stride + 1`` (likewise for W).
    """

    op: ClassVar[str] = "conv2d"
    quiet_defaults: ClassVar[dict[str, Any]] = {"layout": "NCHW", "channel_block": CHANNEL_BLOCK}

    N: int
    C: int
    H: int
    W: int
    F: int
    R: int
    S: int
    stride: int = 1
    padding: int = 0
    dtype: str = "float32"
    layout: str = "NCHW"
    channel_block: int = CHANNEL_BLOCK  # NCHWc only: channels per block (8 is nChw8c)

    def __post_init__(self) -> None:
        layout, block = parse_layout(self.layout)
        if block is not None:  # "NCHW8c": the layout NCHWc with its block
            if self.channel_block not in (CHANNEL_BLOCK, block):
                raise WorkloadError(f"layout {self.layout} has blocks of {block} channels, not {self.channel_block}")
            object.__setattr__(self, "layout", layout)
            object.__setattr__(self, "channel_block", block)
        _check_positive(self, "N", "C", "H", "W", "F", "R", "S", "stride")
        if (not isinstance(self.padding, (int, np.integer)) or isinstance(self.padding, (bool, np.bool_))
                or not 0 <= self.padding <= MAX_EXTENT):
            raise WorkloadError(f"padding must be an integer in [0, {MAX_EXTENT}] or 'same', got {self.padding!r:.40}")
        object.__setattr__(self, "padding", int(self.padding))
        _check_dtype(self.dtype)
        if self.H + 2 * self.padding < self.R or self.W + 2 * self.padding < self.S:
            raise WorkloadError(
                f"kernel {self.R}x{self.S} is larger than the padded input "
                f"{self.H + 2 * self.padding}x{self.W + 2 * self.padding}"
            )
        if self.layout not in CONV_LAYOUTS:
            raise WorkloadError(f"layout must be one of {CONV_LAYOUTS} (or NCHW8c, NCHW16c), got {self.layout!r}")
        if self.channel_block not in CHANNEL_BLOCKS or isinstance(self.channel_block, bool):
            raise WorkloadError(f"channel_block must be one of {CHANNEL_BLOCKS}, got {self.channel_block!r}")
        if self.channel_block != CHANNEL_BLOCK and self.layout != "NCHWc":
            raise WorkloadError(f"channel_block applies to the NCHWc layout only, not {self.layout}")
        b = self.channel_block
        if self.layout == "NCHWc" and (self.C % b or self.F % b):
            raise WorkloadError(f"layout {self.layout_name} needs input and output channels in blocks of {b}; "
                                f"C={self.C}, F={self.F}: use layout NHWC or NCHW")
        _check_size(self)

    @property
    def layout_name(self) -> str:
        """The layout as oneDNN names it, with the block: ``NCHW``, ``NHWC``, ``NCHW8c``, ``NCHW16c``."""
        return f"NCHW{self.channel_block}c" if self.layout == "NCHWc" else self.layout

    @property
    def OH(self) -> int:
        return (self.H + 2 * self.padding - self.R) // self.stride + 1

    @property
    def OW(self) -> int:
        return (self.W + 2 * self.padding - self.S) // self.stride + 1

    @property
    def flops(self) -> int:
        return 2 * self.N * self.F * self.OH * self.OW * self.C * self.R * self.S

    @property
    def unpadded_flops(self) -> int:
        def taps(extent: int, out: int, kernel: int) -> int:  # (output position, tap) pairs inside the input
            return sum(0 <= o * self.stride - self.padding + r < extent for o in range(out) for r in range(kernel))

        return 2 * self.N * self.F * self.C * taps(self.H, self.OH, self.R) * taps(self.W, self.OW, self.S)

    @property
    def loops(self) -> tuple[Loop, ...]:
        """In layout order: the last spatial loop is the output's contiguous dimension."""
        n, y, x = Loop("n", self.N, "spatial"), Loop("y", self.OH, "spatial"), Loop("x", self.OW, "spatial")
        ry, rx = Loop("ry", self.R, "reduction"), Loop("rx", self.S, "reduction")
        if self.layout == "NHWC":
            return (n, y, x, Loop("f", self.F, "spatial"), ry, rx, Loop("rc", self.C, "reduction"))
        if self.layout == "NCHWc":
            b = self.channel_block
            return (n, Loop("fo", self.F // b, "spatial"), y, x, Loop("fi", b, "spatial"),
                    Loop("rco", self.C // b, "reduction"), ry, rx, Loop("rci", b, "reduction"))
        return (n, Loop("f", self.F, "spatial"), y, x, Loop("rc", self.C, "reduction"), ry, rx)

    @property
    def accesses(self) -> dict[str, Access]:
        st = self.stride
        h, w = (("y", st), ("ry", 1)), (("x", st), ("rx", 1))
        if self.layout == "NHWC":
            return {
                "data": ((("n", 1),), h, w, (("rc", 1),)),
                "kernel": ((("ry", 1),), (("rx", 1),), (("rc", 1),), (("f", 1),)),
                "out": ((("n", 1),), (("y", 1),), (("x", 1),), (("f", 1),)),
            }
        if self.layout == "NCHWc":
            return {
                "data": ((("n", 1),), (("rco", 1),), h, w, (("rci", 1),)),
                "kernel": ((("fo", 1),), (("rco", 1),), (("ry", 1),), (("rx", 1),), (("rci", 1),), (("fi", 1),)),
                "out": ((("n", 1),), (("fo", 1),), (("y", 1),), (("x", 1),), (("fi", 1),)),
            }
        return {
            "data": ((("n", 1),), (("rc", 1),), h, w),
            "kernel": ((("f", 1),), (("rc", 1),), (("ry", 1),), (("rx", 1),)),
            "out": ((("n", 1),), (("f", 1),), (("y", 1),), (("x", 1),)),
        }

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        N, C, H, W, F, R, S, b = self.N, self.C, self.H, self.W, self.F, self.R, self.S, self.channel_block
        if self.layout == "NHWC":
            return (N, H, W, C), (R, S, C, F)
        if self.layout == "NCHWc":
            return (N, C // b, H, W, b), (F // b, C // b, R, S, b, b)
        return (N, C, H, W), (F, C, R, S)

    @property
    def output_shape(self) -> tuple[int, ...]:
        if self.layout == "NHWC":
            return (self.N, self.OH, self.OW, self.F)
        if self.layout == "NCHWc":
            return (self.N, self.F // self.channel_block, self.OH, self.OW, self.channel_block)
        return (self.N, self.F, self.OH, self.OW)

    def canonical(self) -> "Conv2d":
        """The same convolution in the NCHW layout."""
        return dataclasses.replace(self, layout="NCHW", channel_block=CHANNEL_BLOCK)

    def with_layout(self, layout: str, channel_block: int | None = None) -> "Conv2d":
        """The same convolution in another layout (same suite and name): ``NCHW``, ``NHWC``, ``NCHWc`` (blocks of
        ``channel_block`` channels, default 16) or ``NCHW8c`` / ``NCHW16c``."""
        name, block = parse_layout(layout)
        if block is not None and channel_block is not None and block != channel_block:
            raise WorkloadError(f"layout {layout} has blocks of {block} channels, not {channel_block}")
        block = block or channel_block or CHANNEL_BLOCK
        return dataclasses.replace(self, layout=name, channel_block=block if name == "NCHWc" else CHANNEL_BLOCK)

    def canonical_inputs(self, data: np.ndarray, kernel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inputs in NCHW / OIHW."""
        if self.layout == "NHWC":
            return np.ascontiguousarray(data.transpose(0, 3, 1, 2)), np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))
        if self.layout == "NCHWc":
            data = data.transpose(0, 1, 4, 2, 3).reshape(self.N, self.C, self.H, self.W)
            kernel = kernel.transpose(0, 5, 1, 4, 2, 3).reshape(self.F, self.C, self.R, self.S)
            return np.ascontiguousarray(data), np.ascontiguousarray(kernel)
        return data, kernel

    def layout_inputs(self, data: np.ndarray, kernel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """NCHW / OIHW inputs in this workload's layout (the inverse of :meth:`canonical_inputs`)."""
        b = self.channel_block
        if self.layout == "NHWC":
            return np.ascontiguousarray(data.transpose(0, 2, 3, 1)), np.ascontiguousarray(kernel.transpose(2, 3, 1, 0))
        if self.layout == "NCHWc":
            data = data.reshape(self.N, self.C // b, b, self.H, self.W).transpose(0, 1, 3, 4, 2)
            kernel = kernel.reshape(self.F // b, b, self.C // b, b, self.R, self.S).transpose(0, 2, 4, 5, 3, 1)
            return np.ascontiguousarray(data), np.ascontiguousarray(kernel)
        return data, kernel

    def from_canonical_output(self, out: np.ndarray) -> np.ndarray:
        """An NCHW output in this workload's layout."""
        if self.layout == "NHWC":
            return np.ascontiguousarray(out.transpose(0, 2, 3, 1))
        if self.layout == "NCHWc":
            b = self.channel_block
            return np.ascontiguousarray(out.reshape(self.N, self.F // b, b, self.OH, self.OW).transpose(0, 1, 3, 4, 2))
        return out

    def te_func(self):
        import tvm
        from tvm import te

        data_t, weight_t, out_t = self.element_types
        data = te.placeholder(self.input_shapes[0], data_t, name="data")
        kernel = te.placeholder(self.input_shapes[1], weight_t, name="kernel")
        p, st = self.padding, self.stride
        hw = {"NCHW": (2, 3), "NHWC": (1, 2), "NCHWc": (2, 3)}[self.layout]  # the spatial axes of ``data``
        if p:
            # A materialised pad stage: inlining it puts a branch in the vectorised
            # inner loop, which was measured 4-5x slower on an AVX-512 CPU.
            shape = [d + 2 * p if i in hw else d for i, d in enumerate(self.input_shapes[0])]

            def padded(*index):
                h, w = index[hw[0]], index[hw[1]]
                inner = [i - p if axis in hw else i for axis, i in enumerate(index)]
                return tvm.tirx.if_then_else(tvm.tirx.all(h >= p, h < self.H + p, w >= p, w < self.W + p),
                                             data[tuple(inner)], tvm.tirx.const(0, data_t))

            source = te.compute(shape, padded, name="pad")
        else:
            source = data
        ry = te.reduce_axis((0, self.R), name="ry")
        rx = te.reduce_axis((0, self.S), name="rx")
        if self.layout == "NHWC":
            rc = te.reduce_axis((0, self.C), name="rc")
            out = te.compute(
                self.output_shape,
                lambda n, y, x, f: te.sum(_cast(source[n, y * st + ry, x * st + rx, rc], out_t)
                                          * _cast(kernel[ry, rx, rc, f], out_t),
                                          axis=[ry, rx, rc]),
                name="conv",
            )
        elif self.layout == "NCHWc":
            rco = te.reduce_axis((0, self.C // self.channel_block), name="rco")
            rci = te.reduce_axis((0, self.channel_block), name="rci")
            out = te.compute(
                self.output_shape,
                lambda n, fo, y, x, fi: te.sum(
                    _cast(source[n, rco, y * st + ry, x * st + rx, rci], out_t)
                    * _cast(kernel[fo, rco, ry, rx, rci, fi], out_t),
                    axis=[rco, ry, rx, rci]),
                name="conv",
            )
        else:
            rc = te.reduce_axis((0, self.C), name="rc")
            out = te.compute(
                self.output_shape,
                lambda n, f, y, x: te.sum(_cast(source[n, rc, y * st + ry, x * st + rx], out_t)
                                          * _cast(kernel[f, rc, ry, rx], out_t),
                                          axis=[rc, ry, rx]),
                name="conv",
            )
        return te.create_prim_func([data, kernel, out])

    def reference(self, data: np.ndarray, kernel: np.ndarray) -> np.ndarray:
        data, kernel = self.canonical_inputs(data, kernel)
        p, st = self.padding, self.stride
        x = np.pad(_as_float64(data), ((0, 0), (0, 0), (p, p), (p, p)))
        windows = np.lib.stride_tricks.sliding_window_view(x, (self.R, self.S), axis=(2, 3))
        windows = windows[:, :, :: st, :: st][:, :, : self.OH, : self.OW]  # N C OH OW R S
        out = np.tensordot(windows, _as_float64(kernel), axes=([1, 4, 5], [1, 2, 3]))  # N OH OW F
        return self.from_canonical_output(out.transpose(0, 3, 1, 2))

    def describe(self) -> str:
        layout = "" if self.layout == "NCHW" else f" {self.layout}"
        return (
            f"conv2d N={self.N} C={self.C} H={self.H} W={self.W} F={self.F} "
            f"{self.R}x{self.S} stride={self.stride} pad={self.padding} -> {self.OH}x{self.OW}{layout}"
            + (f" {self.dtype}" if self.dtype != "float32" else "")
        )


@dataclass(frozen=True)
class Matmul(Workload):
    """Dense matrix multiplication ``C[M, N] = A[M, K] @ B[K, N]``."""

    op: ClassVar[str] = "matmul"

    M: int
    N: int
    K: int
    dtype: str = "float32"

    def __post_init__(self) -> None:
        _check_positive(self, "M", "N", "K")
        _check_dtype(self.dtype)
        _check_size(self)

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def loops(self) -> tuple[Loop, ...]:
        return (Loop("i", self.M, "spatial"), Loop("j", self.N, "spatial"), Loop("k", self.K, "reduction"))

    @property
    def accesses(self) -> dict[str, Access]:
        return {"A": ((("i", 1),), (("k", 1),)), "B": ((("k", 1),), (("j", 1),)), "C": ((("i", 1),), (("j", 1),))}

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return (self.M, self.K), (self.K, self.N)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.M, self.N)

    def te_func(self):
        from tvm import te

        a_t, b_t, out_t = self.element_types
        a = te.placeholder(self.input_shapes[0], a_t, name="A")
        b = te.placeholder(self.input_shapes[1], b_t, name="B")
        k = te.reduce_axis((0, self.K), name="k")
        c = te.compute(self.output_shape, lambda i, j: te.sum(_cast(a[i, k], out_t) * _cast(b[k, j], out_t), axis=k),
                       name="C")
        return te.create_prim_func([a, b, c])

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _as_float64(a) @ _as_float64(b)

    def describe(self) -> str:
        return f"matmul M={self.M} N={self.N} K={self.K}" + (f" {self.dtype}" if self.dtype != "float32" else "")


_OPS: dict[str, type[Workload]] = {"conv2d": Conv2d, "matmul": Matmul}


def conv2d(
    N: int, C: int, H: int, W: int, F: int, R: int, S: int, stride: int = 1, padding: int | str = "same", *,
    dtype: str = "float32", suite: str = "custom", name: str = "", layout: str = "NCHW",
) -> Conv2d:
    """Build a conv2d workload from shapes. ``padding="same"`` means ``(R - 1) // 2``; ``layout`` is
    ``"NCHW"`` (default), ``"NHWC"`` or ``"NCHWc"`` (see the module docs)."""
    if isinstance(padding, str) and padding == "same":
        ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in (R, S))
        if ints and (R != S or R % 2 == 0):
            raise WorkloadError("padding='same' needs an odd square kernel; pass an integer padding instead")
        padding = (R - 1) // 2 if ints else 0  # Conv2d says what is wrong with R or S
    elif not isinstance(padding, (int, np.integer)) or isinstance(padding, (bool, np.bool_)):
        raise WorkloadError(f"padding must be an integer or 'same', got {padding!r:.40}")
    return Conv2d(N, C, H, W, F, R, S, stride, int(padding), dtype, layout, suite=suite, name=name)


def matmul(M: int, N: int, K: int, *, dtype: str = "float32", suite: str = "custom", name: str = "") -> Matmul:
    """Build a matmul workload ``C[M, N] = A[M, K] @ B[K, N]``."""
    return Matmul(M, N, K, dtype, suite=suite, name=name)
