"""Seed 000's GPU analytical features: the paper's worked example and hand-computed cases."""

from __future__ import annotations

import math

import pytest

from tensorgym import conv2d, matmul
from tensorgym.spaces.tiles.gpu_features import (
    GPU_FEATURE_NAMES, GPUHardware, GPUTiling, bank_conflict_degree, estimated_occupancy, global_transactions,
    gpu_feasible, gpu_features, ilp, oi_global_mem, oi_shared_mem, reg_reuse_factor, wave_efficiency, wlp,
)
from tensorgym.target import Target


def test_wave_efficiency_paper_example():
    # Seed 000, Sec. 4: 128 SMs and 320 thread blocks -> 2.5 waves of 3 -> 0.83.
    assert wave_efficiency(320, 128) == pytest.approx(2.5 / 3)
    assert round(wave_efficiency(320, 128), 2) == 0.83
    assert wave_efficiency(256, 128) == 1.0
    assert wave_efficiency(129, 128) == pytest.approx((129 / 128) / 2)
    assert wave_efficiency(10, 128) == pytest.approx(10 / 128)
    with pytest.raises(ValueError):
        wave_efficiency(0, 128)


@pytest.fixture()
def mm_tiling():
    # 512^3 matmul. i: grid 8, vthread 1, threads 8, reg 4x2; j: grid 8, threads 16, reg 2x2; k: 64 stages of 4x2.
    return GPUTiling(matmul(512, 512, 512), {"i": (8, 1, 8, 4, 2), "j": (8, 1, 16, 2, 2), "k": (64, 4, 2)})


def test_matmul_derived_sizes(mm_tiling):
    t = mm_tiling
    assert t.threads_per_block == 8 * 16
    assert t.num_blocks == 64
    assert t.stages == 64
    assert t.register_extents() == {"i": 8, "j": 4, "k": 1}
    assert t.shared_extents() == {"i": 64, "j": 64, "k": 8}
    assert t.shared_elements() == 64 * 8 + 8 * 64  # A tile + B tile
    assert t.register_elements() == 8 * 4 + 8 + 4  # accumulators + A column + B row


def test_matmul_features_by_hand(mm_tiling):
    t, hw = mm_tiling, GPUHardware()
    assert ilp(t) == 32.0
    # reuse_A = reg_j = 4, reuse_B = reg_i = 8, reuse_C = K = 512.
    assert reg_reuse_factor(t) == pytest.approx(1 / (1 / 4 + 1 / 8 + 1 / 512))
    # WLP_SM = 65536 / 1024 * 4 warps = 256; WLP_REG = 65536 / ((44 + 25) * 128) = 7.42.
    assert wlp(t, hw) == pytest.approx(65536 / (69 * 128))
    # 64 registers/thread (44 + 20): blocks by threads 1024/128 = 8, by shared 49152/4096 = 12,
    # by registers 65536 // (64 * 128 + 20) = 7 -> 4 warps * 7 / 64.
    assert estimated_occupancy(t, hw) == pytest.approx(4 * 7 / 64)
    # per block: 64 stages * (A: ceil(512/128) * 4 warps + B: same) + output ceil(4096/128) * 4 = 2176.
    assert global_transactions(t, hw) == 64 * (64 * (16 + 16) + 128)
    assert oi_global_mem(t, hw) == pytest.approx(512**3 / (32 * 64 * 2176))
    # Lanes 0-15 (thread row 0) and 16-31 (row 1) read A rows 0 and 8*... -> 2 distinct addresses per bank;
    # B: 16 columns 4 apart = addresses 0..60, banks repeat after 32 -> 2 per bank.
    assert bank_conflict_degree(t, "A", hw) == 2
    assert bank_conflict_degree(t, "B", hw) == 2
    # OI_shared = reg_i * reg_j / (c_A * reg_i + c_B * reg_j) = 32 / (2*8 + 2*4).
    assert oi_shared_mem(t, hw) == pytest.approx(32 / 24)
    assert wave_efficiency(t.num_blocks, hw.num_sms) == 0.5
    features = gpu_features(t, hw)
    assert features.shape == (len(GPU_FEATURE_NAMES),)
    assert features[GPU_FEATURE_NAMES.index("ILP")] == 32.0
    assert gpu_feasible(t, hw)


