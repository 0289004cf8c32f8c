"""On an NVIDIA GPU (``pytest -m gpu``): the local target, TVM-generated kernels and CUTLASS kernels run,
checked against NumPy and timed with their clocks recorded, a faulting kernel costs one record, the envs and
the vendor baselines. Everything here skips on a machine without a usable GPU."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest

from tensorgym.catalog import make_space
from tensorgym.config import Config
from tensorgym.record import Status
from tensorgym.target import TargetError, resolve_target
from tensorgym.workloads import conv2d, matmul

pytestmark = pytest.mark.gpu
needs_tvm = pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="TVM is not installed")


@pytest.fixture(scope="module")
def gpu():
    try:
        return resolve_target("cuda")
    except TargetError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def cuda_measurer(gpu):
    from tensorgym.measure import Measurer

    with Measurer(gpu) as measurer:
        yield measurer


def test_the_local_gpu_is_described(gpu):
    device = gpu.device
    assert device.num_sms > 0 and device.max_threads_per_block >= 1024 and device.l2_bytes > 0
    assert device.driver and device.toolkit and device.max_sm_clock_mhz > 0
    assert resolve_target("cuda").fingerprint == gpu.fingerprint
    assert device.name in gpu.label


@needs_tvm
@pytest.mark.parametrize("workload", [
    matmul(256, 512, 128), matmul(256, 512, 128, dtype="float16"), matmul(128, 256, 64, dtype="bf16"),
    conv2d(1, 32, 14, 14, 64, 3, 3), conv2d(1, 16, 28, 28, 32, 1, 1, 2, 0),
], ids=["mm-f32", "mm-f16", "mm-bf16", "conv3x3", "conv1x1-s2"])
def test_tvm_kernels_run_correctly_and_are_timed(gpu, cuda_measurer, workload):
    space = make_space("tiles", workload, gpu)
    configs = space.sample_many(np.random.default_rng(0), 6)
    records = cuda_measurer.measure(space, configs)
    assert [r.status for r in records] == [Status.OK] * len(configs), [r.error[:300] for r in records]
    for record in records:
        assert record.gflops > 0 and len(record.samples) >= 10 and record.number == 1
        state = dict(record.device_state)
        assert state.get("sm_clock_mhz", 0) > 0  # NVML's clock while timing
        assert state["graph_timed"] == 1.0  # replayed from a CUDA graph: the host's launch work is not timed


@needs_tvm
def test_dynamic_shared_memory_kernels_run(gpu, cuda_measurer):
    space = make_space("tiles", matmul(1024, 1024, 1024), gpu)
    config = Config({"i": (8, 1, 16, 8, 1), "j": (8, 1, 16, 8, 1), "k": (16, 64, 1), "unroll": 64})
    assert space.shared_scope(config) == "shared.dyn"
    (record,) = cuda_measurer.measure(space, [config])
    assert record.status is Status.OK, record.error


@needs_tvm
def test_a_crashing_kernel_costs_one_record(gpu, tmp_path):
    from tensorgym.measure import Measurer

    space = make_space("tiles", matmul(128, 128, 128), gpu)
    first, second = space.sample_many(np.random.default_rng(1), 2)
    with Measurer(gpu, faults={first: "crash"}) as measurer:
        crashed, fine = measurer.measure(space, [first, second])
        assert crashed.status is Status.RUNTIME_ERROR and fine.status is Status.OK
        assert measurer.runner_restarts >= 1


def _cutlass_configs(space, *, family: int, epilogue: int, split_k: int = 1):
    return [c for c in space.configs() if c["tile"][0] == family and c["epilogue"] == epilogue
            and c["split_k"] == split_k]


@pytest.mark.parametrize("dtype", ["float16", "bf16", "float32"])
def test_cutlass_gemms_run_correctly(gpu, cuda_measurer, dtype):
    workload = matmul(512, 768, 256, dtype=dtype)
    space = make_space("cutlass", workload, gpu, epilogue="bias_relu", swizzles=(8,), split_k=(1, 2))
    picks = _cutlass_configs(space, family=80, epilogue=1)[:1] + _cutlass_configs(space, family=80, epilogue=2)[:1]
    picks += _cutlass_configs(space, family=80, epilogue=2, split_k=2)[:1]  # fused split-K is not offered
    if gpu.device.compute_capability == (9, 0) and dtype != "float32":
        picks += _cutlass_configs(space, family=90, epilogue=1)[:1]
    records = cuda_measurer.measure(space, picks)
    assert [r.status for r in records] == [Status.OK] * len(picks), [r.error[:500] for r in records]
    assert [dict(r.device_state)["graph_timed"] for r in records] == [1.0] * len(picks)


def test_cutlass_conv_runs_correctly(gpu, cuda_measurer):
    workload = conv2d(1, 64, 28, 28, 64, 3, 3, dtype="float16")
    space = make_space("cutlass", workload, gpu, swizzles=(4,), split_k=(1, 2))
    picks = _cutlass_configs(space, family=80, epilogue=0)[:1] + _cutlass_configs(space, family=80, epilogue=0,
                                                                                  split_k=2)[:1]
    records = cuda_measurer.measure(space, picks)
    assert [r.status for r in records] == [Status.OK] * len(picks), [r.error[:500] for r in records]


@needs_tvm
def test_envs_run_on_the_gpu(gpu, tmp_path):
    import gymnasium as gym

    import tensorgym  # noqa: F401 - registers the ids

    env = gym.make("tensorgym/Matmul-v0", M=256, N=256, K=256, target="cuda", db=str(tmp_path / "r.db"))
    try:
        observation, info = env.reset(seed=0)
        assert info["gflops"] > 0 and observation.shape == env.observation_space.shape
        action = int(np.flatnonzero(info["action_mask"])[0])
        env.step(action)
    finally:
        env.close()


def test_vendor_libraries_time_on_the_gpu(gpu):
    pytest.importorskip("torch")
    from tensorgym.baselines.vendor import time_vendor

    for workload in (matmul(512, 768, 256, dtype="float16"), dataclasses.replace(conv2d(1, 64, 28, 28, 64, 3, 3))):
        result = time_vendor(workload, target=gpu)
        assert result.gflops > 0 and result.max_rel_error < 1e-2
        assert dict(result.device_state).get("sm_clock_mhz", 0) > 0
        assert dict(result.device_state)["graph_timed"] == 1.0
