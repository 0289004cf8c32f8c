"""Replay as an RL backend: the hop graph, no dead-end starts, the common layout, a Tuner as record source."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from fakes import SyntheticMeasurer, smooth_gflops, synthetic_record

import tensorgym  # noqa: F401  (registers the ids)
from tensorgym.database import Database
from tensorgym.dataset.build import build_dataset
from tensorgym.envs import TileHopEnv
from tensorgym.envs.tile_hop import COMMON_SLOTS, SHAPE_FEATURES
from tensorgym.errors import InvalidArgumentError
from tensorgym.evaluator import Evaluator
from tensorgym.spaces.tiles import HopGraph, TilesSpace
from tensorgym.target import local_cpu
from tensorgym.tuner import Tuner
from tensorgym.workloads import conv2d, matmul

MM = matmul(32, 48, 64, name="mm")
CONV_1X1 = conv2d(1, 16, 8, 8, 32, 1, 1, name="1x1")


@pytest.fixture(scope="module")
def replay_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "data.db"
    with Database(path) as db:
        build_dataset([MM, CONV_1X1], db, per_task=40, hop_share=0.75, measurer=SyntheticMeasurer(smooth_gflops),
                      progress=False)
    return path


def test_hop_graph_matches_the_space_and_finds_dead_ends():
    space = TilesSpace(MM, local_cpu())
    rng = np.random.default_rng(0)
    a = space.sample(rng)
    b = space.hop(a, 0, 1) or space.hop(a, 0, -1)
    lonely = space.sample(np.random.default_rng(5))
    broken = next(n for n in space.neighbours(lonely, 1))
    records = [synthetic_record(space, c, g) for c, g in ((a, 10.0), (b, 20.0), (lonely, 5.0), (broken, None))]
    graph = HopGraph(space, records)
    for i, record in enumerate(records):
        for action in range(graph.table.shape[1]):
            target = space.hop(record.config, action // 2, -1 if action % 2 else 1)
            expected = graph.index.get(target, -1) if target is not None else -1
            assert graph.table[i, action] == expected
    assert graph.movable.tolist() == [True, True, False, False]  # lonely's only neighbour failed: a dead end
    assert sorted(graph.starts.tolist()) == [0, 1]


def test_replay_never_starts_in_a_dead_end_and_masks_are_never_empty(replay_db):
    env = gym.make("tensorgym/Matmul-v0", M=32, N=48, K=64, db=str(replay_db), backend="replay")
    base = env.unwrapped
    _, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(300):
        assert base._graph.movable[base._node]
        mask = info["action_mask"]
        assert mask.any() and np.array_equal(mask, base.action_masks())
        _, reward, _, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert info["status"] in ("ok", "build_error")
        if truncated:
            _, info = env.reset()
    assert base.evaluator.measured == 0
    dead = next(r.config for r, movable in zip(base._graph.records, base._graph.movable) if r.ok and not movable) \
        if (~base._graph.movable & base._graph.ok).any() else None
    if dead is not None:
        with pytest.raises(InvalidArgumentError, match="dead end"):
            env.reset(options={"config": dead})
    env.close()


def test_replay_refuses_a_layer_without_neighbourhoods(tmp_path):
    with Database(tmp_path / "ga.db") as db:
        build_dataset([MM], db, per_task=4, hop_share=0.0, measurer=SyntheticMeasurer(smooth_gflops), progress=False)
    env = gym.make("tensorgym/Matmul-v0", M=32, N=48, K=64, db=str(tmp_path / "ga.db"), backend="replay")
    with pytest.raises(RuntimeError, match="recorded 1-hop neighbour"):
        env.reset(seed=0)
    env.close()


def test_common_layout_gives_every_layer_the_same_spaces(replay_db):
    envs = [TileHopEnv(wl, db=str(replay_db), backend="replay", observation="common") for wl in (MM, CONV_1X1)]
    assert envs[0].observation_space == envs[1].observation_space
    assert envs[0].action_space == envs[1].action_space == gym.spaces.Discrete(2 * len(COMMON_SLOTS))
    layer = TileHopEnv(MM, db=str(replay_db), backend="replay")
    obs, _ = envs[0].reset(seed=1)
    obs_layer, _ = layer.reset(seed=1)
    assert envs[0].observation_space.contains(obs)
    space = envs[0].search_space
    slots = [COMMON_SLOTS.index(("matmul" if c.level >= 0 else "*", c.knob, c.level)) for c in space.coordinates]
    assert np.allclose(obs[slots], obs_layer[:space.encoding_size])  # the same encoding, in fixed slots
    mask = envs[0].action_masks()
    absent = np.ones(len(COMMON_SLOTS), dtype=bool)
    absent[slots] = False
    assert not mask.reshape(-1, 2)[absent].any()  # slots this layer lacks are always masked
    shape = obs[-len(SHAPE_FEATURES):]
    assert shape[SHAPE_FEATURES.index("op_matmul")] == 1.0 and shape[SHAPE_FEATURES.index("log2_matmul.k")] == 0.5
    for env in (*envs, layer):
        env.close()
    with pytest.raises(InvalidArgumentError, match="layout"):
        TileHopEnv(MM, db=str(replay_db), layout="diagonal")


def test_an_env_over_a_tuner_charges_every_trial(replay_db):
    with Database(replay_db) as db:
        space = TilesSpace(MM, local_cpu())
        tuner = Tuner(Evaluator(space, db, None), budget=5)

        class Records(Evaluator):  # an evaluator of one's own: the Tuner's budgeted view
            def __init__(self):
                self.space, self.database, self.measured = space, db, 0

            def lookup(self, config):
                return tuner.seen(config) or tuner.evaluator.lookup(config)

            def evaluate(self, configs):
                return tuner.measure(configs)

        env = TileHopEnv(MM, evaluator=Records(), backend="replay")
        assert env.search_space is space
        _, info = env.reset(seed=0)
        assert len(tuner.trials) == 1  # the start is a trial
        rng = np.random.default_rng(0)
        while len(tuner.trials) < 5:
            _, _, _, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
            if truncated:
                _, info = env.reset()
        assert {t.config for t in tuner.trials} <= {r.config for r in db.records(MM.key)}
        with pytest.raises(InvalidArgumentError, match="evaluator"):
            TileHopEnv(CONV_1X1, evaluator=Records())
        with pytest.raises(InvalidArgumentError, match="space options"):
            TileHopEnv(MM, evaluator=Records(), unroll_choices=(0, 16))
