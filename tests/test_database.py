import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tensorgym.database import Database, DatabaseError
from tensorgym.record import Record, Status
from tensorgym.spaces import Config


def make_record(i: int, gflops: float = 10.0, status: Status = Status.OK) -> Record:
    return Record("matmul(M=8,N=8,K=8,dtype=float32)", "fp", "tiles", Config({"a": i}), status,
                  latency_s=1e-6, latency_cv=0.01, samples=(1e-6, 1.1e-6), number=3, gflops=gflops,
                  build_s=0.1, run_s=0.2, wall_s=0.25)


def test_commit_then_get_round_trips(db):
    stored = db.commit(make_record(1))
    assert stored.id is not None
    again = db.get(stored.workload, "fp", "tiles", Config({"a": 1}))
    assert again == stored and again.samples == (1e-6, 1.1e-6) and again.wall_s == 0.25


def test_records_survive_reopening(tmp_path):
    path = tmp_path / "r.db"
    with Database(path) as db:
        for i in range(5):
            db.commit(make_record(i, gflops=float(i)))
    with Database(path) as db:
        assert len(db) == 5
        assert [r.config["a"] for r in db.best("matmul(M=8,N=8,K=8,dtype=float32)", k=2)] == [4, 3]


def test_first_commit_wins(db):
    first = db.commit(make_record(1, gflops=10.0))
    second = db.commit(make_record(1, gflops=99.0))
    assert second == first and second.gflops == 10.0 and len(db) == 1


def test_failed_records_are_kept_but_never_best(db):
    db.commit(make_record(1, status=Status.TIMEOUT, gflops=None))
    db.commit(make_record(2, gflops=5.0))
    assert len(db.records(status=Status.TIMEOUT)) == 1
    assert db.best("matmul(M=8,N=8,K=8,dtype=float32)")[0].config == Config({"a": 2})


def test_two_processes_writing_the_same_file(tmp_path):
    path = tmp_path / "shared.db"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path.parent)!r})
        from tensorgym.database import Database
        from tensorgym.record import Record, Status
        from tensorgym.spaces import Config
        offset = int(sys.argv[1])
        with Database({str(path)!r}) as db:
            for i in range(200):
                # configs 100..199 of each writer collide with the other writer's
                db.commit(Record("w", "fp", "tiles", Config({{"a": i + offset}}), Status.OK, gflops=float(offset)))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(off)]) for off in (0, 100)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with Database(path) as db:
        assert len(db) == 300
        assert sorted(r.config["a"] for r in db.records()) == list(range(300))


def test_not_a_database_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(DatabaseError, match="cannot use"):
        Database(bad)


def test_processes_creating_the_same_new_file_at_once(tmp_path):
    # Start the openers at one instant (after their imports): the moment a new file is switched
    # to WAL and given its tables is when two processes collide.
    script = textwrap.dedent("""
        import sys, time
        from tensorgym.database import Database
        start = float(sys.argv[2])
        while time.time() < start:
            pass
        Database(sys.argv[1]).close()
    """)
    for attempt in range(3):
        path = tmp_path / f"new{attempt}.db"
        start = time.time() + 3.0
        procs = [subprocess.Popen([sys.executable, "-c", script, str(path), str(start)], stderr=subprocess.PIPE,
                                  text=True) for _ in range(3)]
        errors = [p.communicate(timeout=120)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], errors


def test_home_relative_paths_are_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with Database("~/sub/records.db") as db:
        assert db.path == str(tmp_path / "sub" / "records.db")
    assert (tmp_path / "sub" / "records.db").exists() and not Path("~").exists()


def test_one_default_database_for_python_and_the_command_line(tmp_path, monkeypatch):
    from tensorgym.database import default_path

    monkeypatch.delenv("TENSORGYM_DB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_path() == tmp_path / ".cache" / "tensorgym" / "records.db"
    monkeypatch.setenv("TENSORGYM_DB", str(tmp_path / "mine.db"))
    assert default_path() == tmp_path / "mine.db"


def test_a_version_1_file_is_migrated_and_keeps_its_records(tmp_path):
    import sqlite3

    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, workload TEXT NOT NULL, target TEXT NOT NULL,
            space TEXT NOT NULL, config TEXT NOT NULL, status TEXT NOT NULL, latency_s REAL, latency_cv REAL,
            samples TEXT NOT NULL DEFAULT '[]', number INTEGER NOT NULL DEFAULT 0, gflops REAL,
            build_s REAL NOT NULL DEFAULT 0, run_s REAL NOT NULL DEFAULT 0, wall_s REAL NOT NULL DEFAULT 0,
            error TEXT NOT NULL DEFAULT '', created REAL NOT NULL, UNIQUE (workload, target, space, config));
        INSERT INTO records (workload, target, space, config, status, latency_s, gflops, wall_s, created)
            VALUES ('w', 'fp', 'tiles', '{"a":1}', 'ok', 0.001, 5.0, 0.3, 1.0);
    """)
    conn.commit()
    conn.close()
    with Database(path) as db:
        (old,) = db.records("w")
        assert old.gflops == 5.0 and old.wall_s == 0.3
        assert old.timing == "full" and old.contention is None and not old.busy  # not known: never "quiet" either
        db.commit(make_record(2))
    with Database(path) as db:  # the file is now version 2 and opens as such
        assert len(db) == 2


def test_a_short_timed_record_retimed_in_full_keeps_its_row(db):
    from dataclasses import replace

    short = db.commit(replace(make_record(1, gflops=1.0), timing="short", samples=(1e-3,)))
    timed = replace(make_record(1, gflops=2.0), samples=(5e-4, 5e-4, 5e-4), run_s=0.3, wall_s=0.3, contention=0.0)
    stored = db.retimed(short, timed)
    assert stored.id == short.id and stored.timing == "full" and stored.gflops == 2.0
    assert stored.run_s == pytest.approx(0.5) and stored.wall_s == pytest.approx(0.55) and len(db) == 1
