"""Fault scenarios: what the database holds before a fault, after it, and after the run is repeated.

    python bench/bench_faults.py [--skip-mounts]

Each scenario measures a few real kernels of a small matmul (compiled and timed on this machine)
into a fresh database while something fails: a kernel that segfaults (the kernel's fault), the
runner killed from outside as the OOM killer would, a build directory that is full, a runner that
cannot start (a restart storm), the database's disk filling up mid-batch, Optuna's side storage
created by three processes at once, a database on a read-only mount. It prints, per config, the
stored status before, after the faulty run and after the same run is repeated with the machine
healthy again. The tmpfs scenarios need root (``--skip-mounts`` leaves them out).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # fakes.SyntheticMeasurer

from tensorgym.database import Database, DatabaseError, DatabaseWriteError  # noqa: E402
from tensorgym.evaluator import Evaluator  # noqa: E402
from tensorgym.measure import Measurer  # noqa: E402
from tensorgym.measure import measurer as measurer_module  # noqa: E402
from tensorgym.measure.faults import InfrastructureError  # noqa: E402
from tensorgym.spaces import TilesSpace  # noqa: E402
from tensorgym.target import local_cpu  # noqa: E402
from tensorgym.workloads import matmul  # noqa: E402

SPACE = TilesSpace(matmul(64, 48, 32), local_cpu())


def statuses(db: Database, configs) -> list[str]:
    out = []
    for config in configs:
        record = db.get(SPACE.workload.key, SPACE.target.fingerprint, SPACE.name, config)
        out.append("-" if record is None else record.status.value)
    return out


def report(name: str, configs, rows: list[tuple[str, list[str]]], note: str = "") -> None:
    print(f"\n== {name}")
    width = max(len(label) for label, _ in rows)
    print(f"   {'':<{width}}  " + "  ".join(f"config {i}".ljust(13) for i in range(len(configs))))
    for label, values in rows:
        print(f"   {label:<{width}}  " + "  ".join(v.ljust(13) for v in values))
    if note:
        print(textwrap.fill(note, 110, initial_indent="   ", subsequent_indent="   "))


def measure_with(db: Database, configs, measurer: Measurer) -> str:
    try:
        Evaluator(SPACE, db, measurer).evaluate(configs)
        return ""
    except (DatabaseWriteError, InfrastructureError) as exc:
        return f"{type(exc).__name__}: {exc}"


def scenario_faults(work: Path, name: str, faults_of, note: str, retries: int = 2, n: int = 3) -> None:
    configs = SPACE.sample_many(np.random.default_rng(hash(name) % 1000), n)
    with Database(work / f"{name}.db") as db, Measurer(faults=faults_of(configs), infra_retries=retries) as m:
        before = statuses(db, configs)
        error = measure_with(db, configs, m)
        after = statuses(db, configs)
        m.faults = {}
        again_error = measure_with(db, configs, m)
        again = statuses(db, configs)
        report(name, configs, [("before", before), ("after the faulty run", after), ("after a re-run", again)],
               note + (f" Raised: {error.splitlines()[0][:300]}" if error else "")
               + (f" Re-run raised: {again_error[:200]}" if again_error else "")
               + f" Runner restarts: {m.runner_restarts}.")


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (65536, 512):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * size)
    return filler


def scenario_full_build_dir(work: Path) -> None:
    configs = SPACE.sample_many(np.random.default_rng(7), 2)
    with tmpfs(work / "build-mnt", "2m") as mnt, Database(work / "full-build.db") as db:
        os.environ["TMPDIR"] = str(mnt)
        tempfile.tempdir = str(mnt)
        try:
            with Measurer(infra_retries=1) as m:
                before = statuses(db, configs)
                filler = fill(mnt)
                measure_with(db, configs, m)
                after = statuses(db, configs)
                error = db.get(SPACE.workload.key, SPACE.target.fingerprint, SPACE.name, configs[0]).error
                filler.unlink()
                measure_with(db, configs, m)
                again = statuses(db, configs)
        finally:
            os.environ.pop("TMPDIR", None)
            tempfile.tempdir = None
    report("a full build directory (tmpfs)", configs,
           [("before", before), ("after the faulty run", after), ("after a re-run", again)],
           f"The builds fail with ENOSPC: {error.splitlines()[0][:200]}")


def scenario_full_database_disk(work: Path) -> None:
    configs = SPACE.sample_many(np.random.default_rng(11), 4)
    with tmpfs(work / "db-mnt", "1m") as mnt, Measurer() as m:
        path = mnt / "r.db"
        with Database(path) as db:
            Evaluator(SPACE, db, m).evaluate(configs[:1])
            before = statuses(db, configs)
            filler = fill(mnt)
            error = measure_with(db, configs, m)
            after = statuses(db, configs)
        filler.unlink()
        with Database(path) as db:
            evaluator = Evaluator(SPACE, db, m)
            evaluator.evaluate(configs)
            again = statuses(db, configs)
    report("the database's disk fills up mid-batch (tmpfs)", configs,
           [("before", before), ("after the faulty run", after), ("after a re-run", again)],
           f"Raised: {error[:400]} The re-run reused {evaluator.reused} and measured {evaluator.measured}.")


def scenario_storm(work: Path) -> None:
    configs = SPACE.sample_many(np.random.default_rng(4), 5)
    with Database(work / "storm.db") as db, Measurer(infra_retries=1) as m:
        m.runner._worker.preload = ("tensorgym_no_such_module",)  # noqa: SLF001 - a broken runner environment
        before = statuses(db, configs)
        error = measure_with(db, configs, m)
        after = statuses(db, configs)
        m.runner._worker.preload = ("tvm",)  # noqa: SLF001
        measure_with(db, configs, m)
        again = statuses(db, configs)
    report("a runner that dies before every kernel (restart storm)", configs,
           [("before", before), ("after the faulty run", after), ("after a re-run", again)],
           f"Raised: {error[:400]}")


_OPTUNA = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import gymnasium as gym
import tensorgym
from fakes import SyntheticMeasurer
from tensorgym.agents.optuna_agent import OptunaAgent
db, seed, barrier, n = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
env = gym.make("tensorgym/Matmul-v0", M=48, N=64, K=32, db=db, measurer=SyntheticMeasurer())
(barrier / f"ready{{seed}}").touch()
while len(list(barrier.glob("ready*"))) < n:
    time.sleep(0.001)
OptunaAgent().tune(env, budget=6, seed=seed)
"""


