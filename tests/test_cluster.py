"""Runs on a Ray cluster: a 2-node cluster on this machine's loopback (127.0.0.2, 127.0.0.3).

The fast test checks the machinery with jobs that commit synthetic records
(no kernels): one job per node at a time, every record in the one database,
what a job raises comes back as its outcome. The slow one runs a real
``compare`` on the cluster, kills a worker in the middle of a run, and checks
the result against the same compare run locally. Every test is bounded by a
watchdog; the cluster fixture stops every process it started.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time

import gymnasium as gym
import pytest

ray = pytest.importorskip("ray")

from tensorgym.baselines.compare import compare  # noqa: E402
from tensorgym.baselines.render import text_table  # noqa: E402
from tensorgym.cluster import ClusterError, MeasuringCluster  # noqa: E402
from tensorgym.cluster.local import LocalRayCluster, processes_mentioning  # noqa: E402
from tensorgym.cluster.runs import WRITER_PREFIX  # noqa: E402
from tensorgym.config import Config  # noqa: E402
from tensorgym.database import Database  # noqa: E402
from tensorgym.record import Record, Status  # noqa: E402
from tensorgym.workloads import matmul  # noqa: E402

# The jobs below are defined here, not in an installed module: Ray ships them by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

ENVS = ("tensorgym-test/RayMM0-v0", "tensorgym-test/RayMM1-v0")
for _env_id, _shape in zip(ENVS, ((32, 32, 32), (48, 32, 16))):
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point="tensorgym.envs.registration:make_env",
                     kwargs={"workload": matmul(*_shape, name=_env_id.split("/")[1])})


@pytest.fixture(autouse=True)
def watchdog():
    faulthandler.dump_traceback_later(900, exit=True)  # a blocked ray.get holds the main thread in C
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def cluster():
    local = LocalRayCluster(nodes=2).start()
    root = str(local.root)
    try:
        ray.init(address=local.address, _node_ip_address=local.ip(0), log_to_driver=False)
        yield local
    finally:
        ray.shutdown()
        local.stop()
    assert processes_mentioning(root) == []


def _synthetic_job(db, job: int, n: int, seconds: float) -> dict:
    """Commit ``n`` records of made-up kernels (or find them), ``seconds`` apart; report where and when."""
    start, found = time.time(), 0
    for i in range(n):
        config = Config({"job": job, "i": i})
        if db.get("w", "t", "synthetic", config) is not None:
            found += 1
            continue
        db.commit(Record("w", "t", "synthetic", config, Status.OK, latency_s=1e-3, gflops=1.0 + i,
                         created=time.time()))
        time.sleep(seconds)
    return {"node": ray.get_runtime_context().get_node_id(), "start": start, "end": time.time(), "found": found}


def _failing_job(db) -> None:
    raise ValueError("a bad argument")


def test_jobs_run_one_per_node_and_commit_every_record_to_the_one_database(cluster, tmp_path):
    path = tmp_path / "records.db"
    with MeasuringCluster(cluster.address, path) as on_ray:
        jobs = {on_ray.submit(_synthetic_job, j, 3, 0.2, tag=f"job{j}"): j for j in range(4)}
        jobs[on_ray.submit(_failing_job, tag="failing")] = "failing"
        outcomes = {jobs[handle]: outcome for handle, outcome in on_ray.as_completed(list(jobs), timeout=300)}
        assert not outcomes["failing"].ok and outcomes["failing"].error == "ValueError: a bad argument"
        spans = [outcomes[j].value for j in range(4)]
        assert all(outcomes[j].ok for j in range(4)), [outcomes[j].error for j in range(4)]
        assert len({s["node"] for s in spans}) == 2  # spread over both nodes ...
        for node in {s["node"] for s in spans}:  # ... one at a time on each
            mine = sorted((s["start"], s["end"]) for s in spans if s["node"] == node)
            assert all(later[0] >= earlier[1] for earlier, later in zip(mine, mine[1:])), mine
        # A run done again (a resumed or retried run) finds every record it made: nothing is measured twice.
        (_, again), = on_ray.as_completed([on_ray.submit(_synthetic_job, 0, 3, 0.2, tag="job0")])
        assert again.value["found"] == 3
        stats = on_ray.stats()
    assert stats["commits"] == 12 and stats["rows"] == 12 and stats["duplicates"] == 0
    assert all(run["repeats"] == 0 for run in stats["runs"].values())
    with Database(path) as db:  # the user's file, written by the writer alone
        assert db.count() == 12 and {r.config["job"] for r in db.records()} == {0, 1, 2, 3}


def test_a_cluster_without_measuring_nodes_is_refused(tmp_path, monkeypatch, cluster):
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    with pytest.raises(ClusterError, match="no measuring node"):
        MeasuringCluster(cluster.address, tmp_path / "r.db").start()


def _kill_a_worker_mid_run(budget: int, killed: dict, stop: threading.Event) -> None:
    """Find the record writer of the running compare, and SIGKILL the worker of a run that has committed
    some but not all of its records."""
    while not stop.is_set():
        names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                 if a["name"].startswith(WRITER_PREFIX)]
        if names:
            stats = ray.get(ray.get_actor(names[0]).stats.remote(), timeout=60)
            for tag, run in stats["runs"].items():
                if " seed " in tag and len(run["attempts"]) == 1 and 1 <= run["records"] < budget:
                    pid = run["attempts"][0]["pid"]
                    os.kill(pid, signal.SIGKILL)
                    killed.update(tag=tag, pid=pid, records=run["records"])
                    return
        time.sleep(0.2)


@pytest.mark.slow
def test_compare_on_two_nodes_survives_a_killed_worker_and_matches_a_local_run(cluster, tmp_path):
    budget, settings = 4, dict(agents=["random", "optuna"], seeds=2, vendor=False, remeasure=1, progress=False)
    killed, stop = {}, threading.Event()
    killer = threading.Thread(target=_kill_a_worker_mid_run, args=(budget, killed, stop), daemon=True)
    killer.start()
    try:
        board = compare(list(ENVS), budget=budget, db=tmp_path / "ray.db", out_dir=tmp_path / "ray",
                        ray=cluster.address, **settings)
    finally:
        stop.set()
        killer.join(60)
    assert killed, "no run was caught in the middle"
    assert not board.errors
    runs = board.cluster["writer"]["runs"]
    assert all(run["repeats"] == 0 for run in runs.values())  # nothing measured twice, retried run included
    assert len(runs[killed["tag"]]["attempts"]) == 2
    env_id, agent, _, seed = killed["tag"].split()
    (retried,) = [r for r in board.results[(env_id, agent)] if r.seed == int(seed)]
    assert retried.reused >= killed["records"]  # the records of the killed attempt were found, not re-measured
    # Every record lands once: the database holds exactly the configs the runs' trials name.
    with Database(tmp_path / "ray.db") as db:
        stored = {(r.workload, r.space, r.config.key) for r in db.records()}
    tried = {(r.workload_key, r.space, t.config.key) for results in board.results.values() for r in results
             for t in r.trials}
    assert stored == tried
    for results in board.results.values():
        assert len(results) == 2 and all(len(r.trials) == budget for r in results)
        assert all("remeasured_samples" in r.extra for r in results if r.best_config is not None)  # re-timed

    local = compare(list(ENVS), budget=budget, db=tmp_path / "local.db", out_dir=tmp_path / "local", **settings)
    assert local.metric_names() == board.metric_names()
    assert [(r["env"], r["agent"], r["seeds"]) for r in local.rows()] == \
        [(r["env"], r["agent"], r["seeds"]) for r in board.rows()]
    assert len(text_table(local).splitlines()) == len(text_table(board).splitlines())
    files = [{p.relative_to(out).as_posix() for p in out.rglob("*")} for out in (tmp_path / "local", tmp_path / "ray")]
    assert files[0] == files[1]
    ray_json = json.loads((tmp_path / "ray" / "compare.json").read_text())
    local_json = json.loads((tmp_path / "local" / "compare.json").read_text())
    assert set(ray_json) - set(local_json) == {"cluster"}


@pytest.mark.slow
def test_nodes_build_and_a_device_server_times(cluster, tmp_path):
    """--ray with --rpc: the runs are spread over the nodes, every kernel is timed on the one remote device."""
    from tensorgym.measure.rpc_local import LoopbackDevice

    with LoopbackDevice(key="ray-rpc", cores={0}) as device:
        board = compare([ENVS[0]], ["random"], budget=2, seeds=2, db=tmp_path / "r.db", out_dir=tmp_path / "out",
                        vendor=True, remeasure=1, progress=False, ray=cluster.address, target=device.target())
    assert not board.errors and board.vendor == {}  # the vendor libraries would run on the nodes, not the device
    assert {r.target for r in board.results[(ENVS[0], "random")]} == {device.fingerprint}
    with Database(tmp_path / "r.db") as db:
        records = db.records()
    tried = {t.config.key for r in board.results[(ENVS[0], "random")] for t in r.trials}
    assert len(records) == len(tried) and all(r.ok and r.target == device.fingerprint for r in records)
