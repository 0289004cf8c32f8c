"""Cheaper trials: a kernel far slower than the incumbent after its checked call is stopped
there, as a ``short`` record whose latency is the one call it made; everything else is measured as before.

The protocol and the device side are tested with scripted durations and contention shares, the measurer with a
fake runner whose kernels "take" given times, so nothing here depends on how fast the machine is; the last test
runs real kernels, and asserts only what does not depend on speed (statuses).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fakes import WrongMatmulSpace
from tensorgym.config import Config
from tensorgym.database import Database
from tensorgym.evaluator import Evaluator
from tensorgym.measure import Measurer, TimingProtocol
from tensorgym.measure import tasks
from tensorgym.measure.contention import CpuSnapshot
from tensorgym.measure.protocol import FULL, SHORT
from tensorgym.measure.runner import Runner
from tensorgym.measure.worker import Outcome
from tensorgym.record import Record, Status
from tensorgym.spaces import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.workloads import matmul

INCUMBENT = 0.01  # seconds: the fastest kernel known in these tests


class QuietProbe:
    """A contention probe that sees every interval with the same share (0: a quiet machine)."""

    def __init__(self, share: float | None = 0.0):
        self.value = share

    def snapshot(self) -> CpuSnapshot:
        return CpuSnapshot(0.0, {}, None)

    def share(self, before, after) -> float | None:
        return self.value


def sampler_that_must_not_run(number: int, repeat: int) -> list[float]:
    raise AssertionError("a kernel stopped early is not timed any further")


def constant(seconds: float):
    calls = []

    def samples(number: int, repeat: int) -> list[float]:
        calls.append((number, repeat))
        return [seconds] * repeat

    samples.calls = calls  # type: ignore[attr-defined]
    return samples


# -- the protocol ---------------------------------------------------------------------------------------------------
def test_a_checked_call_far_slower_than_the_incumbent_stops_the_timing():
    protocol = TimingProtocol()
    timing = protocol.run(0.5, sampler_that_must_not_run, incumbent_s=INCUMBENT, probe=QuietProbe(),
                          first_share=0.0)
    # The honest bound: the one call that was made, one call per sample, marked short.
    assert timing.mode == SHORT and timing.samples == [0.5] and timing.number == 1 and not timing.busy


@pytest.mark.parametrize("case", ["below the factor", "no incumbent", "switched off", "busy call", "unknown share"])
def test_no_early_stop_otherwise(case):
    first, incumbent, share, protocol = 0.5, INCUMBENT, 0.0, TimingProtocol()
    if case == "below the factor":
        first = 5 * INCUMBENT  # slow enough for a confirming sample (3x), not for stopping (10x)
    elif case == "no incumbent":
        incumbent = None
    elif case == "switched off":
        protocol = TimingProtocol(stop_factor=0)
    elif case == "busy call":
        share = 0.5  # another process took half the cores: the slow call says nothing of the kernel
    else:
        share = None  # a machine without scheduler statistics cannot tell a quiet call
    samples = constant(first)
    timing = protocol.run(first, samples, incumbent_s=incumbent, probe=QuietProbe(), first_share=share)
    assert samples.calls, "the kernel was timed after its checked call"
    if incumbent is not None and protocol.short_factor and first > protocol.short_factor * incumbent:
        assert timing.mode == SHORT and len(samples.calls) == 1  # the older rule: one confirming sample
    else:
        assert timing.mode == FULL and len(timing.samples) >= protocol.min_samples


def test_the_stop_factor_is_far_or_off():
    assert TimingProtocol().stop_factor == 10.0  # the documented factor
    assert TimingProtocol(stop_factor=0).stopped_early(1.0, 1e-6, 0.0) is False
    with pytest.raises(ValueError, match="stop_factor"):
        TimingProtocol(stop_factor=1.5)


# -- the device side (check_and_time) with a fake module --------------------------------------------------------------
class FakeModule:
    """A loaded kernel that writes ``output`` (the reference, or something wrong) and times at ``seconds``."""

    def __init__(self, output: np.ndarray, seconds: float):
        self.output = output
        self.seconds = seconds
        self.timed = 0

    def __getitem__(self, name: str):
        return lambda *args: args[-1].copyfrom(self.output)

    def time_evaluator(self, name, device, number, repeat, min_repeat_ms):
        def run(*args):
            self.timed += 1
            return SimpleNamespace(results=[self.seconds] * repeat)

        return run


@pytest.fixture()
def small_space():
    return TilesSpace(matmul(16, 16, 8), local_cpu())


@pytest.fixture()
def quiet_device(monkeypatch):
    monkeypatch.setattr(tasks, "ContentionProbe", QuietProbe)


def device_run(space, module, incumbent_s, protocol=None, fresh_process=False):
    import tvm

    config = space.sample(np.random.default_rng(0))
    protocol = protocol or TimingProtocol(process_warmup_ms=0, warmup_ms=0)
    return tasks.check_and_time(module, tvm.cpu(0), space.builder(), config, check=True, protocol=protocol,
                                incumbent_s=incumbent_s, fresh_process=fresh_process)


def test_the_device_side_stops_a_correct_kernel_after_its_checked_call(small_space, quiet_device):
    _, reference = tasks.reference_data(small_space.workload)
    module = FakeModule(reference.astype(np.float32), seconds=1.0)
    # Any real call takes longer than ten picoseconds: this kernel is "far slower" than that incumbent.
    result = device_run(small_space, module, incumbent_s=1e-12)
    assert result["status"] == "ok" and result["timing"] == "short" and result["number"] == 1
    assert len(result["samples"]) == 1 and result["samples"][0] < 1.0  # the checked call, not a timed sample
    assert module.timed == 0
    # With an incumbent no call can be ten times slower than, it is timed in full.
    result = device_run(small_space, module, incumbent_s=1e3)
    assert result["timing"] == "full" and module.timed > 0 and result["samples"][0] == 1.0


def test_an_rpc_device_is_not_stopped_by_its_checked_call(small_space, quiet_device):
    # Over RPC (a fresh process on the device) the checked call is timed on this side, the network's round trip
    # included: it cannot say a kernel is slow, so the kernel gets a sample timed on the device.
    _, reference = tasks.reference_data(small_space.workload)
    module = FakeModule(reference.astype(np.float32), seconds=1.0)
    result = device_run(small_space, module, incumbent_s=1e-12, fresh_process=True)
    assert result["status"] == "ok" and module.timed > 0 and 1.0 in result["samples"]


def test_a_wrong_kernel_is_wrong_however_slow(small_space, quiet_device):
    _, reference = tasks.reference_data(small_space.workload)
    result = device_run(small_space, FakeModule(np.zeros_like(reference, dtype=np.float32), 1.0), incumbent_s=1e-12)
    assert result["status"] == "wrong_result"  # the check comes before any stop


def test_one_call_samples_are_timed_without_time_evaluators_extra_call():
    import tvm

    module = FakeModule(np.zeros(4, dtype=np.float32), seconds=0.02)
    args = [tvm.runtime.tensor(np.zeros(4, dtype=np.float32), tvm.cpu(0))]
    direct = tasks.main_sampler(module, tvm.cpu(0), args, direct=True)
    samples = direct(1, 3)
    assert len(samples) == 3 and module.timed == 0  # the calls themselves were timed
    assert direct(2, 3) == [0.02] * 3 and module.timed == 1  # several calls a sample: time_evaluator
    assert tasks.main_sampler(module, tvm.cpu(0), args)(1, 2) == [0.02] * 2 and module.timed == 2
    assert TimingProtocol().direct_calls and not TimingProtocol(direct_calls=False).direct_calls


# -- the measurer with a fake runner --------------------------------------------------------------------------------
def fake_build(builder, config: Config, out_dir: str, fault: str | None = None) -> dict:
    """The builder pool's task for the fake runner: no compiling, a path to remove afterwards."""
    return {"path": str(Path(out_dir) / f"fake-{config.key}.so"), "seconds": 0.001}


