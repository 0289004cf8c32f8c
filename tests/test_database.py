import contextlib
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tensorgym.database import Database, DatabaseError
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
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


def test_a_devices_state_round_trips_and_follows_a_new_timing(db):
    from dataclasses import replace

    clocks = (("memory_clock_mhz", 2619.0), ("sm_clock_mhz", 1980.0))
    stored = db.commit(replace(make_record(1), device_state=clocks))
    assert db.get(stored.workload, "fp", "tiles", Config({"a": 1})).device_state == clocks
    assert db.commit(make_record(2)).device_state == ()  # a CPU's records have none
    slower = (("memory_clock_mhz", 2619.0), ("sm_clock_mhz", 1755.0))
    assert db.retimed(stored, replace(make_record(1), device_state=slower)).device_state == slower


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


# -- opening: what is refused, and why --------------------------------------------------------------------------
@pytest.mark.parametrize("value, error", [
    ("", InvalidArgumentError), ("   ", InvalidArgumentError), (5, InvalidTypeError), (True, InvalidTypeError),
    ([], InvalidTypeError), (b"x.db", InvalidTypeError), (None, InvalidTypeError),
])
def test_a_db_that_is_not_a_path_is_refused_and_creates_nothing(tmp_path, monkeypatch, value, error):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match="db"):
        Database(value)
    assert list(tmp_path.iterdir()) == []


def test_a_temporary_database_is_only_made_when_asked_for():
    with Database(":memory:") as db:
        db.commit(make_record(1))
        assert len(db) == 1 and db.path == ":memory:"


def test_a_directory_is_not_a_database(tmp_path):
    with pytest.raises(DatabaseError, match="is a directory"):
        Database(tmp_path)


