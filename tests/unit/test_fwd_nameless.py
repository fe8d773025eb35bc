"""A ``Forward`` or ``Keep`` that names no value is said, not kept (worker/fwdasked.py).

A request with an ``index`` names call ``index`` of aggregated batch ``id``; one without
names call ``id``'s own value. A request whose call's answer has no such value (an
index on a plain ``Call``, an index past its batch's calls, no index on a batch) waited
for nothing: it was kept until its connection ended (or it was dropped unsaid), and the
consumer of a ``Forward`` so named, on another replica, waited until its client gave up.
Now, when that call is answered, such a ``Forward`` is answered ``Undelivered(key, to,
"LookupError", "w: call N has no value at index I (...)")`` and such a ``Keep`` is
dropped (said in the replica's log, once per connection); nothing of either is kept, and
the good requests beside them are served as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec, Ref
from polybus.wire.messages import (
    Batch,
    BatchResult,
    Call,
    CallBatch,
    Forward,
    Keep,
    Message,
    Ping,
    Pong,
    Result,
    Undelivered,
)
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"fwd-nameless-token-0123456789abcdef"
CLOSED = object()


@pytest.fixture
def worker() -> Iterator[WorkerRuntime]:
    # (not tests/conftest.py's echo_worker: its pool of 2 takes lone calls off the
    # inline paths, whose look at what was asked the inline test is about)
    rt = WorkerRuntime("w", {"echo": lambda *xs: list(xs)}, TOKEN).start()
    try:
        yield rt
    finally:
        rt.stop()


@pytest.fixture
def peer(worker: WorkerRuntime) -> Iterator[Channel]:
    ch = connect(worker.address, TOKEN, Codec())
    try:
        yield ch
    finally:
        ch.close()


def _messages(ch: Channel, until: Callable[[list[Any]], bool]) -> list[Any]:
    """What ``ch`` is sent (a Batch's items one by one) until ``until`` holds of all
    that came; bounded waits."""
    got: list[Any] = []
    while not until(got):
        m = next_message(ch, 10.0, CLOSED)
        assert m is not None and m is not CLOSED, ("nothing more came", got)
        got += m.items if isinstance(m, Batch) else [m]
    return got


def _answered(ids: set[int]) -> Callable[[list[Any]], bool]:
    """Whether the calls (or batches) ``ids`` have their answers among those come."""
    return lambda got: ids <= {m.id for m in got if isinstance(m, Result | BatchResult)}


def _exchange(ch: Channel, msgs: list[Message], ids: set[int]) -> list[Any]:
    """Send ``msgs``, then a Ping once the calls ``ids`` are answered: all that came
    until its Pong (anything said of those calls is said before their answers)."""
    ch.send_many(msgs)
    got = _messages(ch, _answered(ids))
    ch.send(Ping(99))
    return got + _messages(ch, lambda g: any(isinstance(m, Pong) and m.req == 99 for m in g))


def _by_id(got: list[Any]) -> dict[int, Any]:
    return {m.id: m for m in got if isinstance(m, Result | BatchResult)}


def _ref(v: Any) -> Any:
    """A ``Ref`` as (kind, key), to compare; another value as it is."""
    return (v.kind, v.key) if isinstance(v, Ref) else v


def _said(got: list[Any]) -> list[Undelivered]:
    return [m for m in got if isinstance(m, Undelivered)]


def _nothing_kept(rt: WorkerRuntime) -> None:
    f = rt.forwarding
    assert (f.asks.counts, f.asks.nbytes, f.targets, f.slots, f.sized) == ({}, 0, {}, {}, {})
    assert f.kept.pinned == 0


def _until(what: Callable[[], bool], state: Callable[[], Any]) -> None:
    deadline = time.monotonic() + 10.0
    while not what():
        assert time.monotonic() < deadline, state()
        time.sleep(0.01)


def _good(ch: Channel, rt: WorkerRuntime, i: int) -> None:
    """A good Forward of call ``i`` to this replica is served: the call is answered by
    its Ref, and its consumer (call ``i + 100``) gets the value."""
    to = str(rt.address)
    got = _exchange(ch, [Forward(i, f"n.{i}", f"n.{i}.0", to), Call(i, "echo", [i]),
                         Call(i + 100, "echo", [Ref("fwd", f"n.{i}.0")])], {i, i + 100})
    answers = _by_id(got)
    assert _ref(answers[i].value) == ("fwd", [f"n.{i}.0"]), answers[i]
    assert answers[i + 100].value == [[i]], answers[i + 100]
    assert not _said(got), got


def test_a_forward_with_an_index_of_a_plain_call_is_undelivered_and_not_kept(
        worker: WorkerRuntime, peer: Channel) -> None:
    to = str(worker.address)
    _good(peer, worker, 1)
    got = _exchange(peer, [Forward(2, "n.2", "n.2.0", to, 3, hold=True),
                           Call(2, "echo", [2])], {2})
    assert _by_id(got)[2].value == [2]  # (by value: nothing else was asked of it)
    said = _said(got)
    assert [(u.key, u.to, u.type) for u in said] == [("n.2.0", to, "LookupError")], got
    assert said[0].message == ("w: call 2 has no value at index 3 (a Call, not a batch: "
                               "only a CallBatch's calls have an index)"), said[0].message
    _nothing_kept(worker)
    _good(peer, worker, 3)
    _nothing_kept(worker)


def test_a_forward_of_a_lone_plain_call_served_inline_is_said_too(
        worker: WorkerRuntime, peer: Channel) -> None:
    # The request is read first, alone; the calls then come one at a time, each after
    # the answer of the one before, as a sync client's do: such calls are run where they
    # are read (worker/socketserve.py, direct.py), which looks only for what was asked.
    to = str(worker.address)
    peer.send(Forward(7, "n.7", "n.7.0", to, 0))
    _until(lambda: bool(worker.forwarding.asks.counts), lambda: worker.forwarding.slots)
    for i in (5, 6, 7):
        peer.send(Call(i, "echo", [i]))
        got = _messages(peer, _answered({i}))
    assert [(u.key, u.type) for u in _said(got)] == [("n.7.0", "LookupError")], got
    assert "call 7 has no value at index 0 (a Call, not a batch" in _said(got)[0].message
    _nothing_kept(worker)


def test_a_keep_with_an_index_of_a_plain_call_is_dropped_and_logged_once(
        worker: WorkerRuntime, peer: Channel, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    _good(peer, worker, 7)
    got = _exchange(peer, [Keep(1, "n.1", "n.1.0", index=0), Call(1, "echo", [1]),
                           Keep(2, "n.2", "n.2.0", index=4), Call(2, "echo", [2])], {1, 2})
    answers = _by_id(got)
    assert answers[1].value == [1] and answers[2].value == [2], answers  # (by value)
    assert not _said(got), got  # (a Keep has no consumer placed to tell)
    _nothing_kept(worker)
    logged = [r.getMessage() for r in caplog.records if "names no value" in r.getMessage()]
    assert len(logged) == 1, logged  # (once for the connection)
    assert "a Keep: call 1 has no value at index 0 (a Call, not a batch" in logged[0], logged
    _good(peer, worker, 3)


def test_a_request_past_the_calls_of_its_batch_is_undelivered_and_not_kept(
        worker: WorkerRuntime, peer: Channel) -> None:
    to = str(worker.address)
    _good(peer, worker, 1)
    got = _exchange(peer, [Forward(5, "n.5", "n.5.0", to, 1),  # (a good one beside them)
                           Forward(5, "n.5+3", "n.5.3", to, 3),
                           Keep(5, "n.5+9", "n.5.9", index=9),
                           CallBatch(5, "echo", [[0], [1], [2]]),
                           Call(105, "echo", [Ref("fwd", "n.5.0")])], {5, 105})
    answers = _by_id(got)
    assert [_ref(v) for v in answers[5].values] == [[0], ("fwd", ["n.5.0"]), [2]], answers[5]
    assert answers[105].value == [[1]], answers[105]
    said = _said(got)
    assert [(u.key, u.to, u.type) for u in said] == [("n.5.3", to, "LookupError")], got
    assert said[0].message == "w: call 5 has no value at index 3 (a batch of 3 calls)"
    _nothing_kept(worker)
    _good(peer, worker, 6)


def test_a_request_with_no_index_of_a_batch_is_undelivered_and_not_kept(
        worker: WorkerRuntime, peer: Channel) -> None:
    to = str(worker.address)
    got = _exchange(peer, [Forward(5, "n.5", "n.5.0", to),
                           Keep(5, "n.5", "n.5.own", least=1),
                           CallBatch(5, "echo", [[0], [1]])], {5})
    assert _by_id(got)[5].values == [[0], [1]]
    said = _said(got)
    assert [(u.key, u.to, u.type) for u in said] == [("n.5.0", to, "LookupError")], got
    assert said[0].message == ("w: call 5 has no value of its own (a batch of 2 calls: "
                               "a request names one of them by its index)"), said[0].message
    _nothing_kept(worker)
    _good(peer, worker, 6)
    # another client is served as ever
    other = connect(worker.address, TOKEN, Codec())
    try:
        _good(other, worker, 1)
    finally:
        other.close()
