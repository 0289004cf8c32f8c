"""Tensor operator workloads: what is computed, independent of how it is scheduled.

A workload is an immutable value: the operator kind and its shapes, plus a
suite and layer name for display. It knows its FLOP count, the loops of its
iteration space, how to build its TVM tensor expression, and how to compute a
NumPy reference for correctness checks.

The paper suites are data (:mod:`tensorgym.suites`); users build their own
workloads with :func:`conv2d` and :func:`matmul`.

Conventions (those of the seed papers' released scripts): batch 1 by default,
NCHW activations, OIHW weights, fp32, zero padding.

**Data types** (``dtype``, part of the workload's key, so records never mix):

==========  =====================  ============  ==================  ======================================
dtype       data x weights         accumulates   output              correctness check
==========  =====================  ============  ==================  ======================================
float32     fp32 x fp32            fp32          fp32                max |out - ref| / max |ref| <= the
                                                                     timing protocol's ``rtol`` (1e-3)
int8        uint8 x int8           int32         int32               exact (the x86 dot-product layout:
                                                                     unsigned activations, signed weights)
bf16        bfloat16 x bfloat16    fp32          fp32                max |out - ref| / max |ref| <= 1e-5
==========  =====================  ============  ==================  ======================================

The reference is computed in float64 from the inputs as stored (for bf16 the
bf16-rounded values): int8 products and sums are exact in float64, and a
bf16 x bf16 product is exact in fp32, so a bf16 kernel differs from it only by
the fp32 accumulation order (about 1e-7 of the largest output for the
reductions of the suites; 1e-5 leaves a wide margin and still catches a lost
or doubled term). Random int8 activations cover the full uint8 range 0-255:
an intrinsic that is exact only for 7-bit activations (``vpmaddubsw``
saturates its int16 pair sums) fails the check and is masked by the spaces
that know it. FLOP counts do not depend on the dtype; throughputs are
reported in GOP/s for int8 and GFLOP/s otherwise (:attr:`Workload.throughput_unit`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from .errors import TensorgymError

LoopKind = Literal["spatial", "reduction"]

# How a tensor is indexed: one entry per tensor dimension (outermost first, the last
# one contiguous in memory), each a tuple of (loop name, coefficient) terms.
# Conv input row index ``y * stride + ry`` is (("y", stride), ("ry", 1)).
Access = tuple[tuple[tuple[str, int], ...], ...]

SUPPORTED_DTYPES = ("float32", "int8", "bf16")

# dtype -> (data, weights, output) element types, as TVM names them.
_ELEMENT_TYPES = {
    "float32": ("float32", "float32", "float32"),
    "int8": ("uint8", "int8", "int32"),
    "bf16": ("bfloat16", "bfloat16", "float32"),
}
_TOLERANCE = {"int8": 0.0, "bf16": 1e-5}  # float32: the timing protocol's rtol
BF16_TOLERANCE = _TOLERANCE["bf16"]


class WorkloadError(TensorgymError, ValueError):
    """A workload was described with shapes that cannot be computed."""


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
    @property
    def shape_params(self) -> dict[str, Any]:
        """The parameters that define the computation (not the display names)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("suite", "name")
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

    def tolerance(self, default: float) -> float:
        """The largest max |out - ref| / max |ref| a correct kernel may show (``default`` for float32)."""
        return _TOLERANCE.get(self.dtype, default)

    @property
    def spatial_loops(self) -> tuple[Loop, ...]:
        return tuple(lp for lp in self.loops if lp.kind == "spatial")

    @property
    def reduction_loops(self) -> tuple[Loop, ...]:
        return tuple(lp for lp in self.loops if lp.kind == "reduction")

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs for correctness checks (data, weights).

        float32 and bf16: uniform in [-1, 1) so sign errors show (bf16: rounded to
        bfloat16, stored as ``ml_dtypes.bfloat16`` arrays); int8: uint8 data over the
        whole range 0-255 and int8 weights over -128-127.
        """
        rng = np.random.default_rng(seed)
        if self.dtype == "int8":
            data_shape, weight_shape = self.input_shapes
            return [rng.integers(0, 256, size=data_shape, dtype=np.uint8),
                    rng.integers(-128, 128, size=weight_shape, dtype=np.int8)]
        arrays = [rng.uniform(-1.0, 1.0, size=s).astype(np.float32) for s in self.input_shapes]
        if self.dtype == "bf16":
            return [to_bfloat16(a) for a in arrays]
        return arrays

    def gflops(self, seconds: float) -> float:
        return self.flops / seconds / 1e9

    def describe(self) -> str:
        raise NotImplementedError


def _check_positive(**values: int) -> None:
    for key, value in values.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise WorkloadError(f"{key} must be an integer, got {value!r}")
        if value < 1:
            raise WorkloadError(f"{key} must be >= 1, got {value}")


def _check_dtype(dtype: str) -> None:
    if dtype not in SUPPORTED_DTYPES:
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


@dataclass(frozen=True)
class Conv2d(Workload):
    """2-D convolution, NCHW activations and OIHW weights.

    ``H, W`` are the *input* height and width; the output is
    ``(H + 2*padding - R) // stride + 1`` (likewise for W).
    """

    op: ClassVar[str] = "conv2d"

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

    def __post_init__(self) -> None:
        _check_positive(N=self.N, C=self.C, H=self.H, W=self.W, F=self.F, R=self.R, S=self.S, stride=self.stride)
        if not isinstance(self.padding, (int, np.integer)) or self.padding < 0:
            raise WorkloadError(f"padding must be an integer >= 0, got {self.padding!r}")
        _check_dtype(self.dtype)
        if self.H + 2 * self.padding < self.R or self.W + 2 * self.padding < self.S:
            raise WorkloadError(
                f"kernel {self.R}x{self.S} is larger than the padded input "
                f"{self.H + 2 * self.padding}x{self.W + 2 * self.padding}"
            )

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
    def loops(self) -> tuple[Loop, ...]:
        return (
            Loop("n", self.N, "spatial"),
            Loop("f", self.F, "spatial"),
            Loop("y", self.OH, "spatial"),
            Loop("x", self.OW, "spatial"),
            Loop("rc", self.C, "reduction"),
            Loop("ry", self.R, "reduction"),
            Loop("rx", self.S, "reduction"),
        )

    @property
    def accesses(self) -> dict[str, Access]:
        st = self.stride
        return {
            "data": ((("n", 1),), (("rc", 1),), (("y", st), ("ry", 1)), (("x", st), ("rx", 1))),
            "kernel": ((("f", 1),), (("rc", 1),), (("ry", 1),), (("rx", 1),)),
            "out": ((("n", 1),), (("f", 1),), (("y", 1),), (("x", 1),)),
        }

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return (self.N, self.C, self.H, self.W), (self.F, self.C, self.R, self.S)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.N, self.F, self.OH, self.OW)

    def te_func(self):
        import tvm
        from tvm import te

        data_t, weight_t, out_t = self.element_types
        data = te.placeholder(self.input_shapes[0], data_t, name="data")
        kernel = te.placeholder(self.input_shapes[1], weight_t, name="kernel")
        p, st = self.padding, self.stride
        if p:
            # A materialised pad stage: inlining it puts a branch in the vectorised
            # inner loop and costs 4-5x on this machine (tvm_probe.md, section 1).
            source = te.compute(
                (self.N, self.C, self.H + 2 * p, self.W + 2 * p),
                lambda n, c, h, w: tvm.tirx.if_then_else(
                    tvm.tirx.all(h >= p, h < self.H + p, w >= p, w < self.W + p),
                    data[n, c, h - p, w - p],
                    tvm.tirx.const(0, data_t),
                ),
                name="pad",
            )
        else:
            source = data
        rc = te.reduce_axis((0, self.C), name="rc")
        ry = te.reduce_axis((0, self.R), name="ry")
        rx = te.reduce_axis((0, self.S), name="rx")
        out = te.compute(
            self.output_shape,
            lambda n, f, y, x: te.sum(_cast(source[n, rc, y * st + ry, x * st + rx], out_t)
                                      * _cast(kernel[f, rc, ry, rx], out_t), axis=[rc, ry, rx]),
            name="conv",
        )
        return te.create_prim_func([data, kernel, out])

    def reference(self, data: np.ndarray, kernel: np.ndarray) -> np.ndarray:
        p, st = self.padding, self.stride
        x = np.pad(_as_float64(data), ((0, 0), (0, 0), (p, p), (p, p)))
        windows = np.lib.stride_tricks.sliding_window_view(x, (self.R, self.S), axis=(2, 3))
        windows = windows[:, :, :: st, :: st][:, :, : self.OH, : self.OW]  # N C OH OW R S
        out = np.tensordot(windows, _as_float64(kernel), axes=([1, 4, 5], [1, 2, 3]))  # N OH OW F
        return out.transpose(0, 3, 1, 2)

    def describe(self) -> str:
        return (
            f"conv2d N={self.N} C={self.C} H={self.H} W={self.W} F={self.F} "
            f"{self.R}x{self.S} stride={self.stride} pad={self.padding} -> {self.OH}x{self.OW}"
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
        _check_positive(M=self.M, N=self.N, K=self.K)
        _check_dtype(self.dtype)

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
    dtype: str = "float32", suite: str = "custom", name: str = "",
) -> Conv2d:
    """Build a conv2d workload from shapes. ``padding="same"`` means ``(R - 1) // 2``."""
    if padding == "same":
        if R != S or R % 2 == 0:
            raise WorkloadError("padding='same' needs an odd square kernel; pass an integer padding instead")
        padding = (R - 1) // 2
    elif not isinstance(padding, (int, np.integer)):
        raise WorkloadError(f"padding must be an integer or 'same', got {padding!r}")
    return Conv2d(N, C, H, W, F, R, S, stride, int(padding), dtype, suite=suite, name=name)


def matmul(M: int, N: int, K: int, *, dtype: str = "float32", suite: str = "custom", name: str = "") -> Matmul:
    """Build a matmul workload ``C[M, N] = A[M, K] @ B[K, N]``."""
    return Matmul(M, N, K, dtype, suite=suite, name=name)
