"""The compare leaderboard: statistics, table, files and plots, the CLI parser, resume; (slow) a real run."""

import argparse
import csv
import json

import gymnasium as gym
import pytest

from fakes import synthetic_tuner
from tensorgym.agents import RandomAgent
from tensorgym.baselines.board import Leaderboard, Stat, trials_to_fraction
from tensorgym.baselines.compare import _result_path, compare
from tensorgym.baselines.render import markdown, plot_curves, text_table, write_tables
from tensorgym.cli.compare import add_parser as add_compare_parser
from tensorgym.database import Database
from tensorgym.tuner import Trial, TuningResult
from tensorgym.workloads import matmul

TEST_ENV = "tensorgym-test/Matmul64-v0"
if TEST_ENV not in gym.registry:
    gym.register(id=TEST_ENV, entry_point="tensorgym.envs.registration:make_env",
                 kwargs={"workload": matmul(64, 64, 64, name="mm64")})


def _random_result(seed, budget=24):
    tuner = synthetic_tuner(budget=budget)
    tuner.run(RandomAgent(batch_size=4), seed)
    return tuner.result("random", seed)


def _timeline(gflops, step_s=1.0, agent="fake", seed=0):
    """A result whose i-th trial measured gflops[i] at (i + 1) * step_s seconds."""
    trials, best = [], 0.0
    for i, g in enumerate(gflops):
        best = max(best, g or 0.0)
        trials.append(Trial(i + 1, (i + 1) * step_s, None, "ok" if g else "build_error", g, best, True))
    return TuningResult(agent, "w", "w", "tiles", "t", seed, len(gflops), None, trials, None, best)


def test_stat_formats_mean_and_range():
    assert Stat((10.0, 20.0, 30.0)).format() == "20.0 (10.0-30.0)"
    assert Stat((5.0,)).format() == "5.0"
    assert Stat((None, 4.0)).format(0) == "4 (4-4) [1/2]"
    assert Stat((None,)).format() == "-" and Stat((None,)).mean is None


def test_best_at_points_and_trials_to_reach():
    result = _timeline([1.0, 5.0, None, 9.0, 10.0, 3.0])
    assert result.best_at(trials=3) == 5.0 and result.best_at(seconds=4.5) == 9.0
    assert trials_to_fraction(result, 0.95) == 5 == result.trials_to_reach(0.95)
    assert trials_to_fraction(result, 0.5) == 2
    # A peer whose headline is a re-timing: the reach is read off its own timeline.
    result.best_gflops = 20.0
    assert result.trials_to_reach(0.95) is None and trials_to_fraction(result, 0.95) == 5


def _board():
    board = Leaderboard(env_ids=["E1", "E2"], agents=["a", "b"], seeds=[0, 1], budget=6, trial_points=(2, 4, 8),
                        time_points=(3.0,))
    board.results[("E1", "a")] = [_timeline([1, 2, 3, 4, 5, 6], seed=0), _timeline([3, 3, 3, 3, 3, 9], seed=1)]
    board.results[("E1", "b")] = [_timeline([4, 4, 4, 4, 4, 4], step_s=2.0, seed=s) for s in (0, 1)]
    board.results[("E2", "a")] = [_timeline([1, 1, 1, 1, 1, 1], seed=0)]
    board.vendor["E1"] = [{"library": "numpy", "layout": "row-major", "gflops": 7.5},
                          {"library": "torch", "layout": "row-major", "gflops": None, "error": "not installed"}]
    return board


