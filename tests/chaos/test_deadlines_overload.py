"""Deadlines (a late call fails typed, its late answer is discarded) and overload (bounded)."""

from __future__ import annotations

import time

import pytest

from polybus.client import dispatch
from polybus.client.promise import wait
from polybus.errors import BusyError, CallTimeoutError

from .conftest import Harness


@pytest.mark.parametrize("style", ["sync", "async"])
def test_deadline_fails_typed_and_late_answer_is_discarded(harness: Harness, style: str) -> None:
    app = harness.app("modules.server.replication=1", "modules.server.define.slow.pool=2",
                      f"modules.client.use.slow.callstyle={style}")
    harness.embedded_registry()
    harness.workers(1)
    session = harness.session(app)
    with pytest.raises(CallTimeoutError, match=r"within 0\.5 s"):
        wait(session.call("slow", (1, 1.5), {}))
    # (raised at all: the deadline came before the answer, which takes 1.5 s)
    assert wait(session.call("slow", (2, 0.0), {})) == 2
    deadline = time.monotonic() + 5
    while harness.executions("done")[1] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert harness.executions("done")[1] == 1  # the late answer was produced ...
    assert [wait(session.call("slow", (i, 0.0), {})) for i in range(3, 8)] == [3, 4, 5, 6, 7]
    link = session.links["server"][0]
    assert not link.outstanding  # ... and discarded: nothing waits for it


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
