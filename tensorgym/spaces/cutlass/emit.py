"""CUDA C++ of one CUTLASS config: the operator NVIDIA's ``cutlass_library`` emits, and tensorgym's C interface.

``cutlass_library`` (the generator CUTLASS's own build uses, from PyPI's ``nvidia-cutlass``)
emits the operator's type definition: ``EmitGemmUniversalInstance`` (2.x GEMMs,
``GemmUniversal``: serial split-K is a run-time argument), ``EmitConv2dInstance`` (2.x
implicit-GEMM conv2d forward, NHWC) and ``EmitGemmUniversal3xInstance`` (3.x Hopper
GEMMs). Its epilogue enums list only linear combinations, so a fused bias + ReLU swaps
the emitted functor for CUTLASS's own (``LinearCombinationRelu`` in 2.x, the
``LinCombPerRowBiasEltAct`` fusion with ``ReLu`` in 3.x).

Around it this module writes the C interface of :mod:`tensorgym.cuda.kernel`
(``tg_prepare`` / ``tg_initialize`` / ``tg_run`` / ``tg_last_error``): the problem's sizes
are compile-time constants, the pointers and the split-K slices arrive at run time. The
pointers come in ``kernel_arguments`` order: A (or the NHWC activations), B (the
weights), the bias when the epilogue has one, D. A "separate" bias + ReLU epilogue is a
small elementwise kernel launched after the operator on the same stream.

Layouts: tensorgym's GEMM is ``D[M, N] = A[M, K] @ B[K, N]``, all row-major. CUTLASS's
kernels (2.x universal and the 3.x list alike) write a column-major output, so they
compute ``D^T = B^T A^T``: an N x M column-major result is D row-major, B^T (N x K) and
A^T (K x M) are B and A read column-major, and the per-column bias of D is a per-row
bias of D^T.
"""

from __future__ import annotations

import os
import re

from .templates import FAMILY_2X, CutlassTile, sm90_operation

# Epilogue codes of a config (the ``epilogue`` knob).
EPILOGUE_NONE, EPILOGUE_FUSED, EPILOGUE_SEPARATE = 0, 1, 2
NVCC_FLAGS = ("-std=c++17", "-O3", "--expt-relaxed-constexpr", "-DNDEBUG", "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1")

_PRELUDE = r"""
#include <cstdio>
#include <string>
#include <cuda_runtime.h>
#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
{includes}

#define TG_EXPORT extern "C" __attribute__((visibility("default")))

namespace {{
std::string tg_error;

int tg_fail(const char* what, const char* why) {{
  tg_error = std::string(what) + ": " + why;
  return 1;
}}

int tg_status(const char* what, cutlass::Status status) {{
  return status == cutlass::Status::kSuccess ? 0 : tg_fail(what, cutlassGetStatusString(status));
}}

// out[r, c] = max(out[r, c] + bias[c], 0) over a rows x cols row-major matrix: the "separate" epilogue.
__global__ void tg_bias_relu(float* out, const float* bias, long long rows, int cols) {{
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < rows * cols) {{
    float v = out[i] + bias[i % cols];
    out[i] = v > 0.f ? v : 0.f;
  }}
}}

int tg_separate_epilogue(float* out, const float* bias, long long rows, int cols, cudaStream_t stream) {{
  long long n = rows * cols;
  tg_bias_relu<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(out, bias, rows, cols);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? 0 : tg_fail("bias+relu kernel", cudaGetErrorString(err));
}}
}}  // namespace

TG_EXPORT const char* tg_last_error() {{ return tg_error.c_str(); }}
"""


def _run_entries(rows: str, columns: str) -> str:
    """The ``tg_initialize`` and ``tg_run`` entry points every template ends with.

    ``rows`` and ``columns`` are the C++ expressions for the output's shape, which the separate
    (unfused) bias+ReLU epilogue walks.
    """
    return r"""
TG_EXPORT int tg_initialize(void* workspace, void* stream) {{
  return tg_status("initialize", op.initialize(arguments, workspace, (cudaStream_t)stream));
}}

TG_EXPORT int tg_run(void* stream) {{
  if (int err = tg_status("run", op.run((cudaStream_t)stream))) return err;
  if (EPILOGUE == {separate})
    return tg_separate_epilogue(output, bias, """ + rows + ", " + columns + r""", (cudaStream_t)stream);
  return 0;
}}
"""


