"""Faults of the machine are not faults of the kernel; the database never loses a record silently.

Kernel faults (a segfault in the kernel, a hang, a wrong result, a build error) are final records
(tests/test_measurer.py). Here the machine fails instead: the runner is killed from outside (as the
OOM killer or an operator would), dies before it reaches a kernel, the build directory or the
database's disk fills up. Full disks are real small tmpfs mounts where this process may mount
(root), and injected errors otherwise.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fakes import SyntheticMeasurer
from tensorgym.database import Database, DatabaseWriteError
from tensorgym.evaluator import Evaluator
from tensorgym.measure import Measurer, measurer as measurer_module
from tensorgym.measure.faults import InfrastructureError, crash_is_kernel_fault, infrastructure_cause
from tensorgym.measure.runner import Runner
from tensorgym.measure.worker import Outcome, Worker, run_all
from tensorgym.record import Record, Status
from tensorgym.spaces import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.workloads import matmul


@pytest.fixture(scope="module")
def space():
    return TilesSpace(matmul(64, 48, 32), local_cpu())


@pytest.fixture(autouse=True)
def no_retry_pause(monkeypatch):
    monkeypatch.setattr(measurer_module, "INFRA_RETRY_DELAY_S", 0.0)


@pytest.fixture()
def faulty(measurer):
    """The session's measurer with test faults and retries of the test's choosing (restored after)."""

    @contextlib.contextmanager
    def use(faults, infra_retries=2, run_timeout=None):
        saved = measurer.faults, measurer.infra_retries, measurer.run_timeout
        measurer.faults, measurer.infra_retries, measurer.run_timeout = dict(faults), infra_retries, run_timeout
        try:
            yield measurer
        finally:
            measurer.faults, measurer.infra_retries, measurer.run_timeout = saved

    return use


def configs(space, n, seed=0):
    return space.sample_many(np.random.default_rng(seed), n)


# -- small tmpfs mounts -----------------------------------------------------------------------------------------
@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` (skips the test where this process may not mount)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path, leave: int = 0) -> Path:
    """Fill the file system of ``directory`` up, then free ``leave`` bytes again."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (65536, 512):  # then the last few bytes
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * size)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


# -- the rules ----------------------------------------------------------------------------------------------------
def test_fault_signals_count_against_the_kernel_only_while_it_runs():
    assert crash_is_kernel_fault(signal.SIGSEGV, "kernel")
    assert crash_is_kernel_fault(signal.SIGBUS, "kernel") and crash_is_kernel_fault(signal.SIGFPE, "kernel")
    assert not crash_is_kernel_fault(signal.SIGKILL, "kernel")  # the OOM killer, an operator
    assert not crash_is_kernel_fault(signal.SIGTERM, "kernel")
    assert not crash_is_kernel_fault(signal.SIGSEGV, "")  # before the kernel started: loading failed
    assert not crash_is_kernel_fault(None, "kernel")  # the process exited
    assert crash_is_kernel_fault(signal.SIGSEGV, "", phases_reported=False)  # a runner that cannot tell


def test_errors_of_a_full_or_failing_disk_are_the_machines():
    import errno

    assert infrastructure_cause(OSError(errno.ENOSPC, "No space left on device"))
    assert infrastructure_cause(OSError(errno.EIO, "Input/output error"))
    assert infrastructure_cause(RuntimeError("ld -shared failed (1): ld: final link failed: No space left on device"))
    assert infrastructure_cause(MemoryError())
    assert infrastructure_cause(RuntimeError("unroll must be one of (0, 16)")) is None
    assert infrastructure_cause(OSError(errno.ENOENT, "No such file or directory")) is None
    # TVM's words when the loader cannot map one more library into a runner that holds thousands
    assert infrastructure_cause(RuntimeError("InternalError: Check failed: (lib_handle_ != nullptr) is false: Failed "
                                             "to load dynamic shared library /tmp/k.so: failed to map segment from "
                                             "shared object"))


def test_the_runner_replaces_its_process_before_loaded_libraries_fill_it(space, monkeypatch):
    from tensorgym.measure import runner as runner_module

    monkeypatch.setattr(runner_module, "KERNELS_PER_PROCESS", 2)
    configs = space.sample_many(np.random.default_rng(7), 5)
    with Measurer() as m:
        pids = []
        for config in configs:
            assert m.measure(space, [config])[0].status is Status.OK
            pids.append(m.runner._worker.pid)
        assert len(set(pids)) == 3 and pids[0] == pids[1] != pids[2]  # a new process every 2 kernels
        assert m.runner_restarts == 0  # replaced, not crashed


