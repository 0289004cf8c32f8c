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
