"""Tensor operator workloads: what is computed, independent of how it is scheduled.

A workload is an immutable value: the operator kind and its shapes, plus a
suite and layer name for display. It knows its FLOP count, the loops of its
iteration space, how to build its TVM tensor expression, and how to compute a
NumPy reference for correctness checks.

The paper suites are data (:mod:`tensorgym.suites`); users build their own
workloads with :func:`conv2d` and :func:`matmul`.

Conventions (those of the seed papers' released scripts): batch 1 by default,
NCHW activations, OIHW weights, fp32, zero padding. Mixed precision: fp16 and
bf16 inputs are multiplied and summed in fp32 and give an fp32 output
(:data:`ACCUMULATOR_DTYPES`, the tensor-core convention of seed 001's kernels).
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

SUPPORTED_DTYPES = ("float32", "float16", "bfloat16")
# Input dtype -> the dtype products are summed and the output is written in.
ACCUMULATOR_DTYPES = {"float32": "float32", "float16": "float32", "bfloat16": "float32"}


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
        """Short human name, e.g. ``ResNet-50/R5`` (falls back to the key)."""
        return f"{self.suite}/{self.name}" if self.name else self.key

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
    def spatial_loops(self) -> tuple[Loop, ...]:
        return tuple(lp for lp in self.loops if lp.kind == "spatial")

    @property
    def reduction_loops(self) -> tuple[Loop, ...]:
        return tuple(lp for lp in self.loops if lp.kind == "reduction")

    @property
    def out_dtype(self) -> str:
        """The dtype products are summed and the output is written in (fp32 for fp16/bf16 inputs)."""
        return ACCUMULATOR_DTYPES[self.dtype]

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs for correctness checks: uniform in [-1, 1) so sign errors show."""
        rng = np.random.default_rng(seed)
        return [rng.uniform(-1.0, 1.0, size=s).astype(numpy_dtype(self.dtype)) for s in self.input_shapes]

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
        raise WorkloadError(f"dtype {dtype!r} is not supported yet; use one of {SUPPORTED_DTYPES}")


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of a workload dtype name (bfloat16 comes from ``ml_dtypes``, a TVM dependency)."""
    if dtype == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


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

        data = te.placeholder(self.input_shapes[0], self.dtype, name="data")
        kernel = te.placeholder(self.input_shapes[1], self.dtype, name="kernel")
        p, st = self.padding, self.stride
        if p:
            # A materialised pad stage: inlining it puts a branch in the vectorised
            # inner loop and costs 4-5x on this machine (tvm_probe.md, section 1).
            source = te.compute(
                (self.N, self.C, self.H + 2 * p, self.W + 2 * p),
                lambda n, c, h, w: tvm.tirx.if_then_else(
                    tvm.tirx.all(h >= p, h < self.H + p, w >= p, w < self.W + p),
                    data[n, c, h - p, w - p],
                    tvm.tirx.const(0.0, self.dtype),
                ),
                name="pad",
            )
        else:
            source = data
        rc = te.reduce_axis((0, self.C), name="rc")
        ry = te.reduce_axis((0, self.R), name="ry")
        rx = te.reduce_axis((0, self.S), name="rx")
        acc = _accumulate(self.dtype)
        out = te.compute(
            self.output_shape,
            lambda n, f, y, x: te.sum(acc(source[n, rc, y * st + ry, x * st + rx]) * acc(kernel[f, rc, ry, rx]),
                                      axis=[rc, ry, rx]),
            name="conv",
        )
        return te.create_prim_func([data, kernel, out])

    def reference(self, data: np.ndarray, kernel: np.ndarray) -> np.ndarray:
        p, st = self.padding, self.stride
        x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
        windows = np.lib.stride_tricks.sliding_window_view(x, (self.R, self.S), axis=(2, 3))
        windows = windows[:, :, :: st, :: st][:, :, : self.OH, : self.OW]  # N C OH OW R S
        out = np.tensordot(windows, kernel.astype(np.float64), axes=([1, 4, 5], [1, 2, 3]))  # N OH OW F
        return out.transpose(0, 3, 1, 2)

    def describe(self) -> str:
        return (
            f"conv2d N={self.N} C={self.C} H={self.H} W={self.W} F={self.F} "
            f"{self.R}x{self.S} stride={self.stride} pad={self.padding} -> {self.OH}x{self.OW}{_dtype_note(self.dtype)}"
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

        a = te.placeholder(self.input_shapes[0], self.dtype, name="A")
        b = te.placeholder(self.input_shapes[1], self.dtype, name="B")
        k = te.reduce_axis((0, self.K), name="k")
        acc = _accumulate(self.dtype)
        c = te.compute(self.output_shape, lambda i, j: te.sum(acc(a[i, k]) * acc(b[k, j]), axis=k), name="C")
        return te.create_prim_func([a, b, c])

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a.astype(np.float64) @ b.astype(np.float64)

    def describe(self) -> str:
        return f"matmul M={self.M} N={self.N} K={self.K}{_dtype_note(self.dtype)}"


def _dtype_note(dtype: str) -> str:
    return "" if dtype == "float32" else f" {dtype} (sums in {ACCUMULATOR_DTYPES[dtype]})"


def _accumulate(dtype: str):
    """The cast applied to each operand of a product: none for fp32, to fp32 for fp16/bf16 inputs."""
    out = ACCUMULATOR_DTYPES[dtype]
    return (lambda x: x) if out == dtype else (lambda x: x.astype(out))


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
