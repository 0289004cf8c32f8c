import gymnasium as gym
import numpy as np
import pytest

import tensorgym
from tensorgym.suites import SUITES, all_suite_workloads
from tensorgym.workloads import Conv2d, Matmul, Workload, WorkloadError, conv2d, matmul


def test_suites_have_the_paper_layer_counts():
    assert [len(SUITES[s].layers) for s in ("ResNet-50", "YOLO-9000", "BERT", "ResNet-18")] == [13, 11, 6, 12]


@pytest.mark.parametrize("env_id, gflop", [
    # seed 000, A.4 (FLOPs = 2 * MACs); seed 002 / AMOS for ResNet-18
    ("Matmul-BERT-M1-v0", 4.295), ("Matmul-BERT-M3-v0", 2.416), ("Conv2d-YOLO-Y6-v0", 10.91),
    ("Conv2d-ResNet-R0-v0", 0.236), ("Conv2d-ResNet-R5-v0", 0.231), ("Conv2d-ResNet-R10-v0", 0.0514),
    ("Conv2d-YOLO-Y9-v0", 2.727), ("Conv2d-ResNet18-C0-v0", 0.236),
])
def test_flop_counts_match_the_paper_tables(env_id, gflop):
    assert all_suite_workloads()[env_id].gflop == pytest.approx(gflop, rel=2e-3)


def test_flops_formula():
    wl = conv2d(1, 64, 56, 56, 128, 3, 3, stride=2, padding=1)
    assert (wl.OH, wl.OW) == (28, 28)
    assert wl.flops == 2 * 1 * 128 * 28 * 28 * 64 * 3 * 3
    assert matmul(3, 5, 7).flops == 2 * 3 * 5 * 7


@pytest.mark.parametrize("args", [dict(C=3, H=7, W=6, F=4, R=3, S=3, stride=2, padding=1),
                                  dict(C=2, H=7, W=7, F=2, R=3, S=3, stride=1, padding=1),
                                  dict(C=1, H=9, W=5, F=1, R=7, S=3, stride=2, padding=3),
                                  dict(C=2, H=5, W=5, F=3, R=1, S=1, stride=1, padding=0)])
def test_unpadded_flops_count_the_taps_that_read_the_input(args):
    """Counted from a zero-padded input of ones: each output's window sum is the number of its taps inside."""
    wl = Conv2d(N=1, **args)
    p = wl.padding
    ones = np.pad(np.ones((wl.H, wl.W)), p)
    windows = np.lib.stride_tricks.sliding_window_view(ones, (wl.R, wl.S))[::wl.stride, ::wl.stride]
    assert windows.shape[:2] == (wl.OH, wl.OW)
    assert wl.unpadded_flops == 2 * wl.N * wl.F * wl.C * int(windows.sum())
    assert (wl.unpadded_flops == wl.flops) == (p == 0)
    assert matmul(3, 5, 7).unpadded_flops == matmul(3, 5, 7).flops
    r11 = all_suite_workloads()["Conv2d-ResNet-R11-v0"]  # 7x7 outputs: a kernel's edge rows lose a third of their taps
    assert r11.unpadded_flops / r11.flops == pytest.approx((19 / 21) ** 2)


def test_the_share_of_taps_that_read_the_input():
    def share(wl):
        return wl.unpadded_flops / wl.flops

    # 7x7 output of a 3x3 kernel with padding 1: each border row and column loses one tap of three
    assert share(conv2d(1, 8, 7, 7, 8, 3, 3, 1, 1)) == pytest.approx((19 / 21) ** 2)
    assert share(conv2d(1, 8, 7, 5, 8, 3, 3, 1, 1)) == pytest.approx(19 / 21 * 13 / 15)
    assert share(conv2d(1, 8, 9, 9, 8, 3, 3, 1, 0)) == 1.0  # no padding: every tap is real
    assert share(conv2d(1, 8, 7, 7, 8, 1, 1, 1, 0)) == 1.0


def test_every_registered_id_constructs(tmp_path):
    ids = [i for i in gym.registry if i in all_suite_workloads()]
    assert len(ids) == 42
    for env_id in ids + ["tensorgym/Conv2d-v0", "tensorgym/Matmul-v0"]:
        kwargs = {"tensorgym/Conv2d-v0": dict(C=8, H=9, F=16, R=3), "tensorgym/Matmul-v0": dict(M=8, N=16, K=4)}
        env = gym.make(env_id, db=str(tmp_path / "x.db"), **kwargs.get(env_id, {}))
        base = env.unwrapped
        assert base.observation_space.shape[0] > 0 and base.action_space.n > 0
        if env_id in all_suite_workloads():
            assert base.workload == all_suite_workloads()[env_id]
        env.close()  # nothing was measured: no worker process was started


def test_conv_reference_matches_a_direct_loop():
    wl = conv2d(1, 3, 7, 6, 4, 3, 3, stride=2, padding=1)
    data, kernel = wl.random_inputs(seed=3)
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
    expected = np.zeros(wl.output_shape)
    for f in range(wl.F):
        for y in range(wl.OH):
            for x in range(wl.OW):
                patch = padded[0, :, y * 2:y * 2 + 3, x * 2:x * 2 + 3]
                expected[0, f, y, x] = (patch * kernel[f]).sum()
    np.testing.assert_allclose(wl.reference(data, kernel), expected, rtol=1e-12)