def test_table_rows_statistics():
    board = _board()
    assert board.points == (2, 4)  # points beyond the budget are dropped
    assert board.metric_names() == ["@2", "@4", "@3s", "final", "re-timed", "to95%", "score", "score(t)", "AUC"]
    stats = board.stats("E1", "a")
    assert stats["@2"].values == (2, 3) and stats["@4"].mean == pytest.approx(3.5)
    assert stats["@3s"].values == (3, 3) and stats["final"].values == (6, 9)
    assert stats["to95%"].values == (6.0, 6.0)
    assert stats["re-timed"].values == (None, None)  # not re-timed yet: shown as "-"
    assert board.stats("E1", "b")["@3s"].values == (4, 4)
    assert board.stats("E2", "b")["final"].values == ()
    text = text_table(board)
    assert "vendor: numpy row-major" in text and "7.5" in text and "vendor: torch" not in text
    assert "2.5 (2.0-3.0)" in text  # E1/a at 2 measurements
    assert markdown(board).startswith("| env | agent |")


def test_points_fall_back_to_the_budget():
    assert Leaderboard(env_ids=[], agents=[], seeds=[0], budget=8).points == (8,)
    assert Leaderboard(env_ids=[], agents=[], seeds=[0], budget=100).points == (16, 32, 64)


def test_write_and_plot(tmp_path):
    board = _board()
    paths = write_tables(board, tmp_path)
    rows = list(csv.DictReader(paths["csv"].open()))
    assert {r["agent"] for r in rows} == {"a", "b", "vendor: numpy row-major"}
    final = next(r for r in rows if r["env"] == "E1" and r["agent"] == "a" and r["metric"] == "final")
    assert float(final["mean"]) == pytest.approx(7.5) and json.loads(final["values"]) == [6, 9]
    data = json.loads(paths["json"].read_text())
    assert data["settings"]["seeds"] == [0, 1] and len(data["rows"]) == 5
    assert "| E1 | a |" in paths["md"].read_text()
    curves = json.loads(paths["curves"].read_text())  # every run's best-so-far, to re-score without re-running
    run = next(r for r in curves["runs"] if r["env"] == "E1" and r["agent"] == "a" and r["seed"] == 0)
    result = next(r for r in board.results[("E1", "a")] if r.seed == 0)
    assert curves["columns"] == ["trial", "clock_s", "best_gflops"] and run["trials"] == len(result.trials)
    assert run["best_so_far"][-1][2] == pytest.approx(result.trials[-1].best_gflops)
    assert [p[0] for p in run["best_so_far"]] == sorted(p[0] for p in run["best_so_far"])
    pngs = plot_curves(board, tmp_path)
    assert [p.name for p in pngs] == ["E1.png", "E2.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_compare_parser():
    parser = argparse.ArgumentParser()
    add_compare_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["compare", "Conv2d-ResNet-R5-v0", "Matmul-BERT-M3-v0", "--agents", "random,optuna",
                              "--budget", "16", "--seeds", "0,2", "--time-points", "30", "--db", "x.db"])
    assert args.env_ids == ["Conv2d-ResNet-R5-v0", "Matmul-BERT-M3-v0"] and args.seeds == (0, 2)
    assert args.agents == "random,optuna" and args.time_points == (30.0,) and args.func.__name__ == "run"
    assert parser.parse_args(["compare", "E", "--seeds", "3"]).seeds == 3
    with pytest.raises(SystemExit):
        parser.parse_args(["compare", "E", "--seeds", "0"])


