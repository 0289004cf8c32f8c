"""Timings that know when the machine is busy, and short timings of kernels far slower than the best."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager

import numpy as np
import pytest

from tensorgym.measure.contention import ContentionProbe, CpuSnapshot, is_busy
from tensorgym.measure.protocol import SHORT, TimingProtocol
from tensorgym.record import BUSY_SHARE

needs_schedstat = pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"),
                                     reason="needs Linux scheduler statistics (/proc/self/schedstat)")


def usable_cores() -> set[int]:
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


@contextmanager
def busy_children(cores: set[int], per_core: int = 2):
    """``per_core`` processes spinning on each of ``cores`` (pinned there), ended on exit."""
    children = []
    try:
        for core in sorted(cores):
            for _ in range(per_core):
                child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                children.append(child)
                os.sched_setaffinity(child.pid, {core})
        time.sleep(0.2)  # let them start spinning
        yield
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.wait()


@contextmanager
def pinned_to(core: int):
    """This process on one core for a while (its affinity restored on exit)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class ScriptedProbe(ContentionProbe):
    """A probe whose successive intervals have the given shares."""

    def __init__(self, shares):
        super().__init__(frozenset({0}))
        self.shares = list(shares)

    def snapshot(self) -> CpuSnapshot:
        return CpuSnapshot(time.perf_counter(), {}, None)

    def share(self, before, after):
        return self.shares.pop(0) if self.shares else 0.0


def constant_sampler(seconds: float):
    return lambda number, repeat: [seconds] * repeat


def test_busy_rounds_are_set_aside_and_taken_again():
    protocol = TimingProtocol(min_samples=3, max_samples=3, round_ms=30, warmup_ms=0)
    timing = protocol.run(0.01, constant_sampler(0.01), probe=ScriptedProbe([0.5, 0.0]))
    assert timing.dropped == 3 and len(timing.samples) == 3
    assert timing.contention == 0.0 and not timing.busy
    assert timing.round_shares[:2] == [0.5, 0.0]


def test_a_timing_on_a_machine_that_stays_busy_is_flagged():
    protocol = TimingProtocol(min_samples=3, max_samples=3, round_ms=30, warmup_ms=0)
    timing = protocol.run(0.01, constant_sampler(0.01), probe=ScriptedProbe([0.4] * 100))
    assert timing.busy and timing.contention == pytest.approx(0.4)
    assert timing.dropped == 0 and len(timing.samples) >= 3  # what the busy machine gave, kept and flagged


def test_a_kernel_far_slower_than_the_incumbent_is_timed_short():
    protocol = TimingProtocol(short_factor=3.0)
    timing = protocol.run(1.0, constant_sampler(0.9), incumbent_s=0.1, probe=ScriptedProbe([]))
    assert timing.mode == SHORT and timing.samples == [0.9] and timing.number == 1
    # A first call that misled (cold caches) is followed by a full timing.
    full = protocol.run(1.0, constant_sampler(0.2), incumbent_s=0.1, probe=ScriptedProbe([]))
    assert full.mode == "full" and len(full.samples) >= protocol.min_samples
    # A slow sample taken while the machine was busy confirms nothing: the kernel is timed in full.
    busy = protocol.run(1.0, constant_sampler(0.9), incumbent_s=0.1, probe=ScriptedProbe([0.5]))
    assert busy.mode == "full" and len(busy.samples) >= protocol.min_samples
    # Without an incumbent, or with short timing switched off, every kernel is timed in full.
    assert protocol.run(1.0, constant_sampler(0.9), probe=ScriptedProbe([])).mode == "full"
    off = TimingProtocol(short_factor=0)
    assert off.run(1.0, constant_sampler(0.9), incumbent_s=0.1, probe=ScriptedProbe([])).mode == "full"


def test_shares_are_wait_plus_steal_over_the_cores():
    probe = ContentionProbe(frozenset({0, 1}))
    before = CpuSnapshot(0.0, {1: 0, 2: 100}, 0)
    after = CpuSnapshot(1.0, {1: int(0.2e9), 2: 100, 3: int(0.1e9)}, 0)  # thread 3 started in between
    assert probe.share(before, after) == pytest.approx(0.15)
    assert probe.share(CpuSnapshot(0.0, None, None), after) is None
    assert is_busy(0.5) and not is_busy(None) and not is_busy(BUSY_SHARE / 2)


@needs_schedstat
def test_a_busy_child_process_is_detected():
    core = min(usable_cores())
    with pinned_to(core), busy_children({core}):
        probe = ContentionProbe()  # of this process's one core
        before = probe.snapshot()
        t_end = time.perf_counter() + 0.5
        while time.perf_counter() < t_end:  # compete with the children for a core
            pass
        share = probe.share(before, probe.snapshot())
        protocol = TimingProtocol(busy_retime_ms=0, min_repeat_ms=50, round_ms=300, max_timing_ms=300)
        timing = protocol.time_callable(lambda: sum(range(100_000)))
    # Two spinning processes on its core leave this one about a third of it: it waits the rest.
    assert share is not None and share > 0.3
    assert timing.busy and timing.contention > BUSY_SHARE


@needs_schedstat
@pytest.mark.skipif(len(usable_cores()) > 8, reason="spins two processes per core: meant for small machines")
def test_records_timed_on_a_busy_machine_say_so(measurer, tmp_path):
    from tensorgym.database import Database
    from tensorgym.spaces import TilesSpace
    from tensorgym.target import local_cpu
    from tensorgym.workloads import matmul

    space = TilesSpace(matmul(64, 64, 64), local_cpu())
    config = space.sample(np.random.default_rng(0))
    measurer.measure(space, [config])  # start the runner and build before the machine gets busy
    with busy_children(usable_cores()):
        record = measurer.measure(space, [config], check=False)[0]
    assert record.ok and record.busy and record.contention > BUSY_SHARE, record
    with Database(tmp_path / "r.db") as db:
        stored = db.commit(record)
        assert stored.busy and stored.contention == pytest.approx(record.contention)


def test_retiming_sets_busy_rounds_aside():
    from tensorgym.baselines.compare import retime_interleaved
    from tensorgym.config import Config
    from tensorgym.record import Record, Status

    class ScriptedMeasurer:
        """Each measure() gives a record with the next contention (busy ones read slow)."""

        def __init__(self, contentions):
            self.contentions = list(contentions)

        def measure(self, space, configs, check=True):
            share = self.contentions.pop(0)
            return [Record("w", "t", "tiles", configs[0], Status.OK, latency_s=1.0, contention=share,
                           gflops=1.0 if is_busy(share) else 10.0)]

    kernel = [(None, Config({}))]
    clean = retime_interleaved(ScriptedMeasurer([0.0, 0.5, 0.0]), kernel, [], 3)
    assert clean.kernels == [[10.0, 10.0]] and clean.kernels_busy == [False]
    # Every round busy: what the busy machine gave is all there is, and the result says so.
    busy = retime_interleaved(ScriptedMeasurer([0.5, 0.5]), kernel, [], 2)
    assert busy.kernels == [[1.0, 1.0]] and busy.kernels_busy == [True]
    kernel_values, vendor_values = busy  # unpacks as the two lists of values
    assert kernel_values == [[1.0, 1.0]] and vendor_values == []
