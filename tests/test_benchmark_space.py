"""Bounded tiles spaces and the benchmark sub-spaces that landscapes measure (no kernel is built)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from tensorgym.catalog import make_agent, make_space
from tensorgym.spaces.base import SpaceError
from tensorgym.spaces.tiles import benchmark as tiles_benchmark
from tensorgym.spaces.tiles.benchmark import (MIN_SHARE_OF_MAX, benchmark_bounds, benchmark_space,
                                             coordinate_importance, stratified, uniform_marginals, with_path_to)
from tensorgym.spaces.tiles.space import TilesSpace
from tensorgym.target import constructed_cpu
from tensorgym.tuner import Tuner
from tensorgym.workloads import conv2d, matmul

from fakes import SYMBOLIC_CPU, SyntheticEvaluator, peak_at

BOUNDS = {"i.1": (2, 4), "i.3": (4, 8), "j.3": (16, 32), "k.1": (4, 8), "unroll": (0, 64)}


def bounded() -> TilesSpace:
    return make_space("tiles", matmul(64, 64, 64, name="mm64"), SYMBOLIC_CPU, bounds=BOUNDS)


def test_a_bounded_space_lists_exactly_its_valid_configs():
    space = bounded()
    configs = space.configs()
    assert len(configs) == len(set(configs)) == space.tiling.count()
    full = TilesSpace(space.workload, SYMBOLIC_CPU)
    for config in configs:
        full.check(config)  # a config of the full space, so the two share records
        space.check(config)
        assert config["i"][1] in (2, 4) and config["i"][3] in (4, 8) and config["unroll"] in (0, 64)
    # Counted by hand: i levels 1-3 = {2,4} x {1..64 divisors} x {4,8} with the product dividing 64, etc.
    rng = np.random.default_rng(0)
    outside = next(c for c in (full.sample(rng) for _ in range(1000)) if not space.is_valid(c))
    with pytest.raises(SpaceError, match="outside the bounded space|must be one of"):
        space.check(outside)


def test_moves_samples_and_hops_stay_inside():
    space = bounded()
    members = set(space.configs())
    rng = np.random.default_rng(1)
    for _ in range(50):
        config = space.sample(rng)
        assert config in members
        assert set(space.neighbours(config)) <= members
        assert set(space.neighbours(config, hops=2)) <= members
        mask = space.hop_mask(config)
        for i in range(len(space.coordinates)):
            for d, allowed in ((1, mask[2 * i]), (-1, mask[2 * i + 1])):
                hopped = space.hop(config, i, d)
                assert (hopped is not None) == allowed
                assert hopped is None or hopped in members
    assert all(len(c.choices) <= len(dict(BOUNDS).get(c.label, c.choices)) for c in space.coordinates)


def test_a_bounded_space_survives_pickling_and_rebuilds_from_its_options():
    space = bounded()
    again = pickle.loads(pickle.dumps(space))
    assert again.bounds == space.bounds and again.configs() == space.configs()
    rebuilt = make_space("tiles", space.workload, SYMBOLIC_CPU, **space.options)
    assert rebuilt.configs() == space.configs()


@pytest.mark.parametrize("bounds, message", [
    ({"q.1": (1,)}, "not a coordinate"),
    ({"i.1": (3,)}, "not among its choices"),
    ({"i.1": ()}, "non-empty"),
    ({"i.1": (64,), "i.2": (64,)}, "no tiling"),
])
def test_bad_bounds_are_refused_in_one_line(bounds, message):
    with pytest.raises(SpaceError, match=message) as info:
        make_space("tiles", matmul(64, 64, 64), SYMBOLIC_CPU, bounds=bounds)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("agent", ["random", "ga", "dgd", "optuna", "ga-random-model", "dgd-random-model"])
def test_every_search_agent_stays_inside_a_bounded_space(agent):
    space = bounded()
    members = set(space.configs())
    evaluator = SyntheticEvaluator(space, peak_at(space, space.sample(np.random.default_rng(5))))
    options = {"batch_size": 8, "population": 64} if agent.startswith("ga") else {}
    if agent.startswith("dgd"):
        options = {"initial_samples": 8}
    Tuner(evaluator, budget=40).run(make_agent(agent, **options), seed=0)
    assert evaluator.requests and set(evaluator.requests) <= members


@pytest.mark.parametrize("profile, lanes", [("znver4", 16), ("znver3", 8)])
def test_the_favoured_rule_favours_whole_vectors_and_fits_the_size(profile, lanes):
    target = constructed_cpu(profile)
    space = benchmark_space(matmul(512, 3072, 768, name="M3"), target, max_configs=3000, rule="favoured")
    assert 0 < len(space.configs()) <= 3000
    assert all(j % lanes == 0 for j in space.bounds["j.3"])  # the vectorised loop's innermost tile
    assert space.bounds["i.2"][0] == 1  # no S2 tile is the first choice: an S2 tile spills the accumulators
    conv = benchmark_space(conv2d(1, 128, 28, 28, 128, 3, 3, 1, 1), target, max_configs=2500, rule="favoured")
    assert 0 < len(conv.configs()) <= 2500
    assert benchmark_bounds(TilesSpace(conv.workload, target), 2500, rule="favoured") == conv.bounds  # deterministic


def test_stratified_values_are_the_middles_of_equal_strata_of_uniform_draws():
    drawn = [1] * 10 + [2] * 30 + [4] * 40 + [8] * 20
    choices = [1, 2, 4, 8, 16]
    assert stratified(drawn, choices, 2) == [2, 4]  # the middles of the lower and upper halves
    assert stratified(drawn, choices, 3) == [2, 4, 8]
    assert stratified(drawn, choices, 2, must=16) == [2, 16]  # the anchor's value replaces the nearest
    assert stratified([4] * 90 + [16] * 10, choices, 2) == [4, 16]  # strata sharing a value: the most frequent others
    assert stratified(drawn, choices, 9) == choices


def test_the_stratified_rule_keeps_the_whole_spaces_typical_values_and_fits_the_size():
    target = constructed_cpu("znver4")
    workload = conv2d(1, 128, 28, 28, 128, 3, 3, 1, 1)
    space = benchmark_space(workload, target, max_configs=2500)
    assert 0 < len(space.configs()) <= 2500
    assert benchmark_bounds(TilesSpace(workload, target), 2500) == space.bounds  # deterministic
    drawn = uniform_marginals(TilesSpace(workload, target))
    for coord in TilesSpace(workload, target).coordinates:  # every kept value is one a uniform draw often takes
        kept = space.bounds[coord.label]
        assert all(drawn[coord.label].count(v) > 0 for v in kept), (coord.label, kept)
    with pytest.raises(SpaceError, match="rule"):
        benchmark_space(workload, target, rule="best")


def test_the_path_rule_adds_the_steps_between_the_anchor_and_its_nearest_kept_values():
    choices = [1, 2, 4, 8, 16, 32, 64]
    assert with_path_to([1, 2, 16], choices, 16) == [1, 2, 4, 8, 16]  # C7's register tile: 4 and 8 were missing
    assert with_path_to([1, 8, 64], choices, 8) == [1, 2, 4, 8, 16, 32, 64]  # both sides
    assert with_path_to([2, 4], choices, 4) == [2, 4]  # nothing missing
    assert with_path_to([16], choices, 16) == [16]  # a coordinate of one value stays one


def test_the_stratified_path_space_has_no_hole_next_to_the_anchor_and_keeps_its_size():
    target = constructed_cpu("znver4")
    workload = conv2d(1, 128, 28, 28, 256, 1, 1, 2, 0)  # ResNet-18 C7's shape
    full = TilesSpace(workload, target)
    anchor = full.sample(np.random.default_rng(5))
    plain = benchmark_bounds(full, 20000, anchor=anchor)
    path = benchmark_bounds(full, 20000, anchor=anchor, rule="stratified-path")
    assert path != plain  # this anchor leaves holes next to it in the stratified grid
    for c in full.coordinates:
        order = list(c.choices)
        here = order.index(c.value_of(anchor))
        kept = sorted(order.index(v) for v in path[c.label])
        below = max((i for i in kept if i < here), default=here)
        above = min((i for i in kept if i > here), default=here)
        assert kept[kept.index(below):kept.index(above) + 1] == list(range(below, above + 1)), (c.label, kept)
    space = benchmark_space(workload, target, max_configs=20000, anchor=anchor, rule="stratified-path")
    assert anchor in set(space.configs()) and len(space.configs()) <= 20000


def test_benchmark_space_refuses_a_size_it_cannot_meet():
    with pytest.raises(SpaceError, match="max_configs"):
        benchmark_space(matmul(64, 64, 64), SYMBOLIC_CPU, max_configs=0)


def test_an_anchor_config_is_always_inside_its_benchmark_space():
    target = constructed_cpu("znver4")
    workload = conv2d(1, 128, 28, 28, 256, 1, 1, 2, 0)  # ResNet-18 C7's shape: 14 x 14 outputs, one vector a row
    full = TilesSpace(workload, target)
    rng = np.random.default_rng(3)
    for _ in range(5):
        anchor = full.sample(rng)
        space = benchmark_space(workload, target, max_configs=2000, anchor=anchor)
        assert anchor in set(space.configs()) and len(space.configs()) <= 2000
    with pytest.raises(SpaceError):
        benchmark_space(workload, target, anchor=full.sample(rng).replace(unroll=3))


def test_importance_goes_to_the_coordinates_the_best_kernels_agree_on_and_buys_them_values():
    target = constructed_cpu("znver4")
    workload = conv2d(1, 128, 28, 28, 128, 3, 3, 1, 1)
    full = TilesSpace(workload, target)
    configs = full.sample_many(np.random.default_rng(0), 400)
    # Only the vectorised loop's innermost tile decides speed: the best kernels all take one value of it.
    label = next(c.label for c in full.coordinates if c.knob == "x" and c.level == full.spatial_levels - 1)
    favourite = configs[0]["x"][-1]
    scores = [100.0 if c["x"][-1] == favourite else 10.0 * (i % 7) for i, c in enumerate(configs)]
    importance = coordinate_importance(full, configs, scores)
    assert importance[label] == max(importance.values()) and importance[label] > 0.5
    others = [c.label for c in full.coordinates if c.knob != "x"]  # x's other levels depend on its innermost tile
    assert all(importance[k] < 0.3 for k in others), {k: importance[k] for k in others}
    weighted = benchmark_bounds(full, 2500, anchor=configs[0], importance=importance)
    plain = benchmark_bounds(full, 2500, anchor=configs[0])
    assert len(weighted[label]) > len(plain[label]) and favourite in weighted[label]
    # More importance choices: the important coordinate keeps at least as many values (a harder space).
    wider = benchmark_bounds(full, 2500, anchor=configs[0], importance=importance, importance_choices=15)
    assert len(wider[label]) >= len(weighted[label]) and configs[0]["x"][-1] in wider[label]
    with pytest.raises(SpaceError, match="importance_choices"):
        benchmark_bounds(full, 2500, anchor=configs[0], importance=importance, importance_choices=0)
    with pytest.raises(SpaceError, match="importance"):
        benchmark_bounds(full, 2500, rule="favoured", importance=importance)
    with pytest.raises(SpaceError, match="at least 20"):
        coordinate_importance(full, configs[:5], scores[:5])


def test_importance_from_the_whole_sample_makes_every_coordinate_alike_and_shares_values_out_evenly():
    target = constructed_cpu("znver4")
    workload = conv2d(1, 128, 28, 28, 128, 3, 3, 1, 1)
    full = TilesSpace(workload, target)
    configs = full.sample_many(np.random.default_rng(0), 400)
    scores = [100.0 if c["x"][-1] == configs[0]["x"][-1] else 10.0 * (i % 7) for i, c in enumerate(configs)]
    alike = coordinate_importance(full, configs, scores, top=1.0)
    assert set(alike.values()) == {0.0}
    bounds = benchmark_bounds(full, 2500, anchor=configs[0], importance=alike)
    space = TilesSpace(workload, target, bounds=bounds)
    assert 2500 // MIN_SHARE_OF_MAX <= len(space.configs()) <= 2500 and configs[0] in set(space.configs())
    kept = [len(bounds[c.label]) for c in full.coordinates if len(bounds[c.label]) < len(c.choices)]
    assert max(kept) - min(kept) <= 2, kept  # grown in turn from the anchor's value, none favoured
    for top in (0.0, 1.5):
        with pytest.raises(SpaceError, match="importance share"):
            coordinate_importance(full, configs, scores, top=top)


def test_a_space_whose_importance_sits_in_one_small_coordinate_still_holds_half_its_size(monkeypatch):
    """All importance in one coordinate of four values: without a floor the space kept one value of every other
    coordinate (a few configs, where random search finds the optimum at once)."""
    target = constructed_cpu("znver4")
    workload = conv2d(1, 128, 28, 28, 128, 3, 3, 1, 1)
    full = TilesSpace(workload, target)
    anchor = full.sample(np.random.default_rng(1))
    importance = {c.label: (1.0 if c.knob == "unroll" else 0.0) for c in full.coordinates}
    bounds = benchmark_bounds(full, 2000, anchor=anchor, importance=importance)
    space = TilesSpace(workload, target, bounds=bounds)
    assert 2000 // MIN_SHARE_OF_MAX <= len(space.configs()) <= 2000
    assert anchor in set(space.configs())
    assert len(bounds["unroll"]) == 4  # the important coordinate keeps every value
    monkeypatch.setattr(tiles_benchmark, "MIN_SHARE_OF_MAX", 10**9)  # no floor: the space the rule kept before
    assert len(TilesSpace(workload, target, bounds=benchmark_bounds(full, 2000, anchor=anchor,
                                                                    importance=importance)).configs()) < 100
