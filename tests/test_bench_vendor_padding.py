"""bench/vendor_padding.py's share of a padded convolution's taps that read the input."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tensorgym.workloads import conv2d

BENCH = Path(__file__).resolve().parent.parent / "bench" / "vendor_padding.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH.parent))  # the script imports bench/report_header.py
    try:
        spec = importlib.util.spec_from_file_location("vendor_padding", BENCH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH.parent))
    return module


def test_the_valid_tap_share_counts_the_zero_border_a_padded_convolution_reads(bench):
    # 7x7 output of a 3x3 kernel with padding 1: each border row and column loses one tap of three
    assert bench.valid_tap_share(conv2d(1, 8, 7, 7, 8, 3, 3, 1, 1)) == pytest.approx((19 / 21) ** 2)
    assert bench.valid_tap_share(conv2d(1, 8, 7, 5, 8, 3, 3, 1, 1)) == pytest.approx(19 / 21 * 13 / 15)
    assert bench.valid_tap_share(conv2d(1, 8, 9, 9, 8, 3, 3, 1, 0)) == 1.0  # no padding: every tap is real
    assert bench.valid_tap_share(conv2d(1, 8, 7, 7, 8, 1, 1, 1, 0)) == 1.0