# -- the runner killed from outside ------------------------------------------------------------------------------
def test_a_runner_killed_from_outside_is_retried_and_not_blamed_on_the_kernel(space, faulty):
    a, b, c = configs(space, 3, seed=1)
    with faulty({a: "kill-once", b: "kill"}, infra_retries=2) as m:
        restarts = m.runner_restarts
        records = m.measure(space, [a, b, c])
        assert [r.status for r in records] == [Status.OK, Status.INFRA_ERROR, Status.OK]
        assert "SIGKILL" in records[1].error and "machine" in records[1].error
        assert m.runner_restarts - restarts == 1 + 3  # a once, b on its first try and both retries


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_real_external_kill_during_a_kernel_is_repeated(space, sig, faulty):
    """An operator's (or the OOM killer's) signal hits the runner while a kernel runs; measuring it
    again gives its real record."""
    (a,) = configs(space, 1, seed=2)
    with faulty({a: "hang-once"}, run_timeout=60.0) as m:
        killed = []
        worker = m.runner._worker  # noqa: SLF001 - the test plays the OOM killer
        worker.phase = ""  # forget the last call's phase

        def killer():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not killed:
                if worker.phase == "kernel" and worker.pid is not None:
                    os.kill(worker.pid, sig)
                    killed.append(sig)
                time.sleep(0.05)

        thread = threading.Thread(target=killer)
        thread.start()
        record = m.measure(space, [a])[0]
        thread.join()
    assert killed == [sig]
    assert record.status is Status.OK, record.error


def test_a_kernel_that_crashes_is_still_a_runtime_error(space, faulty):
    (a,) = configs(space, 1, seed=3)
    with faulty({a: "crash"}, infra_retries=2) as m:
        restarts = m.runner_restarts
        record = m.measure(space, [a])[0]
        assert record.status is Status.RUNTIME_ERROR and "SIGSEGV" in record.error
        assert m.runner_restarts - restarts == 1  # not retried: the kernel's own fault is final


def test_a_runner_that_dies_before_any_kernel_stops_the_batch(space, faulty):
    """A restart storm: the runner cannot even start (here: its environment lacks a module); after
    STORM_LIMIT kernels in a row the batch stops with one clear error, keeping what was recorded."""
    kernels = configs(space, 5, seed=4)
    seen = []
    with faulty({}, infra_retries=1) as m:
        worker = m.runner._worker  # noqa: SLF001 - a broken runner environment
        worker.close()
        worker.preload = ("tensorgym_no_such_module",)
        try:
            with pytest.raises(InfrastructureError, match="3 kernels in a row") as info:
                m.measure(space, kernels, on_record=seen.append)
        finally:
            worker.preload = ("tvm",)
    assert [r.status for r in seen] == [Status.INFRA_ERROR] * 3
    assert "exited with code 1" in seen[0].error and "tensorgym_no_such_module" in str(info.value)


class DyingRunner(Runner):
    """A runner whose process is killed (SIGKILL, outside the kernel) on every call."""

    def __init__(self):
        super().__init__(local_cpu())
        self.calls = 0

    def run(self, builder, config, artifact, *, check, timeout, fault=None, incumbent_s=None):
        self.calls += 1
        return Outcome("crash", error="worker process killed by signal SIGKILL", signal=signal.SIGKILL)


def test_a_runner_that_cannot_tell_phases_is_judged_by_the_signal(space):
    runner = DyingRunner()
    with Measurer(runner=runner, infra_retries=1) as m:
        record = m.measure(space, configs(space, 1, seed=5))[0]
    assert record.status is Status.INFRA_ERROR and runner.calls == 2


# -- the build directory --------------------------------------------------------------------------------------
def test_a_build_that_finds_the_disk_full_is_retried(space, faulty):
    a, b = configs(space, 2, seed=6)
    with faulty({a: "nospace-once", b: "nospace"}, infra_retries=1) as m:
        records = m.measure(space, [a, b])
    assert records[0].status is Status.OK
    assert records[1].status is Status.INFRA_ERROR and "No space left on device" in records[1].error


def test_a_full_build_directory_on_a_real_disk(space, tmp_path, monkeypatch):
    """The measurer's work directory and the compiler's temporary files on a full tmpfs: the builds
    fail with ENOSPC and become infra_error, never build_error; with space again they build."""
    with tmpfs(tmp_path / "mnt", "2m") as mnt:
        monkeypatch.setenv("TMPDIR", str(mnt))
        monkeypatch.setattr("tempfile.tempdir", str(mnt))
        kernels = configs(space, 2, seed=7)
        with Measurer(infra_retries=1) as m:
            filler = fill(mnt)
            records = m.measure(space, kernels)
            assert [r.status for r in records] == [Status.INFRA_ERROR] * 2, [r.error for r in records]
            assert all("No space left" in r.error or "no space left" in r.error for r in records)
            filler.unlink()
            assert all(r.status is Status.OK for r in m.measure(space, kernels))


