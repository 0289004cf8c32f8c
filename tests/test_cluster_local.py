"""The local test cluster's start-up: a worker node that dies while starting is started again; the head is not."""

from __future__ import annotations

import pytest

from tensorgym.cluster.local import NODE_RESTARTS, LocalRayCluster


class FakeNode:
    """A `ray start` process: running (returncode None) or exited with a code."""

    _next_pid = 10**7  # no process group of this machine: killpg finds none

    def __init__(self, returncode: int | None = None):
        FakeNode._next_pid += 1
        self.pid = FakeNode._next_pid
        self.returncode = returncode

    def poll(self):
        return self.returncode


@pytest.fixture
def cluster(monkeypatch):
    local = LocalRayCluster(nodes=2, start_timeout=5.0)
    started: list[int] = []

    def start_node(index):
        started.append(index)
        return FakeNode()

    monkeypatch.setattr(local, "_start_node", start_node)
    yield local, started
    local.nodes = []
    local.stop()


def test_a_worker_node_that_exits_while_starting_is_started_again(cluster):
    local, started = cluster
    local.nodes = [FakeNode(), FakeNode(returncode=1)]
    polls = iter([False, True])
    local._wait(lambda: next(polls), "2 nodes", restarts=NODE_RESTARTS)
    assert started == [1] and local.nodes[1].poll() is None


def test_a_worker_that_keeps_failing_or_a_failed_head_is_an_error_quoting_the_nodes_log(cluster):
    local, _ = cluster
    (local.root / "node0.log").write_text("".join(f"line {i}\n" for i in range(40)) + "port 6379 in use\n")
    local.nodes = [FakeNode(returncode=1), FakeNode()]
    with pytest.raises(RuntimeError, match=r"ray node 0 exited with code 1; its log ends:\n(.|\n)*port 6379 in use"):
        local._wait(lambda: False, "2 nodes", restarts=NODE_RESTARTS)
    local.nodes = [FakeNode(), FakeNode(returncode=1)]
    local._start_node = lambda index: FakeNode(returncode=1)  # every start fails
    with pytest.raises(RuntimeError, match=r"ray node 1 exited with code 1; its log ends:\n\(no log\)"):
        local._wait(lambda: False, "2 nodes", restarts=NODE_RESTARTS)
