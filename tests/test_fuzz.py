"""Property-based fuzzing of every public entry point (hypothesis; strategies in tests/fuzzing.py).

Each test draws calls from good and bad values mixed and asserts what a user relies on:

* a call either succeeds or raises a documented error: a :class:`~tensorgym.errors.TensorgymError`
  (or, for env ids Gymnasium does not know and the env API's order, Gymnasium's own error); the
  command line exits 0, 1 or 2, and on 2 prints one ``error:`` line and no traceback (argparse's
  usage errors are exit 2 too);
* no call hangs (each has a time limit);
* a call that fails leaves no file behind (every call runs in a fresh directory).

The fast suite runs a few dozen derandomized examples per test. ``TENSORGYM_FUZZ=thorough`` runs
many more, randomized (``TENSORGYM_FUZZ=thorough pytest tests/test_fuzz.py``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzzing
from tensorgym.config import Config

settings.register_profile("fast", max_examples=60, derandomize=True, database=None, deadline=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("thorough", max_examples=500, database=None, deadline=None,
                          suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("TENSORGYM_FUZZ", "fast"))

LIMIT_S = 60.0  # no call may take longer (the slowest legitimate ones take a few seconds)


def check(target: str, data) -> None:
    outcome = fuzzing.run_isolated(fuzzing.TARGETS[target], data, limit=LIMIT_S, cli=target == "cli")
    assert outcome.kind != "hang", f"{outcome.call} hung"
    assert outcome.documented, f"{outcome.call} raised {outcome.kind}: {outcome.message}"
    assert not outcome.new_files, f"{outcome.call} failed ({outcome.kind}) and left {outcome.new_files}"


@given(st.data())
def test_configs(data):
    check("config", data)


@given(st.data())
def test_space_methods(data):
    check("space", data)


@given(st.data())
def test_gym_make_and_the_env_api(data):
    check("env", data)


@given(st.data())
def test_tuner_calls(data):
    check("tuner", data)


@given(st.data())
def test_agents(data):
    check("agent", data)


@given(st.data())
def test_database_paths(data):
    check("database", data)


@pytest.mark.filterwarnings("ignore")
@given(st.data())
def test_command_lines(data):
    check("cli", data)


@given(st.data())
def test_valid_configs_are_never_refused(data):
    """The other side of validation: every method of a space takes every config of the space."""
    space = fuzzing.spaces()[data.draw(st.sampled_from(["matmul", "conv"]))]
    config = data.draw(fuzzing.config_like(space))
    if not (isinstance(config, Config) and space.is_valid(config)):
        return
    for method in ("encode", "hop_mask", "features", "scaled_features", "normalised_features", "generic_features",
                   "describe", "info", "candidate_of"):
        getattr(space, method)(config)
    for hops in (1, 2):
        assert all(space.is_valid(n) for n in space.neighbours(config, hops))
    assert space.parse(config.to_json()) == config == space.parse(config.key)
