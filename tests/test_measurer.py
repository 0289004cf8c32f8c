"""The measurer on real kernels: correct ones time, broken ones become records, the process survives."""

from pathlib import Path

import numpy as np
import pytest

from fakes import WrongMatmulSpace
from tensorgym.measure import Measurer
from tensorgym.record import Status
from tensorgym.spaces import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.workloads import conv2d, matmul


@pytest.fixture(scope="module")
def mm_space():
    return TilesSpace(matmul(64, 48, 32), local_cpu())


def test_correct_kernels_are_checked_and_timed(measurer, mm_space):
    configs = mm_space.sample_many(np.random.default_rng(0), 3)
    records = measurer.measure(mm_space, configs)
    assert [r.config for r in records] == configs
    for r in records:
        assert r.status is Status.OK, r.error
        assert r.latency_s > 0 and len(r.samples) >= 3 and r.number >= 1
        assert r.latency_s == pytest.approx(np.median(r.samples))
        assert r.latency_cv >= 0 and r.gflops == pytest.approx(mm_space.workload.flops / r.latency_s / 1e9)
        assert r.build_s > 0 and r.run_s > 0 and r.wall_s > 0


def test_conv_kernels_with_padding_and_stride_are_correct(measurer):
    space = TilesSpace(conv2d(1, 5, 9, 11, 6, 3, 3, stride=2, padding=1), local_cpu())
    records = measurer.measure(space, space.sample_many(np.random.default_rng(1), 4))
    assert all(r.status is Status.OK for r in records), [r.error for r in records]


def test_a_wrong_kernel_is_caught(measurer):
    space = WrongMatmulSpace(matmul(32, 32, 16), local_cpu())
    record = measurer.measure(space, [space.sample(np.random.default_rng(2))])[0]
    assert record.status is Status.WRONG_RESULT
    assert "relative error" in record.error and record.gflops is None


def test_crashing_and_hanging_kernels_become_records(mm_space):
    a, b, c, d = mm_space.sample_many(np.random.default_rng(3), 4)
    with Measurer(faults={b: "crash", c: "hang"}, run_timeout=8.0) as m:
        records = m.measure(mm_space, [a, b, c, d])
        assert [r.status for r in records] == [Status.OK, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.OK]
        assert "SIGSEGV" in records[1].error and "no answer within 8.0 s" in records[2].error
        assert m.runner_restarts == 2
        assert m.measure(mm_space, [a])[0].status is Status.OK  # still working afterwards


def test_kept_builds_are_timed_again_without_a_compile(mm_space, tmp_path):
    configs = mm_space.sample_many(np.random.default_rng(5), 3)
    with Measurer(keep_builds=True) as m:
        first = m.measure(mm_space, configs)
        libraries = sorted(Path(m._workdir).rglob("*.so"))
        second = m.measure(mm_space, configs[::-1])
        assert m.kernels_built == 3 and m.kernels_run == 6  # round 2 compiled nothing
        assert sorted(Path(m._workdir).rglob("*.so")) == libraries  # the same libraries, still there
        assert [r.status for r in first + second] == [Status.OK] * 6
        assert [r.build_s for r in second] == [r.build_s for r in first[::-1]]  # what the one build took
        same_configs_other_space = TilesSpace(mm_space.workload, local_cpu())
        m.measure(same_configs_other_space, configs[:1])
        assert m.kernels_built == 4  # kept by space, not by config alone
    assert not any(path.exists() for path in libraries)  # closing removes them
    with Measurer() as m:  # without keep_builds, every measurement builds
        m.measure(mm_space, configs[:1])
        m.measure(mm_space, configs[:1])
        assert m.kernels_built == 2 and not list(Path(m._workdir).rglob("*.so"))
    with pytest.raises(TypeError, match="keep_builds must be True or False"):
        Measurer(keep_builds="yes")


def test_schedules_that_fail_to_build_are_build_errors(measurer, mm_space):
    config = mm_space.sample(np.random.default_rng(4)).replace(unroll=5)  # not a valid unroll step
    record = measurer.measure(mm_space, [config])[0]
    assert record.status is Status.BUILD_ERROR and "unroll must be one of" in record.error


def test_the_measurer_refuses_a_space_of_another_target(measurer, mm_space):
    from dataclasses import replace

    other = TilesSpace(mm_space.workload, replace(local_cpu(), num_cores=64))
    with pytest.raises(ValueError, match="target"):
        measurer.measure(other, [other.sample(np.random.default_rng(0))])


@pytest.mark.parametrize("linker", ["ld", "compiler driver"])
def test_libraries_linked_either_way_compute_the_same(tmp_path, mm_space, monkeypatch, linker):
    import tvm

    from tensorgym.measure import tasks

    if linker == "compiler driver":
        monkeypatch.setattr(tasks, "_ld", lambda: None)  # as on a machine without binutils' ld on PATH
    config = mm_space.sample(np.random.default_rng(5))
    builder = mm_space.builder()
    path = tasks.build(builder, config, str(tmp_path))["path"]
    inputs, reference = tasks.reference_data(mm_space.workload)
    args = [tvm.runtime.tensor(a, tvm.cpu(0)) for a in builder.kernel_arguments(config, inputs)]
    tvm.runtime.load_module(path)["main"](*args)
    out = builder.canonical_output(config, [a.numpy() for a in args])
    assert tasks.relative_error(out, reference) <= 1e-4


def test_reference_data_is_made_once_per_workload_and_cannot_be_changed():
    from tensorgym.measure import tasks

    wl = matmul(32, 16, 8)
    inputs, reference = tasks.reference_data(wl)
    again, same = tasks.reference_data(wl)
    assert same is reference and all(a is b for a, b in zip(inputs, again)) and again is not inputs
    np.testing.assert_array_equal(reference, wl.reference(*inputs))
    with pytest.raises(ValueError, match="read-only"):
        inputs[0][0, 0] = 1.0
