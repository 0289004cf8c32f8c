"""A landscape's fidelity: random search's profile, and a guided search's progress, against the whole space."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from tensorgym.baselines.fidelity import (
    TOLERANCE, landscape_fidelity, random_search_profile, search_fidelity, thinned_bounds,
)
from tensorgym.landscape import Landscape, LandscapeError
from tensorgym.record import Status


def test_random_search_profile_is_the_expected_best_as_a_share():
    # Two configs, 100 and 50: one draw expects 75; many draws almost surely hold the 100.
    one, many = random_search_profile([100.0, 50.0], 100.0, draws=(1, 64))
    assert one == pytest.approx(0.75)
    assert many == pytest.approx(1.0, abs=1e-9)
    with pytest.raises(ValueError, match="positive"):
        random_search_profile([1.0], 0.0)


def test_a_landscape_where_the_agent_stalls_is_not_faithful_for_it():
    # Live, every seed reaches the optimum; on the landscape, half the seeds stall on a plateau at 65 %.
    live = {64: [150.0] * 4, 256: [192.0, 193.0, 192.0, 191.0]}
    landscape = {64: [100.0] * 4, 256: [190.0, 126.0, 193.0, 127.0]}
    f = search_fidelity("ga", live, landscape, best_known=193.5, landscape_optimum=193.5)
    assert f.trials == (64, 256)
    assert f.live[1] == pytest.approx(192.0 / 193.5)
    assert f.landscape[1] == pytest.approx(159.0 / 193.5)
    assert f.live_found == (4, 4) and f.landscape_found == (2, 4)
    assert f.gap > TOLERANCE and not f.faithful


def test_search_fidelity_reads_the_shared_trial_counts_and_refuses_nonsense():
    f = search_fidelity("dgd", {64: [90.0], 128: [95.0]}, {128: [0.95], 256: [1.0]}, best_known=100.0,
                        landscape_optimum=1.0)
    assert f.trials == (128,) and f.gap == pytest.approx(0.0) and f.faithful
    with pytest.raises(ValueError, match="no trial count"):
        search_fidelity("dgd", {64: [1.0]}, {256: [1.0]}, 1.0, 1.0)
    with pytest.raises(ValueError, match="positive"):
        search_fidelity("dgd", {64: [1.0]}, {64: [1.0]}, 0.0, 1.0)


def _graded_landscape(speed, measured=lambda config: True, notes=None, **bounds):
    """The tiny bounded matmul space's landscape (its bounds with ``bounds`` changed) with every config's GFLOP/s
    set by ``speed(config)`` (noise-free); partial, with ``notes``, if only the ``measured`` configs are."""
    from test_landscape_data import BOUNDS, filled_database, synthetic_records, tiny_space

    from tensorgym.landscape import export_landscape

    space = tiny_space({**BOUNDS, **bounds})
    records = []
    for record in filter(lambda r: measured(r.config), synthetic_records(space)):
        latency = space.workload.gflops(1.0) / speed(record.config)  # seconds for that many GFLOP/s
        records.append(dataclasses.replace(record, status=Status.OK, error="", latency_s=latency, samples=(latency,),
                                           gflops=speed(record.config), run_s=0.1, wall_s=0.2))
    with filled_database(space, records) as db:
        return export_landscape(db, space, llvm_version="test", allow_partial=True, notes=notes)


@functools.cache
def _optimum():
    from test_landscape_data import tiny_space

    return next(c for c in tiny_space().configs() if c["i"][3] == 2)


def _speed(config):
    """An innermost i tile of 4 is good (80); the first config with 2 is the best (110); the rest make 10-50."""
    return 110.0 if config == _optimum() else {1: 10.0, 2: 50.0, 4: 80.0}[config["i"][3]] + config["k"][1]


def test_thinning_drops_the_values_that_make_the_landscape_easy_and_keeps_the_optimum():
    land = _graded_landscape(_speed)
    sample = land.narrowed({"i.3": (1, 2)})  # the whole space, where a tile of 4 is as rare as the optimum
    assert landscape_fidelity(land, sample).gap > TOLERANCE
    bounds, steps = thinned_bounds(land, sample)
    assert [(s.label, s.value) for s in steps] == [("i.3", 4)] and bounds["i.3"] == [1, 2]
    thin = land.narrowed(bounds)
    assert steps[0].configs == len(thin) == len(sample) and steps[0].gap == pytest.approx(0.0)
    assert thin.optimum.config == land.optimum.config  # the optimum's values stay


def test_thinning_drops_two_values_at_once_where_each_alone_widens_the_gap():
    # Beside the whole space's unroll 0 and 64, the landscape keeps 16, all near-optimal kernels, and 512, all
    # failing ones: dropping either alone leaves it further from the whole space, both together leave it exact.
    def speed(config):
        unroll = config["unroll"]
        return {16: 90.0, 512: 0.5}.get(unroll) or {1: 10.0, 2: 30.0, 4: 100.0}[config["i"][3]] * (
            1.0 if unroll == 0 else 0.5)

    unrolls, draws = (0, 16, 64, 512), (2, 8, 32)
    land = _graded_landscape(speed, unroll=unrolls)
    sample = land.narrowed({"unroll": (0, 64)})
    gap = landscape_fidelity(land, sample, draws).gap
    for dropped in (16, 64, 512):
        alone = land.narrowed({"unroll": tuple(u for u in unrolls if u != dropped)})
        assert landscape_fidelity(alone, sample, draws).gap > gap
    bounds, steps = thinned_bounds(land, sample, draws)
    assert [(s.label, s.value) for s in steps] == [("unroll", 16), ("unroll", 512)] and bounds["unroll"] == [0, 64]
    assert steps[-1].configs == len(sample) and steps[-1].gap == pytest.approx(0.0)


def test_thinning_never_drops_the_optimums_value_nor_a_coordinates_second_and_stops_there():
    land = _graded_landscape(_speed)
    twos = land.narrowed({"i.3": (2,)})  # matched only by keeping the optimum's tile of 2 alone
    bounds, steps = thinned_bounds(land, twos)
    assert [(s.label, s.value) for s in steps] == [("i.3", 4)] and steps[0].gap > TOLERANCE
    assert bounds["i.3"] == [1, 2]  # the optimum's 2 stays, and so does a second value
    assert all(len(bounds[c.label]) == len(c.choices) for c in land.space().coordinates if c.label != "i.3")


def test_a_partial_landscape_is_rated_as_an_estimate_against_its_anchor_searchs_best():
    # Half the configs measured, the optimum (110) not among them: its anchor search found it, so the shares are of
    # 110, not of the best measured so far, which would read the space easier than it is.
    whole = _graded_landscape(_speed)
    half = _graded_landscape(_speed, measured=lambda config: config != _optimum() and config["k"][1] == 1,
                             notes={"anchor_gflops": 110.0})
    assert not half.complete and len(half) == len(whole) // 2 - 1 and half.scores.max() < 110.0
    f = landscape_fidelity(half, whole)
    assert f.landscape_optimum == 110.0
    assert f.landscape == pytest.approx(random_search_profile(half.scores, 110.0))
    assert landscape_fidelity(whole, whole).landscape_optimum == 110.0  # a whole landscape: its own optimum
    with pytest.raises(LandscapeError, match="partial .* measure the rest first"):
        thinned_bounds(half, whole)  # an estimate is rated, not thinned


def test_a_representative_landscape_is_left_as_it_is_and_samples_are_refused():
    land = _graded_landscape(lambda config: 1.0 + config["i"][3] + config["unroll"] / 16)
    bounds, steps = thinned_bounds(land, land)
    assert steps == [] and land.narrowed(bounds).configs == land.configs
    sample = dataclasses.replace(land.metadata, space_options={})
    with pytest.raises(LandscapeError, match="bounded tiles space"):
        thinned_bounds(Landscape(sample, land.to_json()["columns"]), land)