def test_compare_rejects_unknown_envs_and_agents(tmp_path):
    with pytest.raises(ValueError, match="tensorgym list"):
        compare(["NoSuch-v0"], ["random"], budget=2, seeds=1, db=tmp_path / "r.db", out_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown agent"):
        compare([TEST_ENV], ["random", "no-such-agent"], budget=2, seeds=1, db=tmp_path / "r.db", out_dir=tmp_path)


def test_compare_resumes_from_saved_results_without_measuring(tmp_path):
    out = tmp_path / "out"
    for seed in (0, 1):
        path = _result_path(out, TEST_ENV, "random", seed, {})
        path.parent.mkdir(parents=True, exist_ok=True)
        _random_result(seed, budget=24).save(path)
    board = compare([TEST_ENV], ["random"], budget=24, seeds=2, db=tmp_path / "r.db", out_dir=out, vendor=False,
                    progress=False, remeasure=0)
    assert [r.seed for r in board.results[(TEST_ENV, "random")]] == [0, 1]
    with Database(tmp_path / "r.db") as db:
        assert db.count() == 0  # nothing was measured: both runs came from out/results
    assert (out / "compare.csv").exists() and (out / "plots" / "tensorgym-test_Matmul64-v0.png").exists()


def test_a_local_compare_does_not_import_ray(tmp_path):
    """Ray is an optional extra: a compare without ``ray=`` never imports it."""
    import subprocess
    import sys

    out = tmp_path / "out"
    for seed in (0, 1):
        path = _result_path(out, TEST_ENV, "random", seed, {})
        path.parent.mkdir(parents=True, exist_ok=True)
        _random_result(seed, budget=8).save(path)
    code = ("import sys, gymnasium as gym; from tensorgym.workloads import matmul; "
            "from tensorgym.cli import main; "
            f"gym.register(id={TEST_ENV!r}, entry_point='tensorgym.envs.registration:make_env', "
            "kwargs={'workload': matmul(64, 64, 64, name='mm64')}); "
            f"code = main(['compare', {TEST_ENV!r}, '--agents', 'random', '--budget', '8', '--seeds', '2', "
            f"'--db', {str(tmp_path / 'r.db')!r}, '--out', {str(out)!r}, '--no-vendor', '--remeasure', '0', '-q']); "
            "print('ray imported' if 'ray' in sys.modules else 'no ray'); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("no ray") and (out / "compare.html").exists()


@pytest.mark.slow
def test_compare_two_agents_on_real_kernels_then_resume(tmp_path):
    db, out = tmp_path / "records.db", tmp_path / "out"
    board = compare([TEST_ENV], ["random", "optuna"], budget=6, seeds=1, db=db, out_dir=out, progress=False)
    for agent in ("random", "optuna"):
        (result,) = board.results[(TEST_ENV, agent)]
        assert len(result.trials) == 6 and result.best_gflops > 0
    assert {r["library"].split()[0] for r in board.vendor[TEST_ENV]} == {"numpy", "torch"}
    assert all(r["gflops"] > 0 for r in board.vendor[TEST_ENV])
    # the winners and the vendors were re-timed in 3 interleaved rounds (rounds a busy machine spoilt leave
    # no sample when a clean one exists)
    for agent in ("random", "optuna"):
        (result,) = board.results[(TEST_ENV, agent)]
        assert result.extra["remeasured_rounds"] == 3 and result.extra["remeasured_gflops"] > 0
        assert 1 <= len(result.extra["remeasured_samples"]) <= 3
    assert all(r["remeasured_rounds"] == 3 and 1 <= len(r["remeasured_samples"]) <= 3 for r in board.vendor[TEST_ENV])
    assert "re-timed" in text_table(board)
    with Database(db) as database:
        measured = database.count()
    assert 6 <= measured <= 12
    again = compare([TEST_ENV], ["random", "optuna"], budget=6, seeds=1, db=db, out_dir=out, progress=False)
    assert text_table(again) == text_table(board)
    with Database(db) as database:
        assert database.count() == measured
    assert (out / "plots" / "tensorgym-test_Matmul64-v0.png").exists()


def test_plot_titles_are_short_for_shapes_of_your_own():
    from tensorgym.baselines.render import plot_title

    assert plot_title("Conv2d-ResNet-R5-v0", "ResNet-50/R5") == "ResNet-50/R5 (Conv2d-ResNet-R5-v0)"
    title = plot_title("tensorgym/Conv2d-v0[C=8,H=9,F=16,R=3,stride=2]", "conv2d(N=1,C=8,H=9,W=9,F=16,...)")
    assert title == "Conv2d C=8, H=9, F=16, R=3, stride=2"
    assert len(plot_title("tensorgym/Matmul-v0[" + ",".join(f"X{i}=1" for i in range(40)) + "]", "")) <= 70
