"""Vendor references: correct, timed, their kernel family named, the machine's BLAS overrides cleared on request."""

from __future__ import annotations

import pytest

from tensorgym.baselines import time_vendor, vendor_choices
from tensorgym.baselines.vendor import (
    PRE_PACKED, VendorResult, best_vendor, mkl_kernel, onednn_kernel, ratio_text,
)
from tensorgym.target import local_cpu, native_cpu, restricted_cpu
from tensorgym.workloads import conv2d, matmul

ONEDNN = """onednn_verbose,v1,info,oneDNN v3.12.0
onednn_verbose,v1,primitive,exec,cpu,reorder,jit:uni,undef,src:f32::blocked:acdb::f0 dst:f32,,128x128x3x3,0.03
onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core,forward_training,src:f32,,mb1_ic128,0.02
"""
MKL = ("MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture Intel(R) "
       "Advanced Vector Extensions 512 (Intel(R) AVX-512) with support for INT8, BF16, FP16 (limited) instructions, "
       "and Intel(R) Advanced Matrix Extensions (Intel(R) AMX) with INT8 and BF16, Lnx 2.60GHz lp64 gnu_thread\n"
       "MKL_VERBOSE SGEMM(N,N,3072,512,768,...) 44.00ms CNR:OFF Dyn:0 FastMM:1 TID:0  NThr:2\n")


def test_kernel_families_are_read_from_the_libraries_verbose_output():
    assert onednn_kernel(ONEDNN) == "convolution brg_conv_fwd:avx512_core + 1 reorder per call"
    assert onednn_kernel("") == "not oneDNN: PyTorch's own kernel"
    assert mkl_kernel(MKL) == "oneMKL 2024.0 sgemm, AVX-512 code path (AMX available)"


def test_ratios_are_never_given_from_busy_timings():
    quiet = {"gflops": 100.0, "contention": 0.0}
    assert ratio_text(150.0, quiet) == "1.50x vendor"
    assert ratio_text(150.0, {"gflops": 100.0, "contention": 0.4}).startswith("no ratio")
    assert ratio_text(150.0, quiet, kernel_busy=True).startswith("no ratio")
    timings = [{"gflops": 90.0, "weights": "per call"}, {"gflops": 120.0, "weights": PRE_PACKED}]
    assert best_vendor(timings)["gflops"] == 120.0 and best_vendor(timings, "per call")["gflops"] == 90.0


def test_compare_says_in_one_line_when_the_machine_was_busy():
    from tensorgym.baselines.board import Leaderboard
    from tensorgym.baselines.compare import busy_summary
    from tensorgym.tuner import TuningResult

    board = Leaderboard(env_ids=["e"], agents=["random"], seeds=[0], budget=4)
    assert busy_summary(board) == ""
    board.results[("e", "random")] = [TuningResult("random", "w", "w", "tiles", "t", 0, 4, None,
                                                   extra={"busy_trials": 3})]
    board.vendor["e"] = [{"gflops": 1.0, "contention": 0.5}, {"gflops": 2.0, "contention": 0.0}]
    line = busy_summary(board)
    assert "\n" not in line and "3 trial(s) and 1 vendor timing(s)" in line


def test_every_workload_has_a_pre_packed_and_a_per_call_reference():
    for wl in (conv2d(1, 16, 8, 8, 32, 3, 3), matmul(8, 8, 8)):
        layouts = [layout for _, layout in vendor_choices(wl)]
        assert any("pre-packed" in x for x in layouts) and any("pre-packed" not in x for x in layouts)


def test_native_blas_clears_the_machines_overrides_in_the_vendor_process_only(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    wl = matmul(64, 48, 32)
    forced = time_vendor(wl, "numpy", "row-major")
    native = time_vendor(wl, "numpy", "row-major", native_blas=True)
    restriction = ", ".join(f"{k}={v}" for k, v in local_cpu().vendor_environment().items())
    assert "Haswell" in forced.kernel and forced.environment == restriction
    if restriction:  # a CPU acting as an AVX2 one names OpenBLAS's Haswell kernels itself: nothing to clear
        assert native.environment == restriction and "Haswell" in native.kernel
    else:
        assert native.environment == "OPENBLAS_CORETYPE cleared"
    assert native.max_rel_error < 1e-4 and isinstance(native, VendorResult) and native.weights == "per call"


@pytest.mark.needs_isa("avx2", "fma")
def test_vendors_of_a_cpu_restricted_to_avx2_run_avx2_kernels():
    avx2 = restricted_cpu(native_cpu(), "x86-64-v3")
    conv = time_vendor(conv2d(1, 32, 14, 14, 32, 3, 3, layout="NHWC"), "onednn", "NHWC pre-packed", target=avx2)
    assert "avx2" in conv.kernel and "avx512" not in conv.kernel, conv.kernel
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in conv.environment and conv.max_rel_error < 1e-4
    mkl = time_vendor(matmul(64, 48, 32), "mkl", "pre-packed", target=avx2)
    assert "AVX-512" not in mkl.kernel and "MKL_ENABLE_INSTRUCTIONS=AVX2" in mkl.environment, mkl.kernel


@pytest.mark.slow
@pytest.mark.parametrize("workload", [conv2d(1, 64, 14, 14, 64, 3, 3, layout="NHWC"),
                                      conv2d(1, 32, 9, 9, 48, 3, 3, 2, 1, layout="NCHWc"), matmul(64, 48, 32)],
                         ids=["conv-NHWC", "conv-NCHWc", "matmul"])
def test_every_vendor_reference_is_correct_and_names_its_kernel(workload):
    for backend, layout in vendor_choices(workload):
        result = time_vendor(workload, backend, layout)
        assert result.max_rel_error < 1e-4 and result.gflops > 0 and result.kernel, (backend, layout)
        assert (result.weights == PRE_PACKED) == ("pre-packed" in layout)
