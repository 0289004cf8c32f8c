"""The Optuna study storage is created safely by processes that open the same new storage at the same instant.

Optuna makes a new SQLite storage's tables, its version row and its alembic version row in separate
transactions; processes doing it together failed with ``UNIQUE constraint failed:
alembic_version.version_num`` (or ``table ... already exists``). :func:`open_storage` creates it under
an exclusive file lock and retries a creation that collided anyway. No kernel is measured here: the
processes call the storage-creation function directly.
"""

from __future__ import annotations

import multiprocessing as mp
import threading

import pytest

PROCESSES = 4
ROUNDS = 4


def _create(directory: str, rounds: int, lock: bool, barrier, results) -> None:
    """One process: in each round, wait for the others, then open round's new storage at the same instant."""
    from tensorgym.agents.optuna_agent import open_storage

    for i in range(rounds):
        url = f"sqlite:///{directory}/round{i}.db.optuna.db"
        barrier.wait(timeout=120)
        try:
            storage = open_storage(url, lock=lock)
            storage.engine.dispose()
            results.put((i, "ok"))
        except Exception as exc:  # noqa: BLE001 - reported to the test
            results.put((i, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))


def _run_together(directory, lock: bool) -> list[tuple[int, str]]:
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_create, args=(str(directory), ROUNDS, lock, barrier, results))
             for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=300) for _ in range(PROCESSES * ROUNDS)]
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    return outcomes


@pytest.mark.parametrize("lock", [True, False], ids=["locked", "lock-ineffective"])
def test_processes_creating_one_new_storage_at_once_all_succeed(tmp_path, lock):
    """``lock=False`` is a file system whose locks do not reach the other processes: the retries alone
    must then complete the storage for everyone."""
    import optuna

    outcomes = _run_together(tmp_path, lock)
    failed = [o for o in outcomes if o[1] != "ok"]
    assert not failed, failed
    for i in range(ROUNDS):  # one complete storage per round, usable by a later process
        storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/round{i}.db.optuna.db")
        assert storage.get_all_studies() == []
        storage.engine.dispose()


def test_the_creation_lock_is_reentrant_in_a_thread_and_exclusive_across_threads(tmp_path):
    from tensorgym.agents.optuna_agent import creation_lock

    url = f"sqlite:///{tmp_path}/s.db.optuna.db"
    inside = threading.Event()
    with creation_lock(url), creation_lock(url):  # the agent's search holds it around open_storage
        other = threading.Thread(target=lambda: (creation_lock(url).__enter__(), inside.set()), daemon=True)
        other.start()
        assert not inside.wait(0.3)  # another thread waits for the lock
    assert inside.wait(10)
