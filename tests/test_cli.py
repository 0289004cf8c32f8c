import json

import pytest

from tensorgym.baselines import time_vendor
from tensorgym.cli import main
from tensorgym.workloads import conv2d, matmul


def test_list_shows_every_suite_layer(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert out.count("-v0") >= 42 and "Conv2d-ResNet-R5-v0" in out and "0.2312" in out
    assert main(["list", "--suite", "BERT"]) == 0
    assert "Conv2d" not in capsys.readouterr().out.split("Custom shapes")[0]


def test_tune_then_show(tmp_path, capsys):
    db = str(tmp_path / "cli.db")
    args = ["tune", "Matmul-BERT-M2-v0", "--budget", "3", "--db", db, "--no-vendor", "-q",
            "--json", str(tmp_path / "run.json")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "3 trials (3 measured now, 0 from" in out and "best config" in out
    assert main(args) == 0  # re-running resumes from the database
    assert "3 trials (0 measured now, 3 from" in capsys.readouterr().out
    assert len(json.loads((tmp_path / "run.json").read_text())["trials"]) == 3
    assert main(["show", db]) == 0
    assert "BERT/M2" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["tune", "Conv2d-ResNet-R99-v0"], "tensorgym list"),
    (["tune", "Conv2d-ResNet-R99-v0"], "(did you mean 'Conv2d-ResNet-R9-v0'?)"),
    (["tune", "Conv2d-ResNet-R5-v0", "--budget", "0"], "budget"),
    (["tune", "Conv2d-ResNet-R5-v0", "--agent", "rnadom"], "unknown agent 'rnadom' (did you mean 'random'?)"),
    (["tune", "Conv2d-ResNet-R5-v0", "--agent", "ga", "--space", "microkernel"], "space='tiles'"),
    (["tune", "Conv2d-ResNet-R5-v0", "--agent", "random", "--model", "ansor"], "takes no option model"),
    (["tune", "tensorgym/Matmul-v0"], "--shape M=512,N=768,K=3072"),
    (["tune", "tensorgym/Matmul-v0", "--shape", "M=64,N=32"], "missing K"),
    (["tune", "Matmul-BERT-M2-v0", "--shape", "M=64,N=32,K=16"], "fixed shape"),
    (["compare", "tensorgym/Matmul-v0", "--shape", "M64"], "NAME=VALUE"),
    (["tune", "CartPole-v1"], "unknown environment id 'CartPole-v1'"),
    (["tune", "tensorgym/Matmul-v0", "--shape", "M=99999999999,N=1,K=1"], "largest extent"),
    (["tune", "Matmul-BERT-M2-v0", "--seed", "-1"], "--seed must be >= 0"),
    (["tune", "Matmul-BERT-M2-v0", "--json", ""], "--json is an empty path"),
    (["compare", "Matmul-BERT-M2-v0", "--agents", "random", "--out", ""], "output directory is an empty path"),
    (["compare", "Matmul-BERT-M2-v0", "--agents", "random", "--remeasure", "-1"], "remeasure must be >= 0"),
    (["compare", "Matmul-BERT-M2-v0", "--shape", "M=8,N=8,K=8"], "a shape is for"),
    (["tune", "Matmul-BERT-M2-v0", "--rpc", "10.0.0.1/zen5"], "TRACKER_HOST:PORT/KEY"),
    (["tune", "Matmul-BERT-M2-v0", "--rpc", "127.0.0.1:1/zen5"], "no RPC tracker answers at 127.0.0.1:1"),
])
def test_cli_errors_are_one_line_and_create_no_file(tmp_path, capsys, args, message):
    db = tmp_path / "never.db"
    out = ["--out", str(tmp_path / "out")] if args[0] == "compare" and "--out" not in args else []
    assert main([*args, "--db", str(db), *out]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "?." not in err
    assert err.count("\n") <= 2  # the database line and the error
    assert not db.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [["tune", "Matmul-BERT-M2-v0", "--time-budget", "nan"],
                                  ["compare", "Matmul-BERT-M2-v0", "--time-budget", "inf"],
                                  ["compare", "Matmul-BERT-M2-v0", "--time-points", "60,nan"]])
def test_non_finite_numbers_are_usage_errors(tmp_path, capsys, args):
    with pytest.raises(SystemExit) as info:
        main([*args, "--db", str(tmp_path / "never.db"), *(["--out", str(tmp_path / "out")] if "compare" in args
                                                           else [])])
    assert info.value.code == 2 and "finite" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_show_never_writes_and_refuses_other_files(tmp_path, capsys):
    import sqlite3

    other = tmp_path / "other-app.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    before = other.read_bytes()
    assert main(["show", str(other)]) == 2
    err = capsys.readouterr().err
    assert "another application" in err and "Traceback" not in err and err.count("\n") == 1
    assert other.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["other-app.sqlite"]
    assert main(["show", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_a_failing_optuna_storage_is_one_line(tmp_path, capsys):
    db = tmp_path / "r.db"
    (tmp_path / "r.db.optuna.db").mkdir()  # where the study storage should be
    assert main(["tune", "tensorgym/Matmul-v0", "--shape", "M=16,N=16,K=16", "--agent", "optuna", "--budget", "1",
                 "--db", str(db), "--no-vendor", "-q"]) == 2
    err = capsys.readouterr().err
    assert "Optuna study storage" in err and "Traceback" not in err


def test_show_of_a_missing_file_is_an_error(tmp_path, capsys):
    assert main(["show", str(tmp_path / "missing.db")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "missing.db").exists()


def test_every_subcommand_has_help(capsys):
    from tensorgym.cli import build_parser

    parser = build_parser()
    commands = [a for a in parser._subparsers._group_actions[0].choices]  # noqa: SLF001 - argparse keeps them there
    assert {"list", "tune", "compare", "show", "microkernels"} <= set(commands)
    for argv in [["--help"], *([c, "--help"] for c in commands), ["microkernels", "calibrate", "--help"],
                 ["microkernels", "show", "--help"], ["microkernels", "time", "--help"]]:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 0, argv
        assert "usage:" in capsys.readouterr().out


def test_verbose_errors_show_the_traceback(tmp_path, capsys):
    assert main(["-v", "tune", "NoSuch-v0", "--db", str(tmp_path / "x.db")]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_tune_a_shape_of_your_own(tmp_path, capsys):
    args = ["tune", "tensorgym/Conv2d-v0", "--shape", "C=8,H=9,F=16,R=3,stride=2", "--budget", "2",
            "--db", str(tmp_path / "own.db"), "--no-vendor", "-q"]
    assert main(args) == 0
    assert "conv2d N=1 C=8 H=9 W=9 F=16 3x3 stride=2" in capsys.readouterr().out


@pytest.mark.parametrize("workload, library, layout", [
    (conv2d(1, 8, 10, 10, 16, 3, 3), "torch", "NCHW"),
    (conv2d(1, 8, 10, 10, 16, 3, 3, stride=2), "torch", "NHWC"),
    (matmul(64, 32, 48), "numpy", None),
])
def test_vendor_references_are_correct_and_timed(workload, library, layout):
    result = time_vendor(workload, library, layout)
    assert result.max_rel_error < 1e-4 and result.gflops > 0 and len(result.samples) >= 3


def test_tune_names_its_database_and_defaults_to_the_shared_one(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TENSORGYM_DB", str(tmp_path / "default.db"))
    assert main(["tune", "Matmul-BERT-M2-v0", "--budget", "1", "--no-vendor", "-q"]) == 0
    assert f"database: {tmp_path / 'default.db'}" in capsys.readouterr().err
    assert (tmp_path / "default.db").exists()
