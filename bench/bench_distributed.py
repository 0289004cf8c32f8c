"""Benchmark of runs beyond one process: TVM RPC vs local, a Ray compare vs local, the record writer.

Prints:
1. **RPC overhead**: wall seconds per freshly measured trial of the same configs,
   measured by a local Measurer and through TVM RPC on this same machine (a
   tracker and a ``tensorgym rpc-server`` using every core, so the device and
   its fingerprint are this machine's), in alternating batches; the ratio RPC /
   local, and where the difference goes (the runner's seconds per kernel);
2. **Ray compare vs local**: wall seconds of the same ``compare`` (agents x envs
   x seeds) run in this process and on a 2-node Ray cluster on this machine's
   loopback (both nodes share these cores: expect no speed-up; the point is
   that it is correct), and the ratio;
3. **the record writer**: commits per second through the writer actor, one
   record per call as a run commits them (from 1 node, and from 2 nodes at
   once), a batch of records per call, and SQLite's own commit rate in one
   process (``synchronous=FULL``) as the bound. These figures size the
   100-node design in docs/distributed.md.

Run it on an otherwise idle machine::

    python bench/bench_distributed.py                       # the full figures (about 15-25 minutes)
    python bench/bench_distributed.py --trials 4 --budget 2 --records 50 --compare-seeds 1   # a smoke test

Needs Ray (``pip install 'tensorgym[ray]'``) for parts 2 and 3; ``--skip-ray`` leaves them out.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import tensorgym  # noqa: F401  (registers the envs)
from tensorgym.config import Config
from tensorgym.database import Database
from tensorgym.measure import Measurer
from tensorgym.measure.rpc_local import LoopbackDevice
from tensorgym.record import Record, Status
from tensorgym.spaces import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.workloads import matmul


# -- 1. RPC vs local ---------------------------------------------------------------------------------
def bench_rpc(workload_shape: tuple[int, int, int], trials: int, batch: int) -> dict:
    workload = matmul(*workload_shape)
    local = local_cpu()
    with LoopbackDevice(key="bench") as device:  # every core: the same device as this process's
        remote = device.target()
        local_space, remote_space = TilesSpace(workload, local), TilesSpace(workload, remote)
        configs = local_space.sample_many(np.random.default_rng(0), trials)
        seconds = {"local": [], "rpc": []}
        run_s = {"local": [], "rpc": []}
        ok = {"local": 0, "rpc": 0}
        with Measurer(local) as on_local, Measurer(remote) as on_rpc:
            warm = local_space.sample_many(np.random.default_rng(99), 1)  # process start-up is not per trial
            on_local.measure(local_space, warm)
            on_rpc.measure(remote_space, warm)
            for start in range(0, trials, batch):
                chunk = configs[start:start + batch]
                order = [("local", on_local, local_space), ("rpc", on_rpc, remote_space)]
                for name, measurer, space in order if (start // batch) % 2 == 0 else order[::-1]:
                    t0 = time.perf_counter()
                    records = measurer.measure(space, chunk)
                    seconds[name].append((time.perf_counter() - t0) / len(chunk))
                    run_s[name] += [r.run_s for r in records]
                    ok[name] += sum(r.ok for r in records)
    per_trial = {name: statistics.mean(values) for name, values in seconds.items()}
    return {"workload": workload.label, "trials": trials, "batch": batch,
            "same_fingerprint": remote.fingerprint == local.fingerprint,
            "local_s_per_trial": per_trial["local"], "rpc_s_per_trial": per_trial["rpc"],
            "ratio": per_trial["rpc"] / per_trial["local"],
            "local_run_s_median": statistics.median(run_s["local"]),
            "rpc_run_s_median": statistics.median(run_s["rpc"]), "ok": ok}


# -- 2. Ray compare vs local ---------------------------------------------------------------------------
def bench_compare(envs: list[str], agents: list[str], seeds: int, budget: int, work: Path) -> dict:
    from tensorgym.baselines.compare import compare
    from tensorgym.cluster.local import LocalRayCluster

    settings = dict(agents=agents, seeds=seeds, budget=budget, vendor=False, remeasure=1, progress=False)
    t0 = time.perf_counter()
    local = compare(envs, db=work / "local.db", out_dir=work / "local", **settings)
    local_s = time.perf_counter() - t0
    with LocalRayCluster(nodes=2) as cluster:
        t0 = time.perf_counter()
        on_ray = compare(envs, db=work / "ray.db", out_dir=work / "ray", ray=cluster.address, **settings)
        ray_s = time.perf_counter() - t0
    with Database(work / "local.db") as a, Database(work / "ray.db") as b:
        rows = (a.count(), b.count())
    return {"envs": envs, "agents": agents, "seeds": seeds, "budget": budget, "runs": len(envs) * len(agents) * seeds,
            "local_s": local_s, "ray_2_nodes_s": ray_s, "ratio": ray_s / local_s, "records": rows,
            "errors": (len(local.errors), len(on_ray.errors)),
            "retried_runs": sum(len(r["attempts"]) > 1 for r in on_ray.cluster["writer"]["runs"].values())}


# -- 3. the writer ------------------------------------------------------------------------------------------
def _commit_one_by_one(db, first: int, n: int) -> float:
    """A job: commit ``n`` records one at a time, as a run does; returns records per second."""
    t0 = time.perf_counter()
    for i in range(first, first + n):
        db.commit(_record(i))
    return n / (time.perf_counter() - t0)


def _commit_in_flight(db, first: int, n: int, window: int) -> float:
    """A job: ``window`` writer calls in flight at a time (pipelined, still one commit each)."""
    import ray

    t0 = time.perf_counter()
    for start in range(first, first + n, window):
        ray.get([db.writer.commit.remote(db.tag, _record(i)) for i in range(start, min(start + window, first + n))])
    return n / (time.perf_counter() - t0)


def _record(i: int) -> Record:
    return Record("bench-workload", "bench-target", "bench", Config({"i": i}), Status.OK, latency_s=1e-3,
                  latency_cv=0.01, samples=(1e-3,) * 5, number=10, gflops=100.0, build_s=0.2, run_s=0.3, wall_s=0.4,
                  created=time.time())


def _group_commit_rate(path: Path, records: int, group: int) -> float:
    """Records per second when ``group`` records share one transaction (the change the design proposes),
    on a tensorgym database file, with the durability of ``Database`` (WAL, synchronous=FULL)."""
    Database(path).close()  # the schema
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    rows = [("bench-workload", "bench-target", "bench", Config({"i": i}).key, "ok", 1e-3, 0.01, "[0.001]", 10, 100.0,
             0.2, 0.3, 0.4, "", time.time()) for i in range(records)]
    t0 = time.perf_counter()
    for start in range(0, records, group):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT OR IGNORE INTO records (workload, target, space, config, status, latency_s, "
                         "latency_cv, samples, number, gflops, build_s, run_s, wall_s, error, created) VALUES "
                         "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows[start:start + group])
        conn.execute("COMMIT")
    rate = records / (time.perf_counter() - t0)
    conn.close()
    return rate


def bench_writer(records: int, work: Path) -> dict:
    import ray

    from tensorgym.cluster import MeasuringCluster
    from tensorgym.cluster.local import LocalRayCluster

    with Database(work / "plain.db") as db:
        t0 = time.perf_counter()
        for i in range(records):
            db.commit(_record(i))
        in_process = records / (time.perf_counter() - t0)
    grouped = _group_commit_rate(work / "grouped.db", records, 50)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the jobs below are not installed
    with LocalRayCluster(nodes=2) as cluster, MeasuringCluster(cluster.address, work / "writer.db") as on_ray:
        (_, one), = on_ray.as_completed([on_ray.submit(_commit_one_by_one, 0, records, tag="one")])
        both = [o for _, o in on_ray.as_completed([on_ray.submit(_commit_one_by_one, (k + 1) * records, records,
                                                                 tag=f"node{k}") for k in range(2)])]
        (_, flight), = on_ray.as_completed([on_ray.submit(_commit_in_flight, 10 * records, records, 50,
                                                          tag="in-flight")])
        stats = on_ray.stats()
    for outcome in (one, flight, *both):
        if not outcome.ok:
            raise RuntimeError(outcome.error)
    return {"records": records, "sqlite_in_process_per_s": in_process, "sqlite_groups_of_50_per_s": grouped,
            "writer_one_node_per_s": one.value, "writer_two_nodes_per_s": sum(o.value for o in both),
            "writer_50_in_flight_per_s": flight.value,
            "writer_mean_commit_ms": 1e3 * stats["commit_seconds"] / max(1, stats["commits"]), "rows": stats["rows"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=48, help="fresh trials per side for RPC vs local (default: 48)")
    ap.add_argument("--batch", type=int, default=8, help="configs per measured batch (default: 8)")
    ap.add_argument("--shape", default="256,256,256", help="matmul M,N,K for RPC vs local (default: 256,256,256)")
    ap.add_argument("--envs", default="Matmul-BERT-M3-v0,Conv2d-ResNet-R5-v0", help="compare's envs")
    ap.add_argument("--agents", default="random,optuna", help="compare's agents")
    ap.add_argument("--compare-seeds", type=int, default=2, help="compare's seeds (default: 2)")
    ap.add_argument("--budget", type=int, default=16, help="compare's budget per run (default: 16)")
    ap.add_argument("--records", type=int, default=2000, help="records per writer measurement (default: 2000)")
    ap.add_argument("--skip-rpc", action="store_true")
    ap.add_argument("--skip-compare", action="store_true", help="leave out the Ray compare")
    ap.add_argument("--skip-ray", action="store_true", help="leave out the Ray compare and the writer")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args()
    figures: dict = {"machine": local_cpu().label}
    with tempfile.TemporaryDirectory(prefix="bench-distributed-") as tmp:
        work = Path(tmp)
        if not args.skip_rpc:
            shape = tuple(int(x) for x in args.shape.split(","))
            r = figures["rpc"] = bench_rpc(shape, args.trials, args.batch)
            print(f"1. RPC vs local, {r['workload']}, {r['trials']} fresh trials each (batches of {r['batch']}, "
                  f"alternating; device fingerprint {'=' if r['same_fingerprint'] else '!='} this machine's):")
            print(f"   local {r['local_s_per_trial']:.3f} s/trial, RPC {r['rpc_s_per_trial']:.3f} s/trial: "
                  f"ratio {r['ratio']:.2f}; runner median {r['local_run_s_median']:.3f} s vs "
                  f"{r['rpc_run_s_median']:.3f} s per kernel; ok {r['ok']['local']}/{r['ok']['rpc']}", flush=True)
        if not args.skip_ray and not args.skip_compare:
            gym.logger.min_level = 40
            c = figures["compare"] = bench_compare(args.envs.split(","), args.agents.split(","), args.compare_seeds,
                                                   args.budget, work)
            print(f"2. compare of {c['runs']} runs ({', '.join(c['agents'])} x {', '.join(c['envs'])} x "
                  f"{c['seeds']} seeds, budget {c['budget']}): local {c['local_s']:.1f} s, 2-node loopback Ray "
                  f"{c['ray_2_nodes_s']:.1f} s: ratio {c['ratio']:.2f} (records {c['records'][0]} / "
                  f"{c['records'][1]}, failed runs {c['errors'][0]} / {c['errors'][1]})", flush=True)
        if not args.skip_ray:
            w = figures["writer"] = bench_writer(args.records, work)
            print(f"3. record writer, {w['records']} records each: through the writer actor, one commit per "
                  f"record as runs commit: {w['writer_one_node_per_s']:.0f} commits/s from 1 node, "
                  f"{w['writer_two_nodes_per_s']:.0f}/s from 2 nodes at once, {w['writer_50_in_flight_per_s']:.0f}/s "
                  f"with 50 calls in flight ({w['writer_mean_commit_ms']:.2f} ms per commit inside the writer); "
                  f"SQLite alone in one process: {w['sqlite_in_process_per_s']:.0f} commits/s one by one, "
                  f"{w['sqlite_groups_of_50_per_s']:.0f} records/s in transactions of 50", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1, default=str))


if __name__ == "__main__":
    main()
