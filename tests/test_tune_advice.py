"""The space advice of ``tensorgym tune``: which space to try when the user's trails the vendor.

The decision is a pure function (:mod:`tensorgym.cli.advice`); the command-line tests run ``tune`` with a
synthetic measurer and a fake vendor timing, so nothing is compiled or timed and no figure depends on the
machine's speed.
"""

from __future__ import annotations

import pytest
from fakes import SyntheticMeasurer, synthetic_default_measurers

import tensorgym.baselines
from tensorgym.baselines import VendorResult
from tensorgym.cli import main
from tensorgym.cli.advice import TRAILING_RATIO, advice_line, best_space, space_advice

R5 = "Conv2d-ResNet-R5-v0"


@pytest.mark.parametrize("op", ["conv2d", "matmul"])
@pytest.mark.parametrize("space", ["tiles", "mapping"])
def test_fp32_conv2d_and_matmul_trailing_the_vendor_go_to_the_microkernel_space(op, space):
    advice = space_advice(op, "float32", space, 0.43)
    assert (advice.space, advice.agent) == ("microkernel", "random-structured")


@pytest.mark.parametrize("ratio", [TRAILING_RATIO, 0.95, 1.0, 1.7])
def test_no_advice_at_or_above_the_threshold(ratio):
    assert space_advice("conv2d", "float32", "tiles", ratio) is None


def test_just_below_the_threshold_is_trailing():
    assert space_advice("matmul", "float32", "tiles", TRAILING_RATIO - 1e-9).space == "microkernel"


def test_no_advice_in_the_best_space_already():
    assert space_advice("conv2d", "float32", "microkernel", 0.3) is None
    assert space_advice("matmul", "int8", "mapping", 0.3, mapping_dtypes={"int8", "bf16"}) is None


@pytest.mark.parametrize("ratio", [None, float("nan"), float("inf")])
def test_no_advice_without_a_vendor_ratio(ratio):
    assert space_advice("conv2d", "float32", "tiles", ratio) is None


def test_no_advice_where_nothing_was_measured_to_do_better():
    assert space_advice("depthwise_conv2d", "float32", "tiles", 0.3) is None  # no microkernel space for it
    assert space_advice("conv2d", "float32", "tiles", 0.3, target_kind="cuda") is None  # one GPU run
    assert space_advice("conv2d", "int8", "tiles", 0.3, mapping_dtypes={"bf16"}) is None  # no int8 intrinsic


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_low_precision_goes_to_the_mapping_space_where_the_cpu_has_the_intrinsics(dtype):
    advice = space_advice("matmul", dtype, "tiles", 0.5, mapping_dtypes={"int8", "bf16"})
    assert advice.space == "mapping" and dtype in advice.why
    assert best_space("conv2d", dtype, "llvm", mapping_dtypes=()) is None


def test_the_line_names_the_space_and_the_exact_command():
    advice = space_advice("conv2d", "float32", "tiles", 0.412)
    line = advice_line(advice, 0.412, "tiles", R5, ["--budget", "64"])
    assert line.startswith("advice: 0.41x the vendor is below 0.8x in the tiles space; try the microkernel space")
    assert line.endswith(f": tensorgym tune {R5} --space microkernel --agent random-structured --budget 64")
    shaped = advice_line(advice, 0.5, "tiles", "tensorgym/Matmul-v0", ["--shape", "M=64,N=32,K=16"])
    assert shaped.endswith("--agent random-structured --shape M=64,N=32,K=16")


# -- the command line, measured by a synthetic measurer (1-100 GFLOP/s) against a fake vendor -------------------
def _fake_vendor(monkeypatch, gflops: float, contention: float | None = None) -> list[str]:
    """``time_vendor`` answers ``gflops`` without timing anything; returns the layouts it was asked for."""
    asked: list[str] = []

    def time_vendor(workload, library=None, layout=None, **_):
        asked.append(layout)
        latency = workload.flops / (gflops * 1e9)
        return VendorResult("fake oneDNN", layout or "NHWC", "torch", latency, 0.01, (latency,), gflops, 0.0,
                            kernel="fake", contention=contention)

    monkeypatch.setattr(tensorgym.baselines, "time_vendor", time_vendor)
    return asked


