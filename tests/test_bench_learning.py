"""``bench/bench_learning.py`` end to end on one shipped landscape, small: the reports it writes agree with each
other (the learning report, the board and the curves shipped beside it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CPU = "amd-epyc-zen4-avx512-2c"  # a shipped CPU folder; any machine can run on it (as another CPU's benchmark)
ENV = "Conv2d-ResNet-R5-v0"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("learning")
    cmd = [sys.executable, str(REPO / "bench" / "bench_learning.py"), "--landscape", CPU, "--envs", ENV,
           "--seeds", "2", "--budget", "16", "--budgets", "8,16", "--headline-trials", "24", "--out", str(out),
           "--report-dir", str(out / "reports"), "--minari-episodes", "2", "-q"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    return out / "reports"


def test_the_report_sets_each_learned_agent_beside_its_ablation_seed_by_seed(reports):
    text = (reports / "learning" / f"{CPU}.txt").read_text()
    assert "== headline: methodology score" in text and "what the model adds" in text
    assert "dgd - dgd-random-model" in text and "dgd above dgd-random-model by score, paired by seed" in text
    data = json.loads((reports / "learning" / f"{CPU}.json").read_text())
    paired = data["envs"][ENV]["ablations"]["dgd"]["score_paired"]
    assert paired["n"] == 2 and paired["wins"] + paired["losses"] <= 2


def test_the_board_ships_every_runs_curve_and_its_ends_are_the_reports_bests(reports):
    curves = json.loads((reports / "landscapes" / "leaderboard_curves.json").read_text())
    assert curves["format"] == "tensorgym-curves" and curves["landscapes"][ENV]["cpu"]
    learning = json.loads((reports / "learning" / f"{CPU}.json").read_text())["envs"][ENV]["agents"]
    runs = [r for r in curves["runs"] if r["env"] == ENV and "@" not in r["agent"]]
    assert {r["agent"] for r in runs} == {a for a in learning if "@" not in a} and len(runs) == 2 * 6
    for run in runs:
        entry = learning[run["agent"]]
        at16 = dict(zip(entry["seeds"], entry["@16"]["values"]))
        assert run["simulated"] and run["trials"] == 16
        assert run["best_so_far"][-1][0] == 16 and run["best_so_far"][-1][2] == pytest.approx(at16[run["seed"]])
    assert (reports / "landscapes" / "leaderboard.html").stat().st_size > 0