def test_a_file_where_a_directory_should_be(tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(DatabaseError, match="is a file, not a directory"):
        Database(tmp_path / "plain" / "sub" / "r.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]


def test_another_applications_sqlite_file_is_never_written(tmp_path):
    path = tmp_path / "other-app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('ada')")
    before = path.read_bytes()
    for readonly in (False, True):
        with pytest.raises(DatabaseError, match="another application .*users"):
            Database(path, readonly=readonly)
    assert path.read_bytes() == before  # no tables added, not switched to WAL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-app.sqlite"]


@pytest.mark.parametrize("version, message", [("2.1", "malformed schema version '2.1'"), ("", "malformed"),
                                              ("99", "schema version 99; this tensorgym reads 3")])
def test_a_malformed_or_future_schema_version_is_refused_unchanged(tmp_path, version, message):
    path = tmp_path / "r.db"
    Database(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.close()
    before = path.read_bytes()
    for readonly in (False, True):
        with pytest.raises(DatabaseError, match=message):
            Database(path, readonly=readonly)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db"]


def test_readonly_reads_and_refuses_to_write(tmp_path):
    path = tmp_path / "r.db"
    with Database(path) as db:
        db.commit(make_record(1))
    with Database(path, readonly=True) as db:
        assert len(db) == 1
        with pytest.raises(DatabaseError, match="read-only"):
            db.commit(make_record(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db"]  # a snapshot read leaves no -wal/-shm
    with pytest.raises(DatabaseError, match="does not exist"):
        Database(tmp_path / "missing.db", readonly=True)


# File permissions: root ignores them, so the scenarios run in a child that gives up root's DAC override.
_AS_PLAIN_USER = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
class Header(ctypes.Structure): _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Data(ctypes.Structure): _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                                          ("inheritable", ctypes.c_uint32)]
header, data = Header(0x20080522, 0), (Data * 2)()
libc.capget(ctypes.byref(header), data)
data[0].effective &= ~0b110  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
assert libc.capset(ctypes.byref(header), data) == 0
from tensorgym.database import Database, DatabaseError
def attempt(path, **kw):
    try:
        Database(path, **kw).close()
        print("OK")
    except DatabaseError as exc:
        print("ERROR", exc)
attempt(sys.argv[1], **eval(sys.argv[2]))
"""


def open_as_plain_user(path, **kwargs) -> str:
    done = subprocess.run([sys.executable, "-c", _AS_PLAIN_USER, str(path), repr(kwargs)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture()
def stored(tmp_path):
    path = tmp_path / "ro" / "r.db"
    with Database(path) as db:
        db.commit(make_record(1))
    yield path
    for p in (path, path.parent):
        p.chmod(0o755)


def test_a_read_only_file_is_named_and_can_be_read(stored):
    stored.chmod(0o444)
    assert "the file is read-only (mode 0o444)" in open_as_plain_user(stored)
    assert open_as_plain_user(stored, readonly=True) == "OK"


def test_a_read_only_directory_is_named_and_can_be_read(stored):
    stored.parent.chmod(0o555)
    message = open_as_plain_user(stored)
    assert "directory" in message and "is read-only" in message and "-wal" in message
    assert open_as_plain_user(stored, readonly=True) == "OK"
    assert "no permission to create files in" in open_as_plain_user(stored.parent / "new.db")
    assert sorted(p.name for p in stored.parent.iterdir()) == ["r.db"]


def test_an_unreadable_file_is_named(stored):
    stored.chmod(0o000)
    assert "no permission to read it" in open_as_plain_user(stored)
    assert "no permission" in open_as_plain_user(stored, readonly=True)


@contextlib.contextmanager
def read_only_mount(directory: Path):
    """A tmpfs at ``directory`` (filled by the caller first), then remounted read-only."""
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    directory.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(directory)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield lambda: subprocess.run(["mount", "-o", "remount,ro", str(directory)], check=True)
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def test_a_database_on_a_read_only_mount_is_named_shown_and_replayed(tmp_path, capsys):
    import gymnasium as gym

    from fakes import SyntheticMeasurer
    from tensorgym.cli import main

    with read_only_mount(tmp_path / "mnt") as make_read_only:
        path = tmp_path / "mnt" / "r.db"
        env = gym.make("tensorgym/Matmul-v0", M=48, N=64, K=32, db=str(path), measurer=SyntheticMeasurer())
        _, info = env.reset(seed=0)
        env.step(int(info["action_mask"].nonzero()[0][0]))  # a start and a recorded neighbour: replay can move
        env.close()
        make_read_only()
        with pytest.raises(DatabaseError, match="read-only file system"):
            Database(path)
        with pytest.raises(DatabaseError, match="read-only file system"):
            Database(tmp_path / "mnt" / "new.db")
        assert main(["show", str(path)]) == 0
        assert "matmul(M=48,N=64,K=32" in capsys.readouterr().out
        replay = gym.make("tensorgym/Matmul-v0", M=48, N=64, K=32, db=str(path), backend="replay")
        obs, info = replay.reset(seed=0)
        assert info["status"] == "ok"
        replay.close()
        assert sorted(p.name for p in path.parent.iterdir()) == ["r.db"]


def test_a_version_1_file_is_migrated_and_keeps_its_records(tmp_path):
    import sqlite3

    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE workloads (key TEXT PRIMARY KEY, label TEXT NOT NULL, json TEXT NOT NULL);
        CREATE TABLE targets (fingerprint TEXT PRIMARY KEY, label TEXT NOT NULL, json TEXT NOT NULL);
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
        assert old.device_state == ()
        db.commit(make_record(2))
    with Database(path) as db:  # the file is now version 3 and opens as such
        assert len(db) == 2


def test_a_version_2_file_gets_the_device_state_column_and_keeps_its_records(tmp_path):
    import sqlite3

    path = tmp_path / "v2.db"
    Database(path).close()
    with sqlite3.connect(path) as conn:  # a version-2 file: the records table without device_state
        conn.executescript("""
            DROP TABLE records;
            CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, workload TEXT NOT NULL, target TEXT NOT NULL,
                space TEXT NOT NULL, config TEXT NOT NULL, status TEXT NOT NULL, latency_s REAL, latency_cv REAL,
                samples TEXT NOT NULL DEFAULT '[]', number INTEGER NOT NULL DEFAULT 0, gflops REAL,
                build_s REAL NOT NULL DEFAULT 0, run_s REAL NOT NULL DEFAULT 0, wall_s REAL NOT NULL DEFAULT 0,
                error TEXT NOT NULL DEFAULT '', created REAL NOT NULL, timing TEXT NOT NULL DEFAULT 'full',
                contention REAL, dropped INTEGER NOT NULL DEFAULT 0, UNIQUE (workload, target, space, config));
            INSERT INTO records (workload, target, space, config, status, latency_s, gflops, created, timing)
                VALUES ('w', 'fp', 'tiles', '{"a":1}', 'ok', 0.001, 5.0, 1.0, 'short');
            UPDATE meta SET value = '2' WHERE key = 'schema_version';
        """)
    conn.close()
    with pytest.raises(DatabaseError, match="opened read-only"):
        Database(path, readonly=True)
    with Database(path) as db:
        (old,) = db.records("w")
        assert old.gflops == 5.0 and old.timing == "short" and old.device_state == ()
        db.commit(make_record(2))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("3",)
    conn.close()


def test_a_short_timed_record_retimed_in_full_keeps_its_row(db):
    from dataclasses import replace

    short = db.commit(replace(make_record(1, gflops=1.0), timing="short", samples=(1e-3,)))
    timed = replace(make_record(1, gflops=2.0), samples=(5e-4, 5e-4, 5e-4), run_s=0.3, wall_s=0.3, contention=0.0)
    stored = db.retimed(short, timed)
    assert stored.id == short.id and stored.timing == "full" and stored.gflops == 2.0
    assert stored.run_s == pytest.approx(0.5) and stored.wall_s == pytest.approx(0.55) and len(db) == 1
