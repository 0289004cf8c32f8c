"""The README's bring-your-own-strategy example runs through ``compare`` beside the bundled agents."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from fakes import SyntheticEvaluator, peak_at, small_matmul_space

from tensorgym.catalog import AGENTS, make_agent
from tensorgym.tuner import Tuner

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "my_strategy.py"


def _example():
    spec = importlib.util.spec_from_file_location("my_strategy", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_strategy_is_about_thirty_lines_and_climbs_a_landscape():
    module = _example()
    source = EXAMPLE.read_text().split("class SimulatedAnnealing")[1].split("def main")[0]
    assert len([line for line in source.splitlines() if line.strip()]) <= 35
    space = small_matmul_space()
    optimum = space.sample(np.random.default_rng(5))
    tuner = Tuner(SyntheticEvaluator(space, peak_at(space, optimum)), budget=48)
    tuner.run(module.SimulatedAnnealing(), seed=0)
    assert len(tuner.trials) == 48 and tuner.best.gflops > 0


def test_the_example_runs_through_compare_beside_the_bundled_agents(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = _example()
    try:
        assert module.main(["--env", "tensorgym/Matmul-v0", "--shape", "M=32,N=32,K=32", "--budget", "4",
                            "--seeds", "1", "--no-vendor", "--db", str(tmp_path / "r.db"),
                            "--out", str(tmp_path / "out")]) == 0
        assert isinstance(make_agent("annealing"), module.SimulatedAnnealing)
        text = (tmp_path / "out" / "compare.md").read_text()
        assert "annealing" in text and "random" in text and "ga" in text
    finally:
        AGENTS.pop("annealing", None)
