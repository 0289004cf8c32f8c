"""Shared fixtures: one real measurer per test session (its worker processes are reused)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests import tests/fakes.py as `fakes`


@pytest.fixture(scope="session")
def measurer():
    from tensorgym.measure import Measurer

    with Measurer() as m:
        yield m


@pytest.fixture()
def db(tmp_path):
    from tensorgym.database import Database

    with Database(tmp_path / "records.db") as database:
        yield database


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs_isa(*flags): needs these /proc/cpuinfo ISA flags on the target kernels run on "
        "(tensorgym.target.local_cpu(), after TENSORGYM_CPU); skipped, naming the missing flags, elsewhere")


def pytest_runtest_setup(item):
    """The one ISA marker: ``@pytest.mark.needs_isa("avx512_vnni")`` skips where the target lacks a flag."""
    flags = [flag for mark in item.iter_markers(name="needs_isa") for flag in mark.args]
    if not flags:
        return
    from tensorgym.target import local_cpu

    target = local_cpu()
    missing = target.missing_flags(*flags)
    if missing:
        pytest.skip(f"needs ISA {'+'.join(missing)}: {target.label} lacks it")