class FakeRunner(Runner):
    """Runs each config's "kernel" as ``seconds[config]`` per call through the real protocol, quietly."""

    build_task = f"{__name__}:fake_build"
    reports_phases = True

    def __init__(self, seconds: dict[Config, float], protocol: TimingProtocol | None = None):
        super().__init__(local_cpu(), protocol or TimingProtocol(process_warmup_ms=0, warmup_ms=0))
        self.seconds = seconds
        self.incumbents: list[float | None] = []

    def run(self, builder, config, artifact, *, check, timeout, fault=None, incumbent_s=None) -> Outcome:
        self.incumbents.append(incumbent_s)
        seconds = self.seconds[config]
        samples = constant(seconds)
        timing = self.protocol.run(seconds, samples, incumbent_s=incumbent_s, probe=QuietProbe(), first_share=0.0)
        calls = 1 + sum(number * repeat for number, repeat in samples.calls)  # the checked call, then the timed ones
        return Outcome("ok", {"status": "ok", "samples": timing.samples, "number": timing.number,
                              "contention": timing.contention, "dropped": timing.dropped, "timing": timing.mode},
                       seconds=seconds * calls, phase="kernel")


@pytest.fixture(scope="module")
def fake_space():
    return TilesSpace(matmul(64, 64, 64), local_cpu())


def fake_kernels(space, times: list[float]) -> dict[Config, float]:
    return dict(zip(space.sample_many(np.random.default_rng(7), len(times)), times))