_GEMM_2X = r"""
{definition}
namespace {{
using Operator = cutlass::gemm::device::GemmUniversalAdapter<{name}>;
constexpr int M = {M}, N = {N}, K = {K}, EPILOGUE = {epilogue};
Operator op;
typename Operator::Arguments arguments;
float* bias = nullptr;
float* output = nullptr;
}}  // namespace

TG_EXPORT int tg_prepare(void* const* pointers, const long long* runtime, unsigned long long* workspace_bytes) {{
  int split_k = (int)runtime[0];
  const void* a = pointers[0];
  const void* b = pointers[1];
  bias = EPILOGUE == {fused} || EPILOGUE == {separate} ? (float*)pointers[2] : nullptr;
  output = (float*)pointers[EPILOGUE == {none} ? 2 : 3];
  // D^T (N x M, column-major) = B^T (N x K, column-major, ld N) A^T (K x M, column-major, ld K): see the
  // module docs. Fused: D^T = relu(B^T A^T + C), C the bias broadcast along M (ldc = 0). Otherwise D^T = B^T A^T.
  bool fused = EPILOGUE == {fused};
  arguments = typename Operator::Arguments(
      cutlass::gemm::GemmUniversalMode::kGemm, {{N, M, K}}, split_k,
      {{1.0f, fused ? 1.0f : 0.0f}}, b, a, fused ? (const void*)bias : (const void*)output, output,
      0, 0, 0, 0, N, K, fused ? 0 : N, N);
  if (int err = tg_status("can_implement", op.can_implement(arguments))) return err;
  *workspace_bytes = Operator::get_workspace_size(arguments);
  return 0;
}}
""" + _run_entries("M", "N")

_CONV_2X = r"""
{definition}
namespace {{
using Operator = cutlass::conv::device::ImplicitGemmConvolution<{name}_base>;
using Layout = cutlass::layout::TensorNHWC;
constexpr int N = {N}, H = {H}, W = {W}, C = {C}, K = {F}, R = {R}, S = {S}, PAD = {pad}, STRIDE = {stride};
constexpr int P = {P}, Q = {Q}, EPILOGUE = {epilogue};
Operator op;
typename Operator::Arguments arguments;
float* bias = nullptr;
float* output = nullptr;
}}  // namespace

TG_EXPORT int tg_prepare(void* const* pointers, const long long* runtime, unsigned long long* workspace_bytes) {{
  int split_k = (int)runtime[0];
  using ElementA = typename Operator::ElementA;
  using ElementB = typename Operator::ElementB;
  bias = EPILOGUE == {fused} || EPILOGUE == {separate} ? (float*)pointers[2] : nullptr;
  output = (float*)pointers[EPILOGUE == {none} ? 2 : 3];
  bool fused = EPILOGUE == {fused};
  cutlass::conv::Conv2dProblemSize problem({{N, H, W, C}}, {{K, R, S, C}}, {{PAD, PAD, PAD, PAD}}, {{STRIDE, STRIDE}},
                                           {{1, 1}}, {{N, P, Q, K}}, cutlass::conv::Mode::kCrossCorrelation, split_k);
  // Fused: D = relu(conv + C), C the bias broadcast over N, P, Q (all strides 0). Otherwise D = conv.
  Layout layout_c = fused ? Layout(Layout::Stride(0)) : Layout::packed({{N, P, Q, K}});
  arguments = typename Operator::Arguments(
      problem, {{(ElementA*)pointers[0], Layout::packed({{N, H, W, C}})}},
      {{(ElementB*)pointers[1], Layout::packed({{K, R, S, C}})}},
      {{fused ? bias : output, layout_c}}, {{output, Layout::packed({{N, P, Q, K}})}},
      {{1.0f, fused ? 1.0f : 0.0f}}, cutlass::conv::SplitKMode::kSerial);
  if (int err = tg_status("can_implement", op.can_implement(arguments))) return err;
  *workspace_bytes = op.get_workspace_size(arguments);
  return 0;
}}
""" + _run_entries("(long long)N * P * Q", "K")

