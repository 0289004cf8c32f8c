"""Paired timing: every kernel sample between two of a fixed reference's, kept as their ratio."""

from __future__ import annotations

import numpy as np
import pytest

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.measure import Measurer, TimingProtocol
from tensorgym.measure.contention import ContentionProbe
from tensorgym.measure.paired import PairedReference, PairedSampler
from tensorgym.measure.runner import Runner
from tensorgym.spaces import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.workloads import matmul


class MachineOfPhases:
    """A machine whose speed changes between phases; the kernel and the reference slow down alike."""

    def __init__(self, slowdowns: list[float]):
        self.slowdowns = slowdowns
        self.calls = 0

    def sampler(self, seconds_per_call: float):
        def time_samples(number: int, repeat: int) -> list[float]:
            out = []
            for _ in range(repeat):
                out.append(seconds_per_call * self.slowdowns[self.calls % len(self.slowdowns)])
                self.calls += 1
            return out
        return time_samples


def test_a_paired_sample_keeps_the_ratio_whatever_the_machine_does():
    machine = MachineOfPhases([1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0])  # stretches at half speed
    paired = PairedSampler(machine.sampler(3e-3), machine.sampler(1e-3), reference_s=1e-3, reference_number=10)
    samples = paired(5, 3)
    # Each kernel sample sat between two reference samples of its own phase, or one of each at a change.
    plain = MachineOfPhases([1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0]).sampler(3e-3)(5, 6)
    assert max(plain) / min(plain) == pytest.approx(2.0)  # unpaired, the same kernel reads 2x apart
    assert all(1.5e-3 < s < 6e-3 for s in samples)
    assert samples[1] == pytest.approx(3e-3)  # r=2, k=2, r=2: the ratio cancels the slow phase
    assert len(paired.reference_samples) == 4  # one before the first kernel sample, one after each
    state = paired.state()
    assert state["reference_s"] == 1e-3
    assert state["reference_drift"] == pytest.approx(1.0)  # its median sample ran at half speed


def test_a_steady_machine_gives_the_kernels_own_latency():
    machine = MachineOfPhases([1.0])
    paired = PairedSampler(machine.sampler(4e-3), machine.sampler(2e-3), reference_s=2e-3, reference_number=5)
    assert paired(1, 4) == pytest.approx([4e-3] * 4)
    assert paired.state()["reference_drift"] == pytest.approx(0.0)


def test_reference_samples_last_as_long_as_the_kernels():
    assert PairedSampler.reference_calls(1e-3, 10.0) == 10
    assert PairedSampler.reference_calls(50e-3, 10.0) == 1


def test_the_reference_needs_a_latency():
    with pytest.raises(ValueError, match="positive"):
        PairedReference(None, "lib.so", 0.0)  # type: ignore[arg-type]


def test_steal_is_a_share_of_the_cores_time():
    probe = ContentionProbe(frozenset({0}))
    before = probe.snapshot()
    share = probe.steal_share(before, probe.snapshot())
    assert share is None or 0.0 <= share


@pytest.fixture(scope="module")
def space():
    return TilesSpace(matmul(64, 64, 64), local_cpu())


QUIET = TimingProtocol(warmup_ms=2.0, process_warmup_ms=20.0, min_repeat_ms=2.0, round_ms=20.0, max_timing_ms=60.0)


def test_paired_records_say_how_the_reference_ran(space):
    rng = np.random.default_rng(3)
    reference, other = space.sample_many(rng, 2)
    with Measurer(paired=reference, protocol=QUIET, builders=1) as measurer:
        records = measurer.measure(space, [reference, other])
    for record in records:
        assert record.ok, record.error
        state = dict(record.device_state)
        assert {"paired_ratio", "reference_s", "reference_drift"} <= set(state)
        assert state["paired_ratio"] == pytest.approx(record.latency_s / state["reference_s"])
    # The reference against itself: the same kernel within one runner call. Near 1 on a quiet machine; a loaded one
    # (another job on both cores) was seen to give 0.43, so the bound only catches a wrong scale or kernel.
    assert 0.1 < dict(records[0].device_state)["paired_ratio"] < 10.0
    # One session, one scale.
    assert len({dict(r.device_state)["reference_s"] for r in records}) == 1


def test_unpaired_records_carry_no_paired_state(space):
    config = space.sample_many(np.random.default_rng(4), 1)[0]
    with Measurer(protocol=QUIET, builders=1) as measurer:
        (record,) = measurer.measure(space, [config])
    assert record.ok and "paired_ratio" not in dict(record.device_state)


def test_a_paired_measurer_refuses_what_it_cannot_pair(space):
    with pytest.raises(InvalidTypeError, match="paired must be a Config"):
        Measurer(paired="tile=8")  # type: ignore[arg-type]

    class Remote(Runner):
        def run(self, *args, **kwargs):  # pragma: no cover - never called
            raise AssertionError

    with pytest.raises(InvalidArgumentError, match="this machine's CPU"):
        Measurer(paired=space.sample_many(np.random.default_rng(5), 1)[0], runner=Remote(local_cpu()))
    foreign = Config({"no_such_knob": 1})
    assert not space.is_valid(foreign)
    with Measurer(paired=foreign, protocol=QUIET, builders=1) as measurer, \
            pytest.raises(InvalidArgumentError, match="not a config of"):
        measurer.measure(space, space.sample_many(np.random.default_rng(7), 1))


def test_export_ranks_paired_records_of_several_sessions_by_their_ratios(space):
    from tensorgym.landscape.export import on_one_scale, paired_scale
    from tensorgym.record import Record, Status

    a, b, c = space.sample_many(np.random.default_rng(8), 3)

    def paired(config, ratio, reference_s):
        latency = ratio * reference_s
        return Record("w", "t", "tiles", config, Status.OK, latency_s=latency, samples=(latency,), gflops=1.0 / latency,
                      device_state=(("paired_ratio", ratio), ("reference_s", reference_s)))

    # b was measured in a slow session (its reference ran 2x slower): by latency it reads slower than a,
    # by its ratio it is faster.
    records = [paired(a, 1.2, 1e-3), paired(b, 1.1, 2e-3), Record("w", "t", "tiles", c, Status.BUILD_ERROR)]
    assert paired_scale(records) == pytest.approx(1.5e-3)
    rescaled = on_one_scale(records, 1e-3)
    assert rescaled[1].latency_s < rescaled[0].latency_s
    assert rescaled[1].gflops == pytest.approx(1 / 1.1e-3) and rescaled[2] is records[2]
    plain = Record("w", "t", "tiles", a, Status.OK, latency_s=1e-3, gflops=1.0)
    assert paired_scale([plain]) is None and on_one_scale([plain]) == [plain]


def test_a_warm_callable_sampler_makes_one_untimed_call_before_each_sample_as_tvm_does():
    from tensorgym.measure.protocol import callable_sampler

    calls = []
    assert len(callable_sampler(lambda: calls.append(1))(3, 2)) == 2 and len(calls) == 6
    calls.clear()
    assert len(callable_sampler(lambda: calls.append(1), warm=True)(3, 2)) == 2 and len(calls) == 8