# -- timeouts say the real limit ------------------------------------------------------------------------------
def test_a_build_timeout_reports_its_limit(tmp_path):
    workers = [Worker("sleeper", tmp_path, preload=())]
    (outcome,) = run_all(workers, [("time:sleep", (5,), {})], timeout=0.5)
    for w in workers:
        w.close()
    assert outcome.kind == "timeout" and "no answer within 0.5 s" in outcome.error


# -- the evaluator: infra_error is measured again -----------------------------------------------------------------
class FlakyMeasurer(SyntheticMeasurer):
    """Synthetic measurements, except that the configs in ``broken`` fail for the machine's reasons."""

    def __init__(self, broken=()):
        super().__init__()
        self.broken = set(broken)

    def measure_pairs(self, kernels, *, check=True, on_record=None, incumbents=None):
        good = [(s, c) for s, c in kernels if c not in self.broken]
        out = {r.config: r for r in super().measure_pairs(good, check=check)}
        records = []
        for space, config in kernels:
            record = out.get(config) or Record(space.workload.key, self.target.fingerprint, space.name, config,
                                               Status.INFRA_ERROR, error="run (machine): killed by signal SIGKILL")
            records.append(record)
            if on_record is not None:
                on_record(record)
        return records


def test_infra_errors_are_measured_again_and_replaced(space, tmp_path):
    a, b = configs(space, 2, seed=8)
    with Database(tmp_path / "r.db") as db:
        first = Evaluator(space, db, FlakyMeasurer(broken=[b])).evaluate([a, b])
        assert [r.status for r in first] == [Status.OK, Status.INFRA_ERROR]
        again = Evaluator(space, db, FlakyMeasurer()).evaluate([a, b])
        assert again[0] == first[0]  # the kernel's record is final
        assert again[1].status is Status.OK and again[1].id == first[1].id  # the machine's is replaced
        assert len(db) == 2


def test_a_final_record_is_never_replaced_by_an_infra_error(space, db):
    (a,) = configs(space, 1, seed=9)
    ok = Evaluator(space, db, FlakyMeasurer()).evaluate([a])[0]
    stored = db.commit(Record(ok.workload, ok.target, ok.space, a, Status.INFRA_ERROR, error="late"))
    assert stored == ok


# -- a full database disk -------------------------------------------------------------------------------------------
class FullAfter:
    """A connection proxy whose record inserts fail with SQLite's 'disk full' after ``n`` of them."""

    def __init__(self, conn, n):
        self.conn, self.n = conn, n

    def execute(self, sql, *args):
        if sql.startswith("INSERT INTO records"):
            if self.n <= 0:
                raise sqlite3.OperationalError("database or disk is full")
            self.n -= 1
        return self.conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.conn, name)


def test_a_full_disk_stops_the_batch_keeps_what_was_committed_and_resumes(space, tmp_path):
    kernels = configs(space, 5, seed=10)
    path = tmp_path / "r.db"
    with Database(path) as db:
        real = db._conn  # noqa: SLF001 - inject the error where SQLite would raise it
        db._conn = FullAfter(real, 2)  # noqa: SLF001
        measurer = SyntheticMeasurer()
        with pytest.raises(DatabaseWriteError, match="disk is full") as info:
            Evaluator(space, db, measurer).evaluate(kernels)
        assert str(path) in str(info.value) and "free" in str(info.value) and kernels[2].key in str(info.value)
        assert measurer.kernels_run == 3  # the batch stopped at the record that could not be stored
        db._conn = real  # noqa: SLF001 - space again
    with Database(path) as db:
        assert len(db) == 2
        evaluator = Evaluator(space, db, SyntheticMeasurer())
        assert [r.status for r in evaluator.evaluate(kernels)] == [Status.OK] * 5
        assert (evaluator.reused, evaluator.measured) == (2, 3)


def test_a_database_on_a_really_full_disk(space, tmp_path):
    """The database on a small tmpfs that fills up during a batch of real kernels."""
    kernels = configs(space, 6, seed=11)
    with tmpfs(tmp_path / "mnt", "1m") as mnt, Measurer() as measurer:
        path = mnt / "r.db"
        with Database(path) as db:
            evaluator = Evaluator(space, db, measurer)
            evaluator.evaluate(kernels[:1])
            filler = fill(mnt)
            with pytest.raises(DatabaseWriteError) as info:
                evaluator.evaluate(kernels[1:])
            message = str(info.value)
            assert str(path) in message and "free of" in message and "run the same command again" in message
            committed = evaluator.measured
        filler.unlink()
        with Database(path) as db:
            assert len(db) == committed >= 1
            evaluator = Evaluator(space, db, measurer)
            records = evaluator.evaluate(kernels)
            assert all(r.status is Status.OK for r in records), [r.error for r in records]
            assert evaluator.reused == committed and evaluator.measured == len(kernels) - committed
