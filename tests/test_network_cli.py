"""``tensorgym tune-network`` and ``compare-network``: errors, the per-layer table, interrupt and resume; the network's
comparison is ``compare``'s, with its files."""

from __future__ import annotations

import json

import pytest
from fakes import SyntheticMeasurer

from tensorgym.cli import EXIT_INTERRUPTED, main
from tensorgym.tuner import ProgressBarCallback

NETWORK = {"name": "tiny", "layers": [
    {"op": "matmul", "M": 32, "N": 32, "K": 32, "count": 2, "name": "a"},
    {"op": "matmul", "M": 16, "N": 64, "K": 32, "count": 1, "name": "b"},
    {"op": "conv2d", "C": 4, "H": 8, "F": 8, "R": 3, "count": 0, "name": "never"},
]}


@pytest.fixture()
def network_file(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(NETWORK))
    return str(path)


@pytest.fixture()
def synthetic(monkeypatch):
    """Every network env of the command measures with one synthetic measurer (no compiling)."""
    from tensorgym.context import DEFAULT_CONTEXTS

    measurer = SyntheticMeasurer()
    monkeypatch.setattr(DEFAULT_CONTEXTS, "measurer_factory", lambda target: measurer)
    return measurer


@pytest.mark.parametrize("args, message", [
    (["tune-network", "ResNet-19"], "did you mean 'ResNet-18'"),
    (["tune-network", "ResNet-18", "--space", "nope"], "unknown space 'nope'"),
    (["tune-network", "ResNet-18", "--dtype", "int8", "--space", "tiles"], "schedules float32, not int8"),
    (["tune-network", "ResNet-18", "--scheduler", "dual"], "did you mean 'dual-task'"),
    (["tune-network", "ResNet-18", "--scheduler", "gradient", "--kappa", "0.4"], "takes no option kappa"),
    (["tune-network", "ResNet-18", "--kappa", "2"], "kappa"),
    (["tune-network", "ResNet-18", "--budget", "0"], "budget"),
    (["tune-network", "ResNet-18", "--agent", "ga", "--space", "microkernel"], "space='tiles'"),
    (["tune-network", "missing.json"], "No such file"),
    (["compare-network", "ResNet-18", "--schedulers", "round-robin,nope"], "unknown scheduler 'nope'"),
    (["compare-network", "ResNet-18", "--dtype", "bf16", "--space", "microkernel"], "schedules float32, not bf16"),
])
def test_errors_are_one_line_and_create_no_file(tmp_path, capsys, args, message):
    db = tmp_path / "never.db"
    out = ["--out", str(tmp_path / "out")] if args[0] == "compare-network" else []
    assert main([*args, "--db", str(db), *out]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1
    assert not db.exists() and not (tmp_path / "out").exists()


def test_tune_network_prints_the_layer_table_and_resumes(tmp_path, capsys, network_file, synthetic):
    db = str(tmp_path / "runs.db")
    args = ["tune-network", network_file, "--budget", "40", "--db", db, "--no-vendor", "-q",
            "--json", str(tmp_path / "run.json")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "dual-task scheduler (seed 0), ga inside each layer, 20 trials per round" in out
    assert "40 trials (40 measured now, 0 from" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("tiny/")}
    assert lines["tiny/never"][1:3] == ["0", "-"]  # weight 0: listed, not tuned
    assert lines["tiny/a"][1] == "2" and lines["tiny/a"][3] == "all"
    assert "estimated network latency:" in out
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["agent"] == "dual-task" and len(saved["trials"]) == 40
    assert main(args) == 0
    assert "40 trials (0 measured now, 40 from" in capsys.readouterr().out
    assert len(synthetic.measured) == 40


def test_an_interrupted_tune_network_resumes_and_measures_nothing_twice(tmp_path, capsys, network_file, synthetic,
                                                                        monkeypatch):
    db = str(tmp_path / "runs.db")
    args = ["tune-network", network_file, "--budget", "60", "--db", db, "--no-vendor", "--scheduler", "gradient"]
    original = ProgressBarCallback.on_trial

    def interrupt(self, trial):
        original(self, trial)
        if trial.index == 33:
            raise KeyboardInterrupt

    monkeypatch.setattr(ProgressBarCallback, "on_trial", interrupt)
    assert main(args) == EXIT_INTERRUPTED
    assert "run the same command again to resume" in capsys.readouterr().err
    done = len(synthetic.measured)
    assert done >= 33
    monkeypatch.setattr(ProgressBarCallback, "on_trial", original)
    assert main(args) == 0
    assert f"60 trials ({60 - done} measured now, {done} from" in capsys.readouterr().out
    assert len(synthetic.measured) == len(set(synthetic.measured)) == 60


def test_compare_network_writes_its_files_and_reuses_finished_runs(tmp_path, capsys, network_file, synthetic):
    out = tmp_path / "cmp"
    args = ["compare-network", network_file, "--schedulers", "round-robin,gradient,dual-task", "--budget", "48",
            "--seeds", "2", "--db", str(tmp_path / "runs.db"), "--out", str(out), "--no-vendor", "-q",
            "--agent", "random"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "to-RR" in text and "%RR" in text and "@48" in text and "dual-task" in text
    for name in ("compare.csv", "compare.json", "compare.md", "compare.html", "plots/Network-tiny-v0.png"):
        assert (out / name).exists(), name
    assert len(list((out / "results" / "Network-tiny-v0").glob("round-robin-*seed1.json"))) == 1
    board = json.loads((out / "compare.json").read_text())
    rows = {row["agent"]: row["stats"] for row in board["rows"] if row["env"] == "Network-tiny-v0"}
    # Round-robin reaches its own final latency within its trials, at its last improvement.
    run = json.loads(next((out / "results" / "Network-tiny-v0").glob("round-robin-*seed0.json")).read_text())
    final = run["best_latency_s"]
    first = next(t["index"] for t in run["trials"] if t["best_latency_s"] is not None and t["best_latency_s"] <= final)
    assert rows["round-robin"]["to-RR"]["values"][0] == first and 0 < rows["round-robin"]["%RR"]["values"][0] <= 100
    measured = len(synthetic.measured)
    assert main(args) == 0  # finished runs are reused: nothing runs again
    assert len(synthetic.measured) == measured


@pytest.mark.slow
def test_tune_network_on_real_kernels_beside_pytorch(tmp_path, capsys, network_file):
    db = str(tmp_path / "real.db")
    args = ["tune-network", network_file, "--budget", "12", "--db", db, "-q", "--json", str(tmp_path / "run.json")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "12 trials (12 measured now, 0 from" in out and "PyTorch weighted sum (" in out
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["best_latency_s"] > 0 and saved["extra"]["vendor"]["latency_s"] > 0
    assert all(t["best_latency_s"] for t in saved["tasks"] if t["weight"] > 0)
    assert main([*args[:-2], "--no-vendor"]) == 0
    assert "12 trials (0 measured now, 12 from" in capsys.readouterr().out


@pytest.mark.slow
def test_metaschedule_network_tuner_on_real_kernels(tmp_path, capsys, network_file):
    """MetaSchedule's tune_tasks with the same budget; its winners are re-timed into the database."""
    from tensorgym.database import Database
    from tensorgym.envs.network_env import NetworkEnv
    from tensorgym.catalog import make_scheduler

    db = Database(tmp_path / "ms.db")
    env = NetworkEnv(network_file, db=db)
    result = make_scheduler("metaschedule").tune(env, budget=8, seed=0)
    assert len(result.trials) == 8 and {t.task for t in result.trials} == {0, 1}
    assert result.tasks[2].trials == 0 and result.best_latency_s and result.extra["metaschedule_estimate_s"]
    assert len(db.records(space="metaschedule")) >= 2  # re-timed winners stored as records
    again = make_scheduler("metaschedule").tune(env, budget=8, seed=0)  # the finished run is reused
    assert again.best_latency_s == result.best_latency_s
    env.close()


def test_list_shows_the_network_envs(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "Network-ResNet18-v0  ResNet-18  11 of 12" in out and "C2 x0" in out and "Network-BERTbase-v0" in out
