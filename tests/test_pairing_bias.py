"""``pairing_bias``: the same kernel and vendor timed five ways in one process. No test here asserts a speed: only
that every way gives a ratio per round, from a real kernel and the real vendor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensorgym.baselines.vendor import PAIRING_VARIANTS, pairing_bias
from tensorgym.errors import InvalidArgumentError
from tensorgym.measure.tasks import build
from tensorgym.spaces.tiles.space import TilesSpace
from tensorgym.target import local_cpu
from tensorgym.workloads import matmul

pytest.importorskip("torch")


def test_every_way_of_timing_gives_one_sane_ratio_per_round(tmp_path):
    target = local_cpu()
    space = TilesSpace.for_target(target)(matmul(64, 64, 64, name="mm64"), target)
    config = space.sample(np.random.default_rng(0))
    built = build(space.builder(), config, str(tmp_path))
    result = pairing_bias(space.builder(), config, built["path"], rounds=2, pairs=3)
    assert set(result["ratios"]) == set(PAIRING_VARIANTS)
    for variant, ratios in result["ratios"].items():
        assert len(ratios) == 2 and all(math.isfinite(r) and r > 0 for r in ratios), variant
    # a copy of the same kernel on its own buffers runs within a few times of its original on any machine
    assert all(0.2 < r < 5 for r in result["ratios"]["kernel / its copy"] + result["ratios"]["vendor / its copy"])
    assert result["vendor"] and result["pairs"] == 3
    with pytest.raises(InvalidArgumentError, match="at least one round"):
        pairing_bias(space.builder(), config, built["path"], rounds=0)
