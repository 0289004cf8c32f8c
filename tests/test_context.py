"""The tuning context: what it owns and closes, sharing one measurer and database between envs, the process's
default context per target (make_vec's envs), and fork safety. Synthetic measurers: nothing is compiled."""

from __future__ import annotations

import copy
import os
import sqlite3

import gymnasium as gym
import numpy as np
import pytest
from fakes import SyntheticMeasurer, synthetic_default_measurers

import tensorgym
from tensorgym.context import DEFAULT_CONTEXTS, ContextClosed, TuningContext
from tensorgym.database import Database
from tensorgym.envs import NetworkEnv
from tensorgym.errors import InvalidArgumentError, InvalidTypeError, TensorgymError
from tensorgym.evaluator import LiveEvaluator, ReplayEvaluator
from tensorgym.networks import Network
from tensorgym.target import resolve_target
from tensorgym.workloads import matmul

ID, SHAPE = "tensorgym/Matmul-v0", dict(M=48, N=64, K=32)
MM = matmul(48, 64, 32)


class ClosingMeasurer(SyntheticMeasurer):
    """A synthetic measurer that remembers being closed."""

    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture()
def started(monkeypatch) -> list[ClosingMeasurer]:
    """The measurers of the process's default contexts are synthetic; returns those started."""
    return synthetic_default_measurers(monkeypatch, ClosingMeasurer)


def _first_allowed(info) -> int:
    return int(np.flatnonzero(info["action_mask"])[0])


def test_a_context_opens_lazily_and_closes_only_what_it_opened(tmp_path):
    starts: list[ClosingMeasurer] = []
    context = TuningContext(db=tmp_path / "own.db", measurer_factory=lambda t: starts.append(ClosingMeasurer()) or
                            starts[-1])
    assert not (tmp_path / "own.db").exists() and not context.measurer_started  # nothing opened yet
    database, measurer = context.database, context.measurer
    assert (tmp_path / "own.db").exists() and starts == [measurer] and context.measurer is measurer
    assert context.target == resolve_target(None) and context.db_path == str(tmp_path / "own.db")
    context.close()
    assert measurer.closed and context.closed and context.users == 0
    with pytest.raises(sqlite3.ProgrammingError):
        len(database)  # closed: the context opened it
    context.close()  # closing twice does nothing
    with pytest.raises(ContextClosed, match="closed") as caught:
        _ = context.measurer
    assert isinstance(caught.value, TensorgymError) and "\n" not in str(caught.value)

    given_db, given_measurer = Database(":memory:"), ClosingMeasurer()
    with TuningContext.local(db=given_db, measurer=given_measurer) as context:
        assert context.database is given_db and context.measurer is given_measurer and context.measurer_started
    assert not given_measurer.closed and len(given_db) == 0  # still open: the caller's
    given_db.close()


def test_uses_are_counted_and_the_last_close_closes():
    measurer = ClosingMeasurer()
    context = TuningContext(db=":memory:", measurer_factory=lambda target: measurer)
    assert context.share() is context and context.users == 2
    assert context.measurer is measurer
    context.close()
    assert not context.closed and not measurer.closed and context.users == 1
    context.close()
    assert context.closed and measurer.closed


def test_a_replaying_evaluator_starts_no_measurer(tmp_path):
    with TuningContext(db=":memory:", measurer_factory=lambda t: pytest.fail("started a measurer")) as context:
        space = tensorgym.make_env(MM, context=context, backend="replay").search_space
        assert isinstance(context.evaluator(space, replay=True), ReplayEvaluator)
        assert not context.measurer_started


def test_two_envs_given_one_context_share_its_measurer_and_database_and_leave_it_open():
    measurer = ClosingMeasurer()
    with TuningContext.local(db=":memory:", measurer=measurer) as context:
        envs = [tensorgym.make_env(MM, context=context), gym.make(ID, context=context, **SHAPE).unwrapped]
        for env in envs:
            env.reset(seed=0)
            assert env.context is context and env.measurer is measurer and env.database is context.database
            assert isinstance(env.evaluator, LiveEvaluator) and env.evaluator.database is context.database
        measured = len(measurer.measured)
        envs[1].reset(seed=0)  # the first env's start config, found in the one database
        assert len(measurer.measured) == measured and len(context.database) == measured
        for env in envs:
            env.close()
            env.close()
        assert not context.closed and len(context.database) == measured and not measurer.closed