def scenario_optuna(work: Path, rounds: int = 5, processes: int = 3) -> None:
    script = _OPTUNA.format(tests=str(Path(__file__).resolve().parents[1] / "tests"))
    failed = 0
    for attempt in range(rounds):
        barrier = work / f"barrier{attempt}"
        barrier.mkdir()
        procs = [subprocess.Popen([sys.executable, "-c", script, str(work / f"optuna{attempt}.db"), str(seed),
                                   str(barrier), str(processes)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for seed in range(processes)]
        failed += sum(p.wait(timeout=600) != 0 for p in procs)
    print(f"\n== {processes} processes starting the Optuna agent on one new database, {rounds} times: "
          f"{failed} of {rounds * processes} processes failed")


def scenario_read_only_mount(work: Path) -> None:
    from fakes import SyntheticMeasurer

    configs = SPACE.sample_many(np.random.default_rng(12), 2)
    with tmpfs(work / "ro-mnt", "4m") as mnt:
        path = mnt / "r.db"
        with Database(path) as db:
            Evaluator(SPACE, db, SyntheticMeasurer()).evaluate(configs)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        try:
            Database(path)
            writable = "opened (wrong)"
        except DatabaseError as exc:
            writable = str(exc)
        with Database(path, readonly=True) as db:
            shown = statuses(db, configs)
    report("a database on a read-only mount", configs, [("read-only open", shown)],
           f"Opening it for writing: {writable}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-mounts", action="store_true", help="leave out the tmpfs scenarios")
    args = parser.parse_args()
    measurer_module.INFRA_RETRY_DELAY_S = 0.0
    logging.getLogger("tensorgym").setLevel(logging.ERROR)  # the retries' warnings: the tables say it
    mounts = not args.skip_mounts and os.geteuid() == 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tensorgym-faults-") as tmp:
        work = Path(tmp)
        scenario_faults(work, "a kernel that segfaults", lambda c: {c[1]: "crash"},
                        "The kernel's own fault: final, never measured again.")
        scenario_faults(work, "the runner killed from outside (SIGKILL) every time", lambda c: {c[1]: "kill"},
                        "The machine's fault: tried 3 times, stored as infra_error, measured again by the re-run.")
        scenario_faults(work, "the runner killed from outside once", lambda c: {c[1]: "kill-once"},
                        "Retried in the same batch: the config gets its real record at once.")
        scenario_faults(work, "the build finds the disk full", lambda c: {c[0]: "nospace", c[2]: "nospace-once"},
                        "Injected ENOSPC in the builder: infra_error, or the real record after a retry.")
        scenario_storm(work)
        if mounts:
            scenario_full_build_dir(work)
            scenario_full_database_disk(work)
            scenario_read_only_mount(work)
        scenario_optuna(work)
    print(f"\n({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
