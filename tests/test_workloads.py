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
