"""A refused command prints exactly one line, its error, on stderr and exits with code 2.

``tune`` and ``compare`` used to name their database (``database: ...``) before opening it or before
checking their options, so a database path that cannot be used, or an unknown agent, printed two
lines. The database is named once it opened.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tensorgym.cli import main

RUN_CLI = "import sys; from tensorgym.cli import main; sys.exit(main())"


def _refusals(tmp_path) -> list[list[str]]:
    """Commands with a database that cannot be used, or an unknown agent."""
    directory = tmp_path / "a-directory"
    directory.mkdir()
    regular = tmp_path / "a-file"
    regular.write_text("not a directory")
    under_a_file = str(regular / "records.db")  # its "directory" is a regular file: nothing can be created there
    out = ["--out", str(tmp_path / "out")]
    tune = ["tune", "Matmul-BERT-M2-v0", "--budget", "1", "--no-vendor", "-q"]
    compare = ["compare", "Matmul-BERT-M2-v0", "--budget", "1", "--seeds", "1", "--no-vendor", "--no-plot", "-q"]
    return [
        [*tune, "--db", str(directory)],
        [*tune, "--db", under_a_file],
        [*compare, "--agents", "nope", "--db", str(tmp_path / "never.db"), *out],
        [*compare, "--agents", "random", "--db", str(directory), *out],
        [*compare, "--agents", "random", "--db", under_a_file, *out],
        ["dataset", "build", "--tasks", "1", "--db", str(directory)],
        ["train", "--algo", "maskable-ppo", "--envs", "Conv2d-ResNet-R5-v0", "--timesteps", "8", "--db", str(directory),
         *out],
        ["train", "--algo", "maskable-ppo", "--envs", "Conv2d-ResNet-R5-v0", "--timesteps", "8",
         "--db", str(tmp_path / "never.db"), *out],
    ]


@pytest.mark.parametrize("case", range(8), ids=["tune-db-directory", "tune-db-under-a-file", "compare-unknown-agent",
                                               "compare-db-directory", "compare-db-under-a-file",
                                               "dataset-db-directory", "train-db-directory",
                                               "train-replay-without-a-dataset"])
def test_a_refused_command_prints_its_error_alone(tmp_path, capsys, case):
    argv = _refusals(tmp_path)[case]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "database:" not in captured.err + captured.out
    assert not (tmp_path / "never.db").exists() and not (tmp_path / "out").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a directory without write permission")
def test_a_database_in_a_directory_without_write_permission_is_one_line(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("this user can still write into a directory of mode 0o500")
        for argv in (["tune", "Matmul-BERT-M2-v0", "--budget", "1", "--no-vendor", "-q"],
                     ["compare", "Matmul-BERT-M2-v0", "--agents", "random", "--budget", "1", "--seeds", "1",
                      "--no-vendor", "--no-plot", "-q", "--out", str(tmp_path / "out")]):
            assert main([*argv, "--db", str(locked / "records.db")]) == 2
            lines = capsys.readouterr().err.splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: ") and "permission" in lines[0], lines
    finally:
        locked.chmod(0o700)


def test_the_real_command_line_prints_one_line(tmp_path):
    """The installed command, in its own process: nothing else (a warning, a log line) reaches stderr."""
    for argv in _refusals(tmp_path)[:3]:
        done = subprocess.run([sys.executable, "-c", RUN_CLI, *argv], capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("error: "), done.stderr
