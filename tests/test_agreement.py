"""A landscape's ranking of agents against the live one: separated pairs, inversions, Kendall's tau."""

from __future__ import annotations

import pytest

from tensorgym.baselines.agreement import agreement

LIVE = {  # GA clearly above random; DGD between, overlapping both
    "random": {64: [150, 152, 149, 151, 150], 256: [170, 172, 171, 169, 170]},
    "ga": {64: [170, 172, 171, 169, 170], 256: [194, 195, 193, 194, 196]},
    "dgd": {64: [140, 180, 160, 150, 175], 256: [160, 200, 185, 170, 190]},
}


def test_a_landscape_that_orders_like_live_inverts_nothing():
    landscape = {"random": {64: [0.8], 256: [0.9]}, "ga": {64: [0.95], 256: [0.99]}, "dgd": {64: [0.9], 256: [0.95]}}
    result = agreement(LIVE, landscape, (64, 256))
    separated = {(p.better, p.worse, p.trials) for p in result.separated}
    assert ("ga", "random", 64) in separated and ("ga", "random", 256) in separated
    assert not any(p.better == "dgd" or p.worse == "dgd" for p in result.separated)  # its interval is wide
    assert result.inverted == []
    assert result.tau[256] == pytest.approx(1.0)


def test_a_landscape_that_puts_random_first_inverts_the_separated_pair():
    landscape = {"random": {256: [0.99, 0.98]}, "ga": {256: [0.90, 0.91]}, "dgd": {256: [0.95]}}
    result = agreement(LIVE, landscape, (256,))
    assert [(p.better, p.worse) for p in result.inverted] == [("ga", "random")]
    assert result.tau[256] == pytest.approx(-1.0)  # fully reversed
    # Pairs live does not separate are never counted as inverted, whatever the landscape says.
    assert all(p.separated for p in result.inverted)


def test_agents_missing_on_the_landscape_are_compared_live_only():
    result = agreement(LIVE, {"ga": {256: [0.9]}}, (256,))
    assert result.inverted == [] and result.tau[256] is None
    assert all(p.landscape_means is None for p in result.pairs)
