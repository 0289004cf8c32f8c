import json
import pickle
from math import comb, prod

import numpy as np
import pytest

from tensorgym.spaces import Config, SpaceError, TilesSpace
from tensorgym.factors import divisors, factorizations
from tensorgym.suites import all_suite_workloads
from tensorgym.target import local_cpu
from tensorgym.workloads import conv2d, matmul


@pytest.fixture(scope="module")
def r5():
    return TilesSpace(all_suite_workloads()["Conv2d-ResNet-R5-v0"], local_cpu())


def test_configs_are_canonical_hashable_and_json_serialisable(r5):
    config = r5.sample(np.random.default_rng(0))
    shuffled = Config(dict(reversed(list(config.to_json().items()))))
    assert shuffled == config and hash(shuffled) == hash(config) and shuffled.key == config.key
    assert Config.from_json(json.dumps(config.to_json())) == config
    assert pickle.loads(pickle.dumps(config)) == config
    assert len({config, shuffled}) == 1


def test_samples_are_valid_and_tiles_multiply_to_the_extent(r5):
    rng = np.random.default_rng(1)
    for _ in range(200):
        config = r5.sample(rng)
        r5.check(config)
        for loop in r5.loops:
            assert prod(config[loop.name]) == loop.extent
            assert config[loop.name][-1] <= r5.max_innermost


def test_sampling_is_deterministic_per_seed(r5):
    a = r5.sample_many(np.random.default_rng(7), 10)
    b = r5.sample_many(np.random.default_rng(7), 10)
    assert a == b and len(set(a)) == 10


def test_factorizations_enumerates_every_ordered_split():
    assert set(factorizations(12, 2, 64)) == {(12, 1), (6, 2), (4, 3), (3, 4), (2, 6), (1, 12)}
    assert all(prod(f) == 3072 and f[-1] <= 64 for f in factorizations(3072, 4, 64))
    assert divisors(28) == (1, 2, 4, 7, 14, 28)


def test_hop_moves_one_coordinate_to_the_next_divisor(r5):
    config = Config({"n": [1, 1, 1, 1], "f": [2, 8, 1, 8], "y": [14, 2, 1, 1], "x": [2, 1, 1, 14],
                     "rc": [8, 16], "ry": [1, 3], "rx": [1, 3], "unroll": 64, "cache_write": 1})
    r5.check(config)
    labels = [c.label for c in r5.coordinates]
    up = r5.hop(config, labels.index("f.3"), +1)  # 8 -> 16, level 0: 2 -> 1
    assert up["f"] == (1, 8, 1, 16)
    down = r5.hop(config, labels.index("rc.1"), -1)  # 16 -> 8, level 0: 8 -> 16
    assert down["rc"] == (16, 8)
    assert r5.hop(config, labels.index("unroll"), +1)["unroll"] == 512
    assert r5.hop(config.replace(unroll=512), labels.index("unroll"), +1) is None  # end of the list
    assert r5.hop(config.replace(x=(1, 2, 1, 14)), labels.index("x.2"), +1) is None  # 2*2*14 does not divide 28


def test_neighbourhood_sizes_follow_the_paper_bound(r5):
    config = r5.sample(np.random.default_rng(3))
    m = len(r5.coordinates)
    for hops in (1, 2, 3):
        neighbours = r5.neighbours(config, hops)
        assert len(neighbours) <= comb(m, hops) * 2 ** hops  # seed 000: C(m, n) * 2^n
        assert config not in neighbours and len(set(neighbours)) == len(neighbours)
        assert all(r5.is_valid(n) for n in neighbours)
    for n in r5.neighbours(config, 1):  # a 1-hop neighbour differs in exactly one coordinate
        diff = [c for c in r5.coordinates if r5.coordinate_index(n, c) != r5.coordinate_index(config, c)]
        assert len(diff) == 1


def test_encoding_is_in_unit_box_and_identifies_configs(r5):
    rng = np.random.default_rng(4)
    configs = r5.sample_many(rng, 50)
    codes = {tuple(r5.encode(c)) for c in configs}
    assert len(codes) == 50
    for c in configs:
        e = r5.encode(c)
        assert e.shape == (r5.encoding_size,) and e.min() >= 0 and e.max() <= 1
        f = r5.normalised_features(c)
        assert f.shape == (len(r5.feature_names),) and f.min() >= 0 and f.max() <= 1


@pytest.mark.parametrize("bad, message", [
    ({"f": [2, 8, 1, 8]}, "missing"),
    ("not json", "JSON"),
])
def test_corrupt_configs_are_rejected(r5, bad, message):
    with pytest.raises(SpaceError, match=message):
        r5.parse(bad)


def test_constraint_violations_are_explained(r5):
    good = r5.sample(np.random.default_rng(5)).to_json()
    with pytest.raises(SpaceError, match="multiply to its extent 128"):
        r5.parse({**good, "f": [2, 8, 1, 7]})
    with pytest.raises(SpaceError, match="list of 4"):
        r5.parse({**good, "f": [128, 1]})
    with pytest.raises(SpaceError, match="unroll"):
        r5.parse({**good, "unroll": 3})
    with pytest.raises(SpaceError, match="ints or lists of ints"):
        r5.parse({**good, "unroll": "64"})
    with pytest.raises(SpaceError, match="unexpected"):
        r5.parse({**good, "vthread": 2})


def test_features_follow_their_documented_formulas():
    space = TilesSpace(matmul(64, 64, 64), local_cpu())
    config = Config({"i": [2, 4, 2, 4], "j": [1, 2, 2, 16], "k": [8, 8], "unroll": 16, "cache_write": 1})
    f = dict(zip(space.feature_names, space.features(config)))
    # L1 block: i 2*4=8, j 2*16=32, k 8 -> 2*8*32*8 FLOPs over (8*8 + 8*32 + 8*32) * 4 bytes
    assert f["oi_l1"] == pytest.approx(2 * 8 * 32 * 8 / ((64 + 256 + 256) * 4))
    # register reuse: A reused over j3=16, B over i3=4, C over the R1 extent 8
    assert f["reg_reuse"] == pytest.approx(1 / (1 / 16 + 1 / 4 + 1 / 8))
    lanes = local_cpu().vector_lanes_fp32
    assert f["ilp"] == 4 * -(-16 // lanes)
    assert f["parallel_balance"] == pytest.approx(1.0)  # 2 x 1 = 2 outer tasks on 2 cores
    assert f["cache_write"] == 1


def test_conv_with_stride_and_awkward_extents():
    space = TilesSpace(conv2d(1, 3, 17, 17, 7, 3, 3, stride=2, padding=1), local_cpu())
    rng = np.random.default_rng(6)
    for config in space.sample_many(rng, 30):
        space.check(config)
        assert config["f"][0] * config["f"][1] * config["f"][2] * config["f"][3] == 7
