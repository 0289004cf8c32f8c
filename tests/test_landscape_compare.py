"""``compare`` and ``tune`` on the landscape backend: runs answered from a shipped landscape, scored against the
true optimum, in parallel processes, reproducible per seed (nothing compiled)."""

from __future__ import annotations

import json

import pytest

from tensorgym.baselines.compare import compare
from tensorgym.cli import main
from tensorgym.errors import InvalidArgumentError
from tensorgym.landscape import Landscape, find_landscape

CPU = "amd-epyc-zen4-avx512-2c"  # named explicitly: the tests run on any CPU
LAYER = "Conv2d-ResNet18-C7-v0"


def _board(tmp_path, name: str, jobs: int = 2):
    return compare([LAYER], "random,ga", budget=24, seeds=2, backend="landscape", landscape=CPU, jobs=jobs,
                   out_dir=tmp_path / name, plot=False, progress=False, trial_points=(8, 24), time_points=(5.0,))


def test_a_landscape_comparison_is_scored_against_the_true_optimum(tmp_path):
    board = _board(tmp_path, "a")
    landscape = Landscape.load(find_landscape(LAYER, cpu=CPU))
    facts = board.landscapes[LAYER]
    assert facts.optimum_gflops == pytest.approx(float(landscape.scores.max()))
    assert not board.errors and board.vendor == {}
    for agent in ("random", "ga"):
        runs = board.results[(LAYER, agent)]
        assert [r.seed for r in runs] == [0, 1] and all(len(r.trials) == 24 for r in runs)
        stats = board.stats(LAYER, agent)
        assert all(0 < v <= 101 for v in stats["%opt"].values)  # a noisy draw may pass the recorded median a little
    reference = board.methodology_reference(LAYER)
    assert reference is not None and reference.exhaustive and reference.sample.size == len(landscape)
    assert "%opt" in board.metric_names() and "re-timed" not in board.metric_names()
    saved = json.loads((tmp_path / "a" / "compare.json").read_text())
    assert saved["landscapes"][LAYER]["configs"] == len(landscape) and saved["timing"]["jobs"] == 2
    assert saved["methodology"][LAYER]["optimum"].startswith("true")


def test_runs_are_reproducible_per_seed_and_resume(tmp_path):
    first, second = _board(tmp_path, "one"), _board(tmp_path, "two", jobs=1)
    for key in first.results:
        assert [[t.gflops for t in r.trials] for r in first.results[key]] == \
               [[t.gflops for t in r.trials] for r in second.results[key]]
    again = _board(tmp_path, "one")
    assert again.timing["runs_now"] == 0  # every run's result was reused


def test_a_resume_follows_the_landscapes_content_not_its_path(tmp_path, monkeypatch):
    import shutil

    from tensorgym.landscape import shipped

    _board(tmp_path, "one")
    source = find_landscape(LAYER, cpu=CPU)
    moved = tmp_path / "elsewhere" / CPU / source.name  # the same file in another checkout
    moved.parent.mkdir(parents=True)
    shutil.copy(source, moved)
    monkeypatch.setattr(shipped, "LANDSCAPES_DIR", tmp_path / "elsewhere")
    again = _board(tmp_path, "one")
    assert again.landscapes[LAYER].path == str(moved) and again.timing["runs_now"] == 0


def test_a_landscape_comparison_refuses_what_it_cannot_run(tmp_path):
    with pytest.raises(InvalidArgumentError, match="microkernel space"):
        compare([LAYER], "random-structured", budget=8, seeds=1, backend="landscape", landscape=CPU, space="tiles",
                out_dir=tmp_path / "x", plot=False, progress=False)
    with pytest.raises(InvalidArgumentError, match="layers"):
        compare(["Network-ResNet18-v0"], "round-robin", budget=8, seeds=1, backend="landscape", landscape=CPU,
                out_dir=tmp_path / "y", plot=False, progress=False)


def test_the_command_line_on_landscapes(tmp_path, capsys):
    out = tmp_path / "cli"
    code = main(["compare", LAYER, "--backend", "landscape", "--landscape", CPU, "--agents", "random",
                 "--seeds", "2", "--budget", "16", "--out", str(out), "--no-plot", "-q"])
    text = capsys.readouterr().out
    assert code == 0 and "%opt" in text and "true optimum" in text and (out / "compare.html").exists()
    code = main(["tune", LAYER, "--backend", "landscape", "--landscape", CPU, "--agent", "ga", "--budget", "16",
                 "-q"])
    text = capsys.readouterr().out
    assert code == 0 and "of the landscape's optimum" in text and "simulated" in text
