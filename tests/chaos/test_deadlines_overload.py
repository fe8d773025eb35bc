"""Deadlines (a late call fails typed, its late answer is discarded) and overload (bounded)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from polybus.client import dispatch
from polybus.client.promise import wait
from polybus.errors import BusyError, CallTimeoutError

from .conftest import Harness


@pytest.fixture(scope="module")
def _one_replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """A registry and one worker (slow's pool of 2: the replica runs two calls at once),
    started once for the tests below that neither change nor end it."""
    h = Harness(tmp_path_factory.mktemp("one_replica"))
    try:
        h.app("modules.server.replication=1", "modules.server.define.slow.pool=2")
        h.embedded_registry()
        h.workers(1)
        yield h
    finally:
        h.close()


@pytest.fixture
def one_replica(_one_replica: Harness) -> Iterator[Harness]:
    """The shared worker, its executions counted from this test's start (its side file
    emptied: the worker appends to it), and the sessions the test made closed after it.
    (Each test that uses it waits for its calls to end, late ones too.)"""
    h = _one_replica
    assert h.procs["w0"].poll() is None, h.stderr("w0")
    for f in h.side.glob("*.log"):
        os.truncate(f, 0)
    try:
        yield h
    finally:
        sessions, h.sessions = h.sessions, []
        for session in sessions:
            session.close()


@pytest.mark.parametrize("style", ["sync", "async"])
def test_deadline_fails_typed_and_late_answer_is_discarded(one_replica: Harness,
                                                           style: str) -> None:
    app = one_replica.app("modules.server.replication=1", "modules.server.define.slow.pool=2",
                          f"modules.client.use.slow.callstyle={style}")
    session = one_replica.session(app)
    with pytest.raises(CallTimeoutError, match=r"within 0\.5 s") as info:
        wait(session.call("slow", (1, 1.2), {}))
    assert info.value.call == "slow(1, 1.2)"  # (which call: by its arguments)
    # (raised at all: the deadline came before the answer, which takes 1.2 s)
    assert wait(session.call("slow", (2, 0.0), {})) == 2
    deadline = time.monotonic() + 5
    while one_replica.executions("done")[1] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert one_replica.executions("done")[1] == 1  # the late answer was produced ...
    assert [wait(session.call("slow", (i, 0.0), {})) for i in range(3, 8)] == [3, 4, 5, 6, 7]
    link = session.links["server"][0]
    assert not link.outstanding  # ... and discarded: nothing waits for it


@pytest.mark.parametrize("style", ["async", "async-demand(2)", "aggregate"])
def test_a_deadline_counts_from_the_send_not_from_the_wait(one_replica: Harness,
                                                           style: str) -> None:
    """``timeout`` counts from when the call is handed to its replica: a wait begun
    after the deadline fails at once if the answer is not here (slow(1, 0.9) answers
    0.9 s after the call, past its 0.5 s deadline, though within 0.5 s of a wait begun at
    0.6 s: before, that wait took the answer); an answer already here when a late wait
    begins is taken (it may well have come in time)."""
    use = ('{callstyle="async", aggregate=2, linger="1ms"}' if style == "aggregate"
           else f'{{callstyle="{style}"}}')
    app = one_replica.app("modules.server.replication=1", "modules.server.define.slow.pool=2",
                          f"modules.client.use.slow={use}")
    session = one_replica.session(app)
    late = session.call("slow", (1, 0.9), {})
    time.sleep(0.6)
    with pytest.raises(CallTimeoutError, match=r"no answer from slow within 0\.5 s"):
        wait(late)
    quick = session.call("slow", (2, 0.0), {})
    time.sleep(0.6)  # (its answer comes at once; nothing reads it until the wait)
    assert wait(quick) == 2
    deadline = time.monotonic() + 5
    while one_replica.executions("done")[1] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert one_replica.executions("done")[1] == 1  # it ran; its answer was dropped
    assert wait(session.call("slow", (3, 0.0), {})) == 3


def test_a_call_held_at_the_client_begins_its_count_when_written(one_replica: Harness) -> None:
    """async-demand holds a second call for a busy replica, to be written with the next;
    a program away longer than the timeout then waits: the call is written then, and
    its count begins there (it failed unsent, then ran for nothing)."""
    app = one_replica.app("modules.server.replication=1", "modules.server.define.slow.pool=2",
                          'modules.client.use.slow={callstyle="async-demand(2)"}')
    session = one_replica.session(app)
    first, second = session.call("slow", (1, 0.0), {}), session.call("slow", (2, 0.0), {})
    assert len(session.links["server"][0].held) == 1  # (the second, held)
    time.sleep(0.6)
    assert wait(second) == 2 and wait(first) == 1


def test_a_call_put_back_after_its_replica_died_begins_its_count_again(
        harness: Harness) -> None:
    """Its replica killed while the program is away, a call is re-sent by the late wait
    to the other replica; that wait must then wait for it (it gave up on it at once,
    and the other replica ran it for nothing)."""
    app = harness.app("modules.server.replication=2", "modules.server.define.slow.pool=2",
                      'modules.client.use.slow={callstyle="async"}')
    harness.embedded_registry()
    harness.workers(2)
    session = harness.session(app)
    p = session.call("slow", (1, 0.2), {})
    victim = p._rec.link.name
    time.sleep(0.05)
    harness.kill(next(k for k in harness.procs if k in victim))
    time.sleep(0.6)
    assert wait(p) == 1


def test_looking_at_done_leaves_an_open_batch_open(one_replica: Harness) -> None:
    """A look at ``p.done`` takes in answers; it must not close the open aggregated batch
    (a program looking after each call sent eight batches of one)."""
    app = one_replica.app("modules.server.replication=1",
                          'modules.client.use.square={callstyle="async", aggregate=8, linger="30s"}')
    session = one_replica.session(app)
    ps = []
    for i in range(8):
        ps.append(session.call("square", (i, 0.0), {}))
        if i < 7:  # (the eighth call closes the batch itself: its answer may be in by then)
            assert not ps[0].done
    assert len({id(p._rec) for p in ps}) == 1
    assert [wait(p) for p in ps] == [i * i for i in range(8)]


@pytest.mark.parametrize("style", ["sync", "async", "async-demand(2)", "aggregate"])
def test_done_turns_true_in_a_loop_that_only_looks(one_replica: Harness, style: str) -> None:
    """``p.done`` takes in the answers already here: a program polling it sees its call
    answered without any wait (before, nothing read the answer and the loop never ended)."""
    use = ('{callstyle="async", aggregate=4, linger="1ms"}' if style == "aggregate"
           else f'{{callstyle="{style}"}}')
    app = one_replica.app("modules.server.replication=1", f"modules.client.use.square={use}")
    session = one_replica.session(app)
    p = session.call("square", (7, 1.0), {})
    if style == "sync":
        assert p == 49  # a sync call answers at once: no promise to look at
        return
    give_up_at = time.monotonic() + 10
    while not p.done and time.monotonic() < give_up_at:
        time.sleep(0.005)
    assert p.done
    assert wait(p) == 49


BOUND = 20
# A replica's queue is shared by its interfaces and bounded by the largest bound they ask for.
QUEUE = tuple(f"modules.server.define.{f}.queue={BOUND}" for f in ("square", "poison", "once", "slow"))


def test_overload_blocks_within_the_queue_bound(harness: Harness) -> None:
    overrides = ("modules.server.replication=2", *QUEUE, "modules.client.use.square.callstyle=async")
    app = harness.app(*overrides)
    harness.embedded_registry()
    harness.workers(2)
    session = harness.session(app)
    n = 1500
    promises = [session.call("square", (i, 1.0), {}) for i in range(n)]  # far faster than served
    # The replicas' queues stay within BOUND (proved exactly in test_queue_bound.py); the
    # rest wait in the sockets and at the client, and every call is answered.
    assert [wait(p) for p in promises] == [i * i for i in range(n)]


def test_overload_reject_is_a_typed_error_never_silent(harness: Harness) -> None:
    app = harness.app("modules.server.replication=1", *QUEUE,
                      "modules.server.define.square.overflow=reject",
                      "modules.client.use.square.callstyle=async")
    harness.embedded_registry()
    harness.workers(1)
    session = harness.session(app)
    n = 300
    promises = [session.call("square", (i, 1.0), {}) for i in range(n)]
    ok = busy = 0
    for i, p in enumerate(promises):
        try:
            assert wait(p) == i * i
            ok += 1
        except BusyError as exc:
            assert "full" in str(exc)
            busy += 1
    assert ok + busy == n and busy > 0 and ok >= BOUND
    assert sum(harness.executions().values()) == ok  # a rejected call never ran


def test_client_backlog_is_bounded(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "BACKLOG_BOUND", 50)
    app = harness.app("modules.server.replication=2", "modules.client.use.square.callstyle=async-demand(2)")
    harness.embedded_registry()
    harness.workers(2)
    session = harness.session(app)
    d = session.dispatchers["square"]
    promises, longest = [], 0
    for i in range(600):
        promises.append(session.call("square", (i, 0.5), {}))
        longest = max(longest, len(d._backlog))
    assert longest <= 50  # the caller waited for room instead of growing the backlog
    assert [wait(p) for p in promises] == [i * i for i in range(600)]


def test_aggregated_client_backlog_is_bounded(harness: Harness,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The batches of an aggregating binding that wait for room at the client (its
    # async-demand window full) had no bound: every call the program made was kept.
    monkeypatch.setattr(dispatch, "BACKLOG_BOUND", 50)
    app = harness.app("modules.server.replication=1",
                      'modules.client.use.square={callstyle="async-demand(1)", aggregate=4}')
    harness.embedded_registry()
    harness.workers(1)
    session = harness.session(app)
    (bt,) = session.batchers
    promises, longest = [], 0
    for i in range(600):
        promises.append(session.call("square", (i, 1.0), {}))  # (4 ms a batch)
        longest = max(longest, sum(len(b.args) for b in bt.backlog))
    assert longest <= 50  # the caller waited for room instead of growing the backlog
    assert [wait(p) for p in promises] == [i * i for i in range(600)]