def test_conflict_free_and_broadcast_reads():
    # 32 threads along j only, one column each: B reads 32 consecutive words (conflict-free),
    # A is the same element for every lane (one broadcast).
    t = GPUTiling(matmul(64, 64, 64), {"i": (64, 1, 1, 1, 1), "j": (2, 1, 32, 1, 1), "k": (16, 2, 2)})
    assert bank_conflict_degree(t, "B") == 1
    assert bank_conflict_degree(t, "A") == 1
    # Each thread owning 2 adjacent columns: addresses 0, 2, ..., 62 -> 2 per even bank.
    t2 = GPUTiling(matmul(64, 128, 64), {"i": (64, 1, 1, 1, 1), "j": (2, 1, 32, 1, 2), "k": (16, 2, 2)})
    assert bank_conflict_degree(t2, "B") == 2


def test_pruning_rules():
    mm = matmul(256, 256, 256)
    small_block = GPUTiling(mm, {"i": (16, 1, 4, 2, 2), "j": (16, 1, 4, 2, 2), "k": (64, 2, 2)})
    assert small_block.threads_per_block == 16 and not gpu_feasible(small_block)
    big_registers = GPUTiling(mm, {"i": (4, 1, 4, 4, 4), "j": (4, 1, 8, 4, 2), "k": (64, 2, 2)})
    assert big_registers.register_elements() == 16 * 8 + 16 + 8
    assert gpu_feasible(big_registers)
    too_many = GPUTiling(mm, {"i": (2, 1, 4, 8, 4), "j": (2, 1, 8, 8, 2), "k": (64, 2, 2)})
    assert too_many.register_elements() > 256 and not gpu_feasible(too_many)
    assert not gpu_features(too_many, zero_infeasible=True).any()
    assert gpu_features(too_many).all()


def test_conv_features():
    # 3x3 conv, 16 -> 32 channels, 16x16 output (padding 1): loops n f y x rc ry rx.
    wl = conv2d(1, 16, 16, 16, 32, 3, 3, 1, 1)
    t = GPUTiling(wl, {"n": (1, 1, 1, 1, 1), "f": (4, 1, 2, 2, 2), "y": (4, 1, 4, 1, 1), "x": (1, 1, 16, 1, 1),
                       "rc": (4, 2, 2), "ry": (1, 3, 1), "rx": (3, 1, 1)})
    assert t.threads_per_block == 2 * 4 * 16
    assert t.num_blocks == 16
    # Register tile: f 4, others 1 -> ILP 4; kernel reuse = n*y*x register tiles = 1,
    # data reuse = f tile = 4; output reuse = 16*3*3 -> 1 / (1/4 + 1 + 1/144).
    assert ilp(t) == 4.0
    assert reg_reuse_factor(t) == pytest.approx(1 / (1 / 4 + 1 + 1 / 144))
    # Shared tile per stage: f 8, y 4, x 16, rc 4, ry 3, rx 1 -> data: 4 x (4+2) x (16+0) and kernel 8*4*3*1.
    assert t.shared_elements() == 4 * 6 * 16 + 8 * 4 * 3
    assert all(math.isfinite(v) and v > 0 for v in gpu_features(t))


def test_bad_tilings_and_targets():
    with pytest.raises(ValueError, match="multiply"):
        GPUTiling(matmul(64, 64, 64), {"i": (2, 1, 2, 2, 2), "j": (64, 1, 1, 1, 1), "k": (64, 1, 1)})
    with pytest.raises(ValueError, match="loops"):
        GPUTiling(matmul(64, 64, 64), {"i": (64, 1, 1, 1, 1)})
    with pytest.raises(ValueError):
        GPUHardware(num_sms=0)
    cuda = Target("cuda", "RTX 3090", (), 82, 0, 0, 0, "0.27", extra=(("num_sms", 82),))
    assert GPUHardware.from_target(cuda).num_sms == 82
    cpu = Target("llvm", "cpu", (), 2, 32768, 1 << 20, 1 << 25, "0.27")
    with pytest.raises(ValueError, match="CUDA"):
        GPUHardware.from_target(cpu)