def test_an_env_given_a_context_has_a_spec_of_data(tmp_path):
    with TuningContext.local(db=tmp_path / "spec.db", measurer=SyntheticMeasurer()) as context:
        env = gym.make(ID, context=context, **SHAPE)
        spec = env.spec
        assert "context" not in spec.kwargs and spec.kwargs["db"] == str(tmp_path / "spec.db")
        assert spec.kwargs["target"] == context.target
        copy.deepcopy(spec)
        env.reset(seed=0)
        again = gym.make(spec)  # its own context over the same file
        assert again.unwrapped.context is not context and again.unwrapped.database.path == context.db_path
        assert len(again.unwrapped.database) == len(context.database) >= 1
        again.close()
        env.close()


def test_an_env_refuses_a_context_beside_what_it_holds():
    with TuningContext.local(db=":memory:") as context:
        with pytest.raises(InvalidArgumentError, match="give context= or db=, measurer=, not both"):
            tensorgym.make_env(MM, context=context, db=":memory:", measurer=SyntheticMeasurer())
        with pytest.raises(InvalidArgumentError, match="not both"):
            NetworkEnv(Network.from_pairs("one", [(MM, 1)]), context=context, target="llvm")
    with pytest.raises(InvalidTypeError, match="TuningContext"):
        tensorgym.make_env(MM, context="llvm")


def test_shared_contexts_measure_with_the_default_context_of_their_target(tmp_path, started):
    first = TuningContext.shared(db=tmp_path / "a.db")
    second = TuningContext.shared(db=tmp_path / "b.db")
    idle = TuningContext.shared(db=":memory:")
    assert DEFAULT_CONTEXTS.get() is None  # nothing has measured: no default context, no measurer
    assert first.measurer is second.measurer is started[0] and len(started) == 1
    assert first.database is not second.database
    default = DEFAULT_CONTEXTS.get()
    assert default.users == 2  # the two that measured
    idle.close()
    first.close()
    assert default.users == 1 and not started[0].closed
    second.close()
    assert default.closed and started[0].closed and DEFAULT_CONTEXTS.get() is None
    third = TuningContext.shared(db=":memory:")
    assert third.measurer is started[1]  # a new default context, a new measurer
    third.close()
    assert started[1].closed


def test_make_vec_envs_given_one_context_share_it(tmp_path):
    measurer = SyntheticMeasurer()
    with TuningContext.local(db=tmp_path / "vec.db", measurer=measurer) as context:
        vec = gym.make_vec(ID, num_envs=3, vectorization_mode="sync", context=context, **SHAPE)
        _, info = vec.reset(seed=0)
        assert all(env.unwrapped.context is context for env in vec.envs)
        vec.step(np.array([int(np.flatnonzero(mask)[0]) for mask in info["action_mask"]]))
        assert len(measurer.measured) == len(context.database) >= 3
        vec.close()
        assert not context.closed


def test_make_vec_envs_without_a_context_share_the_default_measurer(tmp_path, started):
    vec = gym.make_vec(ID, num_envs=3, vectorization_mode="sync", db=str(tmp_path / "v.db"), **SHAPE)
    vec.reset(seed=0)
    assert len(started) == 1 and all(env.unwrapped.measurer is started[0] for env in vec.envs)
    assert DEFAULT_CONTEXTS.get().users == 3
    vec.close()
    assert started[0].closed and DEFAULT_CONTEXTS.get() is None


def test_at_exit_the_default_contexts_close_whatever_their_uses(started):
    leaked = TuningContext.shared(db=":memory:")
    assert leaked.measurer is started[0]
    DEFAULT_CONTEXTS.close_all()  # what atexit runs
    assert started[0].closed and DEFAULT_CONTEXTS.get() is None
    leaked.close()  # gives its use back to a closed context: nothing happens


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_and_closes_nothing_of_the_parents(tmp_path, started):
    context = TuningContext.shared(db=tmp_path / "fork.db")
    parent_measurer, parent_db = context.measurer, context.database
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code, never through pytest
        code = 1
        try:
            fresh = DEFAULT_CONTEXTS.get() is None  # the parent's default contexts are forgotten
            own = context.measurer is not parent_measurer and context.database is not parent_db
            context.close()
            code = 0 if fresh and own and not parent_measurer.closed else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert context.measurer is parent_measurer and not parent_measurer.closed and len(context.database) == 0
    context.close()
    assert parent_measurer.closed