def test_workload_identity_ignores_display_names_and_round_trips_json():
    a = conv2d(1, 128, 28, 28, 128, 3, 3, suite="ResNet-50", name="R5")
    b = all_suite_workloads()["Conv2d-ResNet18-C5-v0"]  # the same layer in another suite
    assert a == b and a.key == b.key and hash(a) == hash(b)
    assert Workload.from_json(a.to_json()) == a and Workload.from_json(a.to_json()).label == "ResNet-50/R5"


@pytest.mark.parametrize("build", [
    lambda: conv2d(1, 0, 28, 28, 128, 3, 3),
    lambda: conv2d(1, 3, 2, 2, 8, 5, 5, padding=0),
    lambda: conv2d(1, 3, 8, 8, 8, 2, 2),  # 'same' needs an odd kernel
    lambda: conv2d(1, 3, 8, 8, 8, 3, 3, padding=-1),
    lambda: matmul(4, 4, 2.5),
    lambda: Matmul(4, 4, 4, dtype="float64"),
])
def test_bad_shapes_raise_clear_errors(build):
    with pytest.raises(WorkloadError):
        build()


def test_bad_shapes_through_gym_make(tmp_path):
    with pytest.raises(WorkloadError, match="must be >= 1"):
        gym.make("tensorgym/Matmul-v0", M=0, N=4, K=4, db=str(tmp_path / "x.db"))


def test_unknown_env_id_is_a_clear_error():
    with pytest.raises(gym.error.Error, match="Conv2d-ResNet-R99"):
        gym.make("Conv2d-ResNet-R99-v0")


def test_public_builders():
    assert isinstance(tensorgym.conv2d(1, 8, 8, 8, 8, 1, 1), Conv2d)
    assert tensorgym.matmul(2, 3, 4).key == "matmul(M=2,N=3,K=4,dtype=float32)"


# -- dtypes ------------------------------------------------------------------------------------------------
def test_the_dtype_is_part_of_the_key_the_label_and_the_description():
    fp32 = all_suite_workloads()["Conv2d-ResNet18-C7-v0"]
    int8 = fp32.with_dtype("int8")
    assert int8 != fp32 and int8.key != fp32.key and int8.key.endswith("dtype=int8)")
    assert (fp32.label, int8.label) == ("ResNet-18/C7", "ResNet-18/C7[int8]")
    assert int8.describe().endswith("int8") and int8.flops == fp32.flops
    assert Workload.from_json(int8.to_json()) == int8
    assert (int8.throughput_unit, fp32.throughput_unit, fp32.with_dtype("bf16").throughput_unit) == (
        "GOP/s", "GFLOP/s", "GFLOP/s")
    assert int8.element_types == ("uint8", "int8", "int32") and int8.output_dtype == "int32"


def test_int8_inputs_cover_the_whole_uint8_range_and_the_reference_is_exact():
    wl = matmul(64, 32, 300, dtype="int8")
    a, b = wl.random_inputs(seed=0)
    assert a.dtype == np.uint8 and b.dtype == np.int8
    assert a.min() == 0 and a.max() == 255 and b.min() == -128 and b.max() == 127
    ref = wl.reference(a, b)
    assert np.array_equal(ref, a.astype(np.int64) @ b.astype(np.int64))
    assert wl.tolerance(1e-3) == 0.0


def test_bf16_inputs_are_rounded_and_the_reference_uses_the_rounded_values():
    wl = conv2d(1, 4, 6, 6, 8, 3, 3, dtype="bf16")
    data, kernel = wl.random_inputs(seed=1)
    assert data.dtype.name == "bfloat16"
    as_float = data.astype(np.float32)
    assert np.array_equal(as_float, as_float.astype(data.dtype).astype(np.float32))  # exactly representable
    expected = conv2d(1, 4, 6, 6, 8, 3, 3).reference(as_float, kernel.astype(np.float32))
    np.testing.assert_array_equal(wl.reference(data, kernel), expected)
    assert wl.tolerance(1e-3) == 1e-5


def test_float16_is_one_more_dtype_summed_in_fp32_and_tensor_cores_get_the_protocols_tolerance():
    wl = matmul(16, 8, 32, dtype="float16")
    a, b = wl.random_inputs(seed=0)
    assert a.dtype == np.float16 and b.dtype == np.float16
    assert wl.element_types == ("float16", "float16", "float32") and wl.output_dtype == "float32"
    np.testing.assert_array_equal(wl.reference(a, b), a.astype(np.float64) @ b.astype(np.float64))
    assert wl.label == wl.key and "dtype=float16" in wl.key and wl.describe().endswith("float16")
    # One tolerance table: exact-product dtypes summed in IEEE fp32, loosened only on tensor cores.
    assert wl.tolerance(1e-3) == 1e-5 and wl.tolerance(1e-3, tensor_cores=True) == 1e-3
    assert wl.with_dtype("bf16").tolerance(1e-3, tensor_cores=True) == 1e-3
    assert wl.with_dtype("int8").tolerance(1e-3, tensor_cores=True) == 0.0
    assert wl.with_dtype("float32").tolerance(1e-3) == 1e-3


def test_unknown_dtypes_are_refused():
    with pytest.raises(WorkloadError, match="float32, int8, bf16"):
        matmul(4, 4, 4, dtype="int4")