_GEMM_3X = r"""
{definition}
namespace {{
using Operator = cutlass::gemm::device::GemmUniversalAdapter<{name}>;
constexpr int M = {M}, N = {N}, K = {K}, EPILOGUE = {epilogue}, SWIZZLE = {swizzle};
Operator op;
typename Operator::Arguments arguments;
float* bias = nullptr;
float* output = nullptr;
}}  // namespace

TG_EXPORT int tg_prepare(void* const* pointers, const long long* runtime, unsigned long long* workspace_bytes) {{
  if (runtime[0] != 1) return tg_fail("tg_prepare", "the sm_90 kernels take no split-K slices");
  using ElementA = typename Operator::ElementA;
  using ElementB = typename Operator::ElementB;
  using StrideA = typename Operator::GemmKernel::StrideA;
  using StrideB = typename Operator::GemmKernel::StrideB;
  using StrideC = typename Operator::GemmKernel::StrideC;
  using StrideD = typename Operator::GemmKernel::StrideD;
  bias = EPILOGUE == {fused} || EPILOGUE == {separate} ? (float*)pointers[2] : nullptr;
  output = (float*)pointers[EPILOGUE == {none} ? 2 : 3];
  // D^T (N x M, column-major) = B^T (N x K, column-major) A^T (K x M, column-major): see the module docs.
  StrideA stride_a = cutlass::make_cute_packed_stride(StrideA{{}}, cute::make_shape(N, K, 1));
  StrideB stride_b = cutlass::make_cute_packed_stride(StrideB{{}}, cute::make_shape(M, K, 1));
  StrideC stride_c = cutlass::make_cute_packed_stride(StrideC{{}}, cute::make_shape(N, M, 1));
  StrideD stride_d = cutlass::make_cute_packed_stride(StrideD{{}}, cute::make_shape(N, M, 1));
  arguments = typename Operator::Arguments{{
      cutlass::gemm::GemmUniversalMode::kGemm, {{N, M, K, 1}},
      {{(const ElementA*)pointers[1], stride_a, (const ElementB*)pointers[0], stride_b}},
      {{{{}}, nullptr, stride_c, output, stride_d}}}};
  arguments.epilogue.thread.alpha = 1.0f;
  arguments.epilogue.thread.beta = 0.0f;
  {bias_binding}
  arguments.scheduler.max_swizzle_size = SWIZZLE;
  if (int err = tg_status("can_implement", op.can_implement(arguments))) return err;
  *workspace_bytes = Operator::get_workspace_size(arguments);
  return 0;
}}
""" + _run_entries("M", "N")

_EPILOGUE_INCLUDES = ("cutlass/epilogue/thread/linear_combination.h",
                      "cutlass/epilogue/thread/linear_combination_relu.h")
_INCLUDES_2X_GEMM = ("cutlass/gemm/device/gemm_universal_adapter.h", "cutlass/gemm/kernel/default_gemm_universal.h",
                     *_EPILOGUE_INCLUDES)
_INCLUDES_2X_CONV = ("cutlass/conv/kernel/default_conv2d_fprop.h", "cutlass/conv/device/implicit_gemm_convolution.h",
                     *_EPILOGUE_INCLUDES)
_INCLUDES_3X = ("cute/tensor.hpp", "cutlass/gemm/device/gemm_universal_adapter.h",
                "cutlass/gemm/kernel/gemm_universal.hpp", "cutlass/gemm/collective/collective_builder.hpp",
                "cutlass/epilogue/collective/collective_builder.hpp", "cutlass/epilogue/thread/activation.h",
                "cutlass/util/packed_stride.hpp")


def include_dirs() -> tuple[str, ...]:
    """CUTLASS's headers (with CuTe and tools/util), as the ``nvidia-cutlass`` wheel ships them."""
    import cutlass_library

    root = cutlass_library.source_path
    return (os.path.join(root, "include"), os.path.join(root, "tools", "util", "include"))


def _library_types(dtype: str):
    from cutlass_library.library import DataType

    return {"float16": DataType.f16, "bf16": DataType.bf16, "float32": DataType.f32}[dtype]


def _codes(epilogue: int) -> dict[str, int]:
    return {"epilogue": epilogue, "none": EPILOGUE_NONE, "fused": EPILOGUE_FUSED, "separate": EPILOGUE_SEPARATE}


def _tile_description(tile: CutlassTile, dtype: str):
    from cutlass_library.library import DataType, MathInstruction, MathOperation, OpcodeClass, TileDescription

    element = _library_types(dtype)
    math = MathInstruction(list(tile.instruction), element, element, DataType.f32, OpcodeClass.TensorOp,
                           MathOperation.multiply_add)
    return TileDescription(list(tile.threadblock), tile.stages, list(tile.warps), math, tile.min_cc, 1024)


def _with_relu(code: str) -> str:
    """The emitted 2.x operator with ``LinearCombinationRelu`` in place of its ``LinearCombination`` epilogue."""
    code, swapped = re.subn(r"cutlass::epilogue::thread::LinearCombination<",
                            "cutlass::epilogue::thread::LinearCombinationRelu<", code)
    if swapped != 1:
        raise RuntimeError(f"expected one LinearCombination epilogue in the emitted operator, found {swapped}")
    return code


def _prelude(includes: tuple[str, ...]) -> str:
    return _PRELUDE.format(includes="\n".join(f'#include "{h}"' for h in includes))