def test_the_measurer_stops_only_far_slower_kernels(fake_space):
    # The fast one first (it becomes the incumbent), then 2x, 5x and 50x slower ones.
    kernels = fake_kernels(fake_space, [0.001, 0.002, 0.005, 0.05])
    runner = FakeRunner(kernels)
    with Measurer(runner=runner, builders=1) as measurer:
        records = measurer.measure(fake_space, list(kernels), adaptive=True)
    assert [r.status for r in records] == [Status.OK] * 4
    assert runner.incumbents == [None, 0.001, 0.001, 0.001]
    assert [r.timing for r in records] == ["full", "full", "short", "short"]
    stopped = records[-1]
    assert stopped.samples == (0.05,) and stopped.number == 1 and stopped.latency_s == 0.05
    assert stopped.gflops == pytest.approx(fake_space.workload.gflops(0.05))
    assert stopped.run_s == pytest.approx(0.05)  # the checked call only: no sample after it
    assert records[2].run_s > 0.005  # the 5x kernel took a confirming sample


def test_records_agree_with_the_savings_off_and_on(fake_space):
    kernels = fake_kernels(fake_space, [0.001, 0.0012, 0.05, 0.0009, 0.3])
    records = {}
    for savings in (False, True):
        with Measurer(runner=FakeRunner(kernels), builders=1, savings=savings) as measurer:
            assert measurer.protocol.stop_factor == (10.0 if savings else 0.0)
            assert measurer.protocol.direct_calls is savings
            records[savings] = measurer.measure(fake_space, list(kernels), adaptive=True)
    off, on = records[False], records[True]
    assert [r.status for r in off] == [r.status for r in on]
    for before, after in zip(off, on):
        assert after.latency_s == pytest.approx(before.latency_s)  # the fake kernels take the same time per call
        assert after.timing == before.timing  # both short for the far slower ones
        assert after.run_s <= before.run_s


def test_a_short_record_counts_as_measured_and_slow(fake_space, tmp_path):
    kernels = fake_kernels(fake_space, [0.001, 0.05])
    fast, slow = kernels
    with Database(tmp_path / "r.db") as db, Measurer(runner=FakeRunner(kernels), builders=1) as measurer:
        evaluator = Evaluator(fake_space, db, measurer)
        records = evaluator.evaluate([fast, slow])
        short = records[1]
        assert short.ok and short.short and short.final and short.score < records[0].score
        # Best-of and the incumbent never pick it; the database answers it without measuring it again.
        assert db.best(fake_space.workload.key, fake_space.target.fingerprint, fake_space.name)[0].config == fast
        assert evaluator.incumbent_s() == pytest.approx(0.001)
        assert evaluator.evaluate([slow])[0] == short and measurer.kernels_run == 2
        # Re-measuring completes it: timed in full, the stored row updated in place.
        full = evaluator.time_in_full(short)
        assert full.timing == "full" and len(full.samples) >= 3 and full.id == short.id
        assert db.get(full.workload, full.target, full.space, slow).timing == "full"


def test_agents_see_a_short_record_as_a_slow_measurement(fake_space):
    """A cost model learns from ``score`` (GFLOP/s of a correct kernel): a short one is slow, not failed."""
    config = fake_space.sample(np.random.default_rng(1))
    wl = fake_space.workload
    short = Record(wl.key, fake_space.target.fingerprint, fake_space.name, config, Status.OK, latency_s=0.5,
                   samples=(0.5,), number=1, gflops=wl.gflops(0.5), timing="short")
    assert short.ok and short.short and 0 < short.score == pytest.approx(wl.gflops(0.5))


# -- real kernels: faults still become records, statuses agree off and on ----------------------------------------------
def test_faulty_kernels_still_become_records_with_the_savings_on(tmp_path):
    space = TilesSpace(matmul(64, 48, 32), local_cpu())
    wrong_space = WrongMatmulSpace(matmul(32, 32, 16), local_cpu())
    a, b, c, d = space.sample_many(np.random.default_rng(3), 4)
    wrong = wrong_space.sample(np.random.default_rng(2))
    quiet = TimingProtocol(busy_share=1e9)  # no round counts as busy on a loaded test machine
    statuses = {}
    for savings in (False, True):
        with Measurer(faults={b: "crash", c: "hang"}, run_timeout=8.0, protocol=quiet, savings=savings) as measurer:
            # An incumbent faster than any real kernel: every kernel that runs is "far slower".
            records = measurer.measure(space, [a, b, c, d], adaptive=True, incumbent_s=1e-9)
            records += measurer.measure(wrong_space, [wrong], adaptive=True, incumbent_s=1e-9)
        statuses[savings] = [r.status for r in records]
        assert all(r.short for r in records if r.ok)
    assert statuses[True] == statuses[False] == [Status.OK, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.OK,
                                                 Status.WRONG_RESULT]