@pytest.fixture()
def synthetic(monkeypatch):
    return synthetic_default_measurers(monkeypatch, SyntheticMeasurer)


def _tune(tmp_path, capsys, *extra: str) -> str:
    assert main(["tune", R5, "--budget", "2", "--db", str(tmp_path / "t.db"), "-q", *extra]) == 0
    return capsys.readouterr().out


def test_tune_prints_the_advice_when_its_space_trails(tmp_path, capsys, monkeypatch, synthetic):
    asked = _fake_vendor(monkeypatch, 1e6)  # far beyond the synthetic kernels' 100 GFLOP/s
    out = _tune(tmp_path, capsys)
    assert asked and synthetic and synthetic[0].measured  # the fakes, not a real timing, answered
    [line] = [line for line in out.splitlines() if line.startswith("advice:")]
    assert line.endswith(f"tensorgym tune {R5} --space microkernel --agent random-structured --budget 2 "
                         f"--db {tmp_path / 't.db'}")
    assert out.rstrip().endswith(line)  # the last line, where it is seen


def test_tune_keeps_the_problem_in_the_advised_command(tmp_path, capsys, monkeypatch, synthetic):
    _fake_vendor(monkeypatch, 1e6)
    out = _tune(tmp_path, capsys, "--layout", "NHWC", "--time-budget", "600")
    assert "--space microkernel --agent random-structured --layout NHWC --budget 2 --time-budget 600.0" in out


def test_tune_says_nothing_when_its_kernel_keeps_up(tmp_path, capsys, monkeypatch, synthetic):
    _fake_vendor(monkeypatch, 1e-3)  # far below any synthetic kernel
    out = _tune(tmp_path, capsys)
    assert "x vendor" in out and "advice:" not in out


@pytest.mark.parametrize("extra", [["--no-vendor"], []])
def test_tune_says_nothing_without_a_usable_vendor_timing(tmp_path, capsys, monkeypatch, synthetic, extra):
    _fake_vendor(monkeypatch, 1e6, contention=0.9)  # when timed at all: on a busy machine, so no ratio
    out = _tune(tmp_path, capsys, *extra)
    assert "advice:" not in out


# -- the demo's summary line: agents of different spaces over the vendor, side by side ---------------------------
def _board():
    from tensorgym.baselines.board import Leaderboard
    from tensorgym.result import TuningResult

    board = Leaderboard(env_ids=[R5], agents=["random", "random-structured"], seeds=[0], budget=2)
    for agent, space, first, retimed in (("random", "tiles", 130.0, 120.0), ("random-structured", "microkernel",
                                                                              210.0, 190.0)):
        board.results[(R5, agent)] = [TuningResult(agent, "w", "w", space, "t", 0, 2, None, [], None, first,
                                                   extra={"remeasured_gflops": retimed})]
    board.vendor[R5] = [
        {"library": "torch", "layout": "NHWC", "weights": "per call", "gflops": 210.0, "remeasured_gflops": 200.0},
        {"library": "torch", "layout": "NCHW", "weights": "per call", "gflops": 150.0, "remeasured_gflops": 140.0},
        {"library": "onednn", "layout": "NHWC, weights pre-packed", "weights": "pre-packed", "gflops": 400.0}]
    return board


def test_compare_puts_each_space_beside_the_vendors_best_per_call_reference():
    from tensorgym.cli.compare import vendor_lines

    board = _board()
    # A pre-packed reference (400) is faster, but the kernels here pack in every call: like with like.
    assert vendor_lines(board) == [f"{R5}, over the vendor's best per call (torch NHWC, 200.0 re-timed): random "
                                   f"(tiles space) 0.60x, random-structured (microkernel space) 0.95x"]
    board.vendor[R5] = [{"library": "PyTorch weighted sum (oneDNN)", "layout": "", "gflops": 300.0}]  # a network's
    assert vendor_lines(board)[0].startswith(f"{R5}, over the vendor's best (PyTorch weighted sum (oneDNN), 300.0): "
                                             f"random (tiles space) 0.40x")
    board.vendor[R5] = [{"library": "torch", "layout": "NHWC", "weights": "per call", "gflops": 210.0,
                         "contention": 0.5}]  # timed once, on a busy machine: no ratio
    assert vendor_lines(board) == []
    board.vendor.clear()  # --no-vendor
    assert vendor_lines(board) == []
