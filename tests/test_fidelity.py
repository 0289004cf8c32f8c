"""A landscape's fidelity: random search's profile, and a guided search's progress, against the whole space."""

from __future__ import annotations

import pytest

from tensorgym.baselines.fidelity import TOLERANCE, random_search_profile, search_fidelity


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
