"""The real network env passes Gymnasium's checker cheaply: ``check_env`` on ``Network-ResNet18-v0`` with a
warm database measures nothing (it finished in under a minute by hand; a test counts records, not seconds)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from tensorgym.database import Database
from tensorgym.networks import NETWORKS


@pytest.mark.slow
def test_check_env_on_resnet18_with_a_warm_database_measures_nothing(tmp_path):
    db = str(tmp_path / "resnet18.db")
    # The smallest run the env allows: rounds of one trial (the warm-up: one per live task), one per episode.
    options = dict(db=db, measure_per_round=1, budget=1)
    counts = []
    for _ in ("cold", "warm"):
        env = gym.make("Network-ResNet18-v0", **options)
        check_env(env.unwrapped)
        env.close()
        with Database(db, readonly=True) as records:
            counts.append(len(records))
    cold, warm = counts
    assert cold >= len(NETWORKS["ResNet-18"].live_tasks)  # the warm-up measured every live task
    assert warm == cold  # the second check_env found every record it asked for
