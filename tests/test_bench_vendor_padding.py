"""bench/vendor_padding.py's share of a padded convolution's taps that read the input."""

from __future__ import annotations

import pytest
from bench_scripts import bench_script

from tensorgym.workloads import conv2d


@pytest.fixture(scope="module")
def bench():
    return bench_script("vendor_padding")


def test_the_valid_tap_share_counts_the_zero_border_a_padded_convolution_reads(bench):
    # 7x7 output of a 3x3 kernel with padding 1: each border row and column loses one tap of three
    assert bench.valid_tap_share(conv2d(1, 8, 7, 7, 8, 3, 3, 1, 1)) == pytest.approx((19 / 21) ** 2)
    assert bench.valid_tap_share(conv2d(1, 8, 7, 5, 8, 3, 3, 1, 1)) == pytest.approx(19 / 21 * 13 / 15)
    assert bench.valid_tap_share(conv2d(1, 8, 9, 9, 8, 3, 3, 1, 0)) == 1.0  # no padding: every tap is real
    assert bench.valid_tap_share(conv2d(1, 8, 7, 7, 8, 1, 1, 1, 0)) == 1.0
