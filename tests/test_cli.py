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


def test_cli_errors_say_what_to_do(tmp_path):
    with pytest.raises(SystemExit, match="tensorgym list"):
        main(["tune", "Conv2d-ResNet-R99-v0", "--db", str(tmp_path / "x.db")])
    with pytest.raises(SystemExit, match="budget"):
        main(["tune", "Conv2d-ResNet-R5-v0", "--budget", "0"])
    with pytest.raises(SystemExit, match="does not exist"):
        main(["show", str(tmp_path / "missing.db")])
    db = str(tmp_path / "y.db")
    with pytest.raises(SystemExit, match="--shape M=512,N=768,K=3072"):
        main(["tune", "tensorgym/Matmul-v0", "--db", db])
    with pytest.raises(SystemExit, match="missing K"):
        main(["tune", "tensorgym/Matmul-v0", "--shape", "M=64,N=32", "--db", db])
    with pytest.raises(SystemExit, match="fixed shape"):
        main(["tune", "Matmul-BERT-M2-v0", "--shape", "M=64,N=32,K=16", "--db", db])
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        main(["compare", "tensorgym/Matmul-v0", "--shape", "M64", "--db", db, "--out", str(tmp_path / "out")])


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
