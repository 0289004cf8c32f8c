"""Kernels timed on a remote device through TVM RPC: a tracker and a ``tensorgym rpc-server`` on 127.0.0.1.

The server is pinned to one core, which makes it a device of its own (one core,
its own fingerprint) on a machine with more. Every test is bounded by a
watchdog, and the fixtures stop every process they start.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import threading
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest

from fakes import WrongMatmulSpace
from tensorgym.agents import make_agent
from tensorgym.database import Database
from tensorgym.envs import tuning_env
from tensorgym.measure import Measurer, RPCRunner
from tensorgym.measure.rpc import DeviceUnavailable, remote_target, request_session
from tensorgym.measure.rpc_local import LoopbackDevice
from tensorgym.record import Status
from tensorgym.spaces import TilesSpace
from tensorgym.target import RemoteDevice, TargetError, local_cpu
from tensorgym.workloads import matmul


@pytest.fixture(autouse=True)
def watchdog():
    faulthandler.dump_traceback_later(240, exit=True)  # a blocked RPC call holds the main thread in C
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def device(tmp_path_factory):
    one_core = {min(os.sched_getaffinity(0))}  # pinned to one core: a device of its own on a larger machine
    with LoopbackDevice(key="tg-test", cores=one_core, log_dir=tmp_path_factory.mktemp("rpc")) as loopback:
        yield loopback


@pytest.fixture(scope="module")
def target(device):
    return device.target(request_timeout=20.0)


def test_a_tune_over_rpc_is_keyed_by_the_devices_fingerprint(device, target, tmp_path):
    assert target.remote == RemoteDevice("127.0.0.1", device.tracker_port, "tg-test", 20.0)
    assert target.fingerprint == device.fingerprint  # read on the device, by the server itself
    assert target.num_cores == 1 and target.system_mcpu
    if local_cpu().num_cores > 1:
        assert target.fingerprint != local_cpu().fingerprint  # not this host's
    env = gym.make("tensorgym/Matmul-v0", M=32, N=32, K=32, target=target, db=tmp_path / "r.db")
    try:
        assert isinstance(tuning_env(env).evaluator.measurer.runner, RPCRunner)
        result = make_agent("random").tune(env, budget=4, seed=0)
    finally:
        env.close()
    assert len(result.trials) == 4 and result.measured == 4 and result.target == device.fingerprint
    with Database(tmp_path / "r.db") as db:
        records = db.records()
    assert len(records) == 4
    assert all(r.status is Status.OK and r.gflops > 0 and (len(r.samples) >= 3 or r.short) for r in records), records
    assert {r.target for r in records} == {device.fingerprint}


def test_wrong_crashing_and_hanging_kernels_become_records(target):
    space = TilesSpace(matmul(32, 32, 16), target)
    a, b, c, d = space.sample_many(np.random.default_rng(3), 4)
    with Measurer(target, faults={b: "crash", c: "hang"}, run_timeout=3.0) as measurer:
        records = measurer.measure(space, [a, b, c, d])
        assert [r.status for r in records] == [Status.OK, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.OK], records
        assert "kShutdown" in records[1].error and "session's 3.0 s" in records[2].error
        wrong = WrongMatmulSpace(space.workload, target)
        (record,) = measurer.measure(wrong, [a])
        assert record.status is Status.WRONG_RESULT and "relative error" in record.error


@pytest.mark.slow
def test_killing_the_server_mid_batch_gives_error_records_then_the_next_batch_works(device, target):
    space = TilesSpace(matmul(48, 32, 32), target)
    configs = space.sample_many(np.random.default_rng(4), 4)
    killer = None

    def kill_after_first(record):
        nonlocal killer
        if killer is None:  # while the second kernel is on the device
            killer = threading.Timer(0.3, device.kill_server)
            killer.start()

    try:
        with Measurer(target, run_timeout=10.0) as measurer:
            records = measurer.measure(space, configs, on_record=kill_after_first)
            killer.join()
            assert records[0].status is Status.OK
            # the device went away: the machine's fault, not the kernels' (measured again next time)
            assert all(r.status is Status.INFRA_ERROR and "rpc:" in r.error for r in records[1:]), records
            device.start_server()
            again = measurer.measure(space, configs[1:])
            assert all(r.status is Status.OK for r in again), [r.error for r in again]
    finally:
        if device.server is None:
            device.start_server()


@pytest.mark.slow
def test_stopping_the_rpc_server_leaves_no_process(device, target):
    server = psutil.Process(device.server.pid)
    session = request_session(target.remote, session_timeout=60)  # a session: one forked child
    try:
        family = [server, *server.children(recursive=True)]
        assert len(family) >= 2
        os.kill(server.pid, signal.SIGTERM)  # the server only, not its group: it must clean up itself
        gone, alive = psutil.wait_procs(family, timeout=15)
        assert not alive, alive
    finally:
        del session
        device.server.wait()
        device.start_server()
    assert device.server_registered()


@pytest.mark.slow
def test_tune_on_the_command_line_times_on_the_device(device, tmp_path, capsys):
    from tensorgym.cli import main

    db = tmp_path / "cli.db"
    assert main(["tune", "tensorgym/Matmul-v0", "--shape", "M=32,N=16,K=16", "--budget", "2", "--db", str(db),
                 "--rpc", f"{device.tracker_address}/tg-test", "-q"]) == 0
    out, err = capsys.readouterr()
    assert f"via rpc {device.tracker_address}/tg-test" in err and "no vendor reference" in out
    with Database(db) as database:
        assert {(r.target, r.status) for r in database.records()} == {(device.fingerprint, Status.OK)}
    assert main(["rpc-server", "--tracker", "no-port", "--key", "k"]) == 2
    assert "--tracker is HOST:PORT" in capsys.readouterr().err


def test_no_server_of_the_key_is_a_clear_error(device):
    with pytest.raises(DeviceUnavailable, match="no device server with key 'nobody'"):
        remote_target(device.tracker_address, "nobody", request_timeout=5)
    with pytest.raises(TargetError, match="TRACKER_HOST:PORT/KEY"):
        RemoteDevice.parse("127.0.0.1/zen5")


def test_records_of_a_dead_device_are_errors_not_exceptions(device, target, tmp_path):
    """A device whose server is not registered: every kernel is an infra_error with the reason (it is measured
    again once the device is back), quickly."""
    from dataclasses import replace

    ghost = replace(target, remote=replace(target.remote, key="ghost"))
    space = TilesSpace(matmul(16, 16, 16), ghost)
    with Measurer(ghost) as measurer:
        t0 = time.monotonic()
        records = measurer.measure(space, space.sample_many(np.random.default_rng(5), 2))
    assert all(r.status is Status.INFRA_ERROR and "no device server with key 'ghost'" in r.error for r in records)
    assert time.monotonic() - t0 < 60


@pytest.mark.slow
def test_a_compare_over_rpc_times_on_the_device_and_leaves_the_vendors_out(device, target, tmp_path):
    from tensorgym.baselines.compare import compare

    board = compare(["tensorgym/Matmul-v0"], ["random"], budget=2, seeds=1, db=tmp_path / "r.db",
                    out_dir=tmp_path / "out", shape={"M": 32, "N": 32, "K": 16}, progress=False, remeasure=1,
                    target=target)
    (result,) = board.results[("tensorgym/Matmul-v0[M=32,N=32,K=16]", "random")]
    assert result.target == device.fingerprint and board.vendor == {} and not board.errors
    assert len(result.extra["remeasured_samples"]) == 1  # the winner was re-timed on the device too
    with Database(tmp_path / "r.db") as db:
        assert {r.target for r in db.records()} == {device.fingerprint}
