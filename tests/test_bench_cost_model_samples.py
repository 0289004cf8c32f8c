"""``bench/bench_cost_model_landscape.py --on samples``: cost models scored on a layer's full-space sample."""

from __future__ import annotations

import numpy as np
import pytest
from bench_scripts import bench_script

from tensorgym.landscape import Landscape, shipped_landscapes

CPU = "amd-epyc-zen4-avx512-2c"  # a CPU folder that ships full-space samples (any machine can read them)


@pytest.fixture(scope="module")
def bench():
    return bench_script("bench_cost_model_landscape")


def test_the_models_are_scored_on_the_full_space_sample(bench):
    task = {"cpu": CPU, "on": "samples", "layer": "R5", "part": "models", "seeds": 2, "sizes": (32,),
            "variants": False, "curve": False, "sources": ["R5", "C7"], "agent_seeds": 0, "budget": 0}
    out = bench.layer_task(task)
    sample = Landscape.load(next(s.sample for s in shipped_landscapes()
                                 if s.cpu == CPU and s.layer == "R5" and s.space == "tiles"))
    assert out["configs"] == len(sample) and out["optimum"] == pytest.approx(float(np.max(sample.scores)))
    assert {row["n"] for row in out["rows"]} == {32} and len(out["rows"]) >= 2 * 7  # 7 set-ups, 2 seeds


def test_samples_take_no_agent_runs(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--on", "samples"])
    assert "--agent-seeds 0" in capsys.readouterr().err