def gemm_source(tile: CutlassTile, dtype: str, *, M: int, N: int, K: int, alignment: int, output_alignment: int,
                swizzle: int, epilogue: int) -> str:
    """The C++ of a GEMM ``D[M, N] = A[M, K] @ B[K, N]`` (row-major) with the given template parameters."""
    if tile.family != FAMILY_2X:
        return _gemm_3x_source(tile, dtype, M=M, N=N, K=K, swizzle=swizzle, epilogue=epilogue)
    from cutlass_library.gemm_operation import EmitGemmUniversalInstance, GemmOperation
    from cutlass_library.library import (
        DataType, EpilogueFunctor, GemmKind, LayoutType, SwizzlingFunctor, TensorDescription,
    )

    element = _library_types(dtype)
    operation = GemmOperation(  # D^T = B^T A^T, every operand column-major (see the module docs)
        GemmKind.Universal, 80, _tile_description(tile, dtype),
        TensorDescription(element, LayoutType.ColumnMajor, alignment),
        TensorDescription(element, LayoutType.ColumnMajor, alignment),
        TensorDescription(DataType.f32, LayoutType.ColumnMajor, output_alignment), DataType.f32,
        EpilogueFunctor.LinearCombination, getattr(SwizzlingFunctor, f"Identity{swizzle}"))
    definition = EmitGemmUniversalInstance().emit(operation)
    if epilogue == EPILOGUE_FUSED:
        definition = _with_relu(definition)
    body = _GEMM_2X.format(definition=definition, name=operation.procedural_name(), M=M, N=N, K=K, **_codes(epilogue))
    return _prelude(_INCLUDES_2X_GEMM) + body


def conv2d_source(tile: CutlassTile, dtype: str, *, N: int, H: int, W: int, C: int, F: int, R: int, S: int, pad: int,
                  stride: int, alignment: int, output_alignment: int, swizzle: int, epilogue: int) -> str:
    """The C++ of an implicit-GEMM conv2d forward: NHWC activations, KRSC weights, NHWC output."""
    from cutlass_library.conv2d_operation import Conv2dOperation, EmitConv2dInstance
    from cutlass_library.library import (
        ConvKind, DataType, EpilogueFunctor, IteratorAlgorithm, LayoutType, StrideSupport, SwizzlingFunctor,
        TensorDescription,
    )

    element = _library_types(dtype)
    operation = Conv2dOperation(
        ConvKind.Fprop, IteratorAlgorithm.Optimized, 80, _tile_description(tile, dtype),
        TensorDescription(element, LayoutType.TensorNHWC, alignment),
        TensorDescription(element, LayoutType.TensorNHWC, alignment),
        TensorDescription(DataType.f32, LayoutType.TensorNHWC, output_alignment), DataType.f32,
        StrideSupport.Strided, EpilogueFunctor.LinearCombination, getattr(SwizzlingFunctor, f"Identity{swizzle}"))
    definition = EmitConv2dInstance().emit(operation)
    if epilogue == EPILOGUE_FUSED:
        definition = _with_relu(definition)
    P = (H + 2 * pad - R) // stride + 1
    Q = (W + 2 * pad - S) // stride + 1
    body = _CONV_2X.format(definition=definition, name=operation.procedural_name(), N=N, H=H, W=W, C=C, F=F, R=R, S=S,
                           pad=pad, stride=stride, P=P, Q=Q, **_codes(epilogue))
    return _prelude(_INCLUDES_2X_CONV) + body


def _gemm_3x_source(tile: CutlassTile, dtype: str, *, M: int, N: int, K: int, swizzle: int, epilogue: int) -> str:
    from cutlass_library.gemm_operation import EmitGemmUniversal3xInstance

    operation = sm90_operation(tile, dtype)
    definition = EmitGemmUniversal3xInstance().emit(operation)
    bias_binding = ""
    if epilogue == EPILOGUE_FUSED:
        fusion = ("cutlass::epilogue::fusion::LinCombPerRowBiasEltAct<cutlass::epilogue::thread::ReLu, "
                  "float, float, float, void, float>")
        definition, swapped = re.subn(r"cutlass::epilogue::fusion::LinearCombination<[^>]*>", fusion, definition)
        if swapped != 1:
            raise RuntimeError(f"expected one LinearCombination fusion in the emitted operator, found {swapped}")
        bias_binding = "arguments.epilogue.thread.bias_ptr = bias;"
    body = _GEMM_3X.format(definition=definition, name=operation.procedural_name(), M=M, N=N, K=K, swizzle=swizzle,
                           bias_binding=bias_binding, **_codes(epilogue))
    return _prelude(_INCLUDES_3X) + body
