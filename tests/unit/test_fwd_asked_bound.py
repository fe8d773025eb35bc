"""What clients ask of calls' answers before they come is bounded (worker/fwdasked.py).

A ``Forward`` or ``Keep`` of a call not answered yet is kept until the call is answered,
cancelled or its connection ends. It was kept for any id, however many: a connection
asking of ever new ids it never called grew the replica until it went. Now at most
``ASKED_BOUND`` wait on one connection and ``ASKED_BYTES`` on the replica (lowered
here); one past either is refused at once and kept nowhere (a ``Forward`` answered
``Undelivered`` of type BusyError, a ``Keep`` as one with no room: by value), and the
count goes down as calls are answered, cancelled, released or their connection ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
    Cancel,
    Forward,
    Keep,
    Message,
    Ping,
    Pong,
    Result,
    Undelivered,
)
from polybus.worker import fwdasked
from polybus.worker.fwdasked import ASKED_ENTRY_BYTES
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"fwd-asked-bound-token-0123456789ab"
CLOSED = object()


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerRuntime]:
    monkeypatch.setattr(fwdasked, "ASKED_BOUND", 3)  # (before the replica is made)
    rt = WorkerRuntime("w", {"echo": lambda *xs: list(xs)}, TOKEN).start()
    try:
        yield rt
    finally:
        rt.stop()


@contextmanager
def _peer(rt: WorkerRuntime) -> Iterator[Channel]:
    ch = connect(rt.address, TOKEN, Codec())
    try:
        yield ch
    finally:
        ch.close()


def _messages(ch: Channel, until: Callable[[Any], bool]) -> list[Any]:
    """What ``ch`` is sent (a Batch's items one by one) up to and with the first for
    which ``until`` holds; bounded waits."""
    got: list[Any] = []
    while True:
        m = next_message(ch, 10.0, CLOSED)
        assert m is not None and m is not CLOSED, ("nothing came", got)
        items = m.items if isinstance(m, Batch) else [m]
        got += items
        if any(until(x) for x in items):
            return got


def _sent(ch: Channel, msgs: list[Message], ping: int = 99) -> list[Any]:
    """Send ``msgs`` and a Ping: what came back until its Pong (all of them read)."""
    ch.send_many([*msgs, Ping(ping)])
    return _messages(ch, lambda m: isinstance(m, Pong) and m.req == ping)


def _answers(ch: Channel, ids: set[int]) -> dict[int, Any]:
    """Sends the calls ``ids`` (echo of their id): their answers, by id."""
    ch.send_many([Call(i, "echo", [i]) for i in sorted(ids)])
    got: dict[int, Any] = {}
    while set(got) != ids:
        got.update((m.id, m) for m in _messages(ch, lambda m: isinstance(m, Result))
                   if isinstance(m, Result))
    return got


def _ref(v: Any) -> tuple[str, Any] | None:
    """A ``Ref`` as (kind, key), to compare (None for another value)."""
    return (v.kind, v.key) if isinstance(v, Ref) else None


def _until(what: Callable[[], bool], state: Callable[[], Any]) -> None:
    deadline = time.monotonic() + 10.0
    while not what():
        assert time.monotonic() < deadline, state()
        time.sleep(0.01)


def _kept(rt: WorkerRuntime) -> list[int]:
    """The call ids with requests kept, of all connections (targets and slots; the
    tests give each connection ids of its own)."""
    f = rt.forwarding
    return sorted(i for _, i in [*f.targets, *f.slots])


def _counts(rt: WorkerRuntime) -> list[int]:
    """The requests counted as waiting, by connection."""
    return sorted(rt.forwarding.asks.counts.values())


def test_a_forward_past_the_bound_of_its_connection_is_undelivered_at_once_and_not_kept(
        worker: WorkerRuntime) -> None:
    to, fwd = str(worker.address), worker.forwarding
    with _peer(worker) as ch, _peer(worker) as other:
        got = _sent(ch, [Forward(i, f"n.{i}", f"n.{i}.0", to) for i in (1, 2, 3)]
                    + [Forward(2, "n.2", "n.2.0", to)]  # (asked again: adds nothing)
                    + [Forward(4, "n.4", "n.4.0", to)])
        said = [m for m in got if isinstance(m, Undelivered)]
        assert len(said) == 1 and said[0].key == "n.4.0" and said[0].to == to, got
        assert said[0].type == "BusyError", said[0]
        assert said[0].message == (
            "w did not keep the request for call 4's answer: 3 requests of call answers "
            "wait on this connection, the most a replica keeps for one (3)"), said[0].message
        assert _kept(worker) == [1, 2, 3]
        assert fwd.asks.total() == 3 and fwd.asks.refused == 1
        # another connection has a bound of its own
        assert not [m for m in _sent(other, [Forward(7, "n.7", "n.7.0", to)])
                    if isinstance(m, Undelivered)]
        assert _kept(worker) == [1, 2, 3, 7] and _counts(worker) == [1, 3]
        # under the bound, as before: the three sent on; the refused one by value
        answers = _answers(ch, {1, 2, 3, 4})
        assert answers[4].value == [4], answers[4]
        assert [_ref(answers[i].value) for i in (1, 2, 3)] == [
            ("fwd", [f"n.{i}.0"]) for i in (1, 2, 3)], answers
        assert fwd.asks.total() == 1 and _kept(worker) == [7]  # (the other's waits)
        # room again on that connection
        assert not [m for m in _sent(ch, [Forward(i, f"n.{i}", f"n.{i}.0", to)
                                          for i in (5, 6, 8)]) if isinstance(m, Undelivered)]
        assert _kept(worker) == [5, 6, 7, 8] and _counts(worker) == [1, 3]


def test_a_keep_past_the_bound_is_not_kept_and_its_answer_goes_by_value(
        worker: WorkerRuntime) -> None:
    fwd = worker.forwarding
    with _peer(worker) as ch:
        got = _sent(ch, [Keep(1, "n.1", "n.1.0"), Keep(2, "n.2", "n.2.own", least=1),
                         Keep(3, "n.3", "n.3.0"),
                         Keep(4, "n.4", "n.4.own", least=1), Keep(5, "n.5", "n.5.0")])
        assert not [m for m in got if not isinstance(m, Pong)], got  # (nothing said)
        assert _kept(worker) == [1, 2, 3] and [i for _, i in fwd.sized] == [2]
        assert fwd.asks.refused == 2
        answers = _answers(ch, {1, 2, 3, 4, 5})
        assert [_ref(answers[i].value) for i in (1, 2, 3)] == [("fwd", [])] * 3, answers
        assert answers[4].value == [4] and answers[5].value == [5], answers
        assert fwd.kept.pinned == 3 and fwd.asks.total() == 0 and not fwd.sized


def test_the_bytes_of_all_connections_are_bounded_and_freed_when_one_ends(
        worker: WorkerRuntime) -> None:
    to, fwd = str(worker.address), worker.forwarding
    one = len("n.1") + len(to) + len("n.1.0") + ASKED_ENTRY_BYTES
    fwd.asks.bytes_max = 2 * one
    with _peer(worker) as a, _peer(worker) as b:
        assert not [m for m in _sent(a, [Forward(1, "n.1", "n.1.0", to)])
                    if isinstance(m, Undelivered)]
        assert not [m for m in _sent(b, [Forward(2, "n.2", "n.2.0", to)])
                    if isinstance(m, Undelivered)]
        with _peer(worker) as c:
            said = [m for m in _sent(c, [Forward(3, "n.3", "n.3.0", to)])
                    if isinstance(m, Undelivered)]
            assert len(said) == 1 and said[0].type == "BusyError", said
            assert said[0].message == (
                f"w did not keep the request for call 3's answer: the requests of call "
                f"answers waiting on it hold {2 * one} bytes, and this one {one}, over "
                f"the most a replica keeps ({2 * one} bytes)"), said[0].message
            assert _kept(worker) == [1, 2] and fwd.asks.nbytes == 2 * one
            a.close()  # (its requests go with it)
            _until(lambda: fwd.asks.nbytes == one, lambda: (fwd.asks.counts, fwd.targets))
            assert not [m for m in _sent(c, [Forward(3, "n.3", "n.3.0", to)])
                        if isinstance(m, Undelivered)]
            assert _kept(worker) == [2, 3] and fwd.asks.nbytes == 2 * one


def test_the_count_goes_down_as_requests_are_cancelled_released_answered_or_their_client_goes(
        worker: WorkerRuntime) -> None:
    to, fwd = str(worker.address), worker.forwarding
    with _peer(worker) as ch:
        # cancelled (a Forward that came after an answer by value is so forgotten)
        _sent(ch, [Forward(1, "n.1", "n.1.0", to, hold=True), Keep(2, "n.2", "n.2.0")])
        assert _counts(worker) == [3], fwd.asks.counts  # (a hold: two requests)
        _sent(ch, [Cancel([1])])
        assert _counts(worker) == [1] and fwd.asks.nbytes > 0
        # released (its consumer ended at the client)
        _sent(ch, [Keep(2, "n.2", "n.2.0", release=True)])
        assert fwd.asks.counts == {} and fwd.asks.nbytes == 0 and not fwd.targets
        # a batch's calls, answered
        _sent(ch, [Forward(5, "n.5", "n.5.0", to, 0), Keep(5, "n.5+1", "n.5.1", index=1)])
        assert _counts(worker) == [2] and fwd.slots, fwd.asks.counts
        ch.send(CallBatch(5, "echo", [[10], [11], [12]]))
        got = _messages(ch, lambda m: isinstance(m, BatchResult))
        assert [_ref(v) or v for v in got[-1].values] == [
            ("fwd", ["n.5.0"]), ("fwd", []), [12]], got[-1]
        assert fwd.asks.counts == {} and fwd.asks.nbytes == 0 and not fwd.slots
        # its client gone
        _sent(ch, [Forward(i, f"n.{i}", f"n.{i}.0", to) for i in (6, 7)]
              + [Forward(8, "n.8", "n.8.0", to, 2)])
        assert _counts(worker) == [3] and _kept(worker) == [6, 7, 8]
    _until(lambda: not fwd.asks.counts and not fwd.targets and not fwd.slots,
           lambda: (fwd.asks.counts, fwd.targets, fwd.slots))
    assert fwd.asks.nbytes == 0


def test_a_keep_refused_beside_a_forward_waiting_is_served_from_the_store_later(
        worker: WorkerRuntime) -> None:
    to, fwd = str(worker.address), worker.forwarding
    with _peer(worker) as ch:
        got = _sent(ch, [Forward(1, "n.1", "n.1.0", to), Keep(2, "n.2", "n.2.0"),
                         Keep(3, "n.3", "n.3.0"), Keep(1, "n.1", "n.1.1")])
        assert not [m for m in got if not isinstance(m, Pong)], got
        assert fwd.targets[next(w for w in fwd.targets if w[1] == 1)][1] == [(to, "n.1.0")]
        answers = _answers(ch, {1})
        assert _ref(answers[1].value) == ("fwd", ["n.1.0"]), answers  # (not by value)
        # the Keep's consumer placed: its Forward is served from the store
        ch.send_many([Forward(1, "n.1", "n.1.1", to), Call(9, "echo", [Ref("fwd", "n.1.1")])])
        got = _messages(ch, lambda m: isinstance(m, Result | Undelivered))
        assert isinstance(got[-1], Result) and got[-1].id == 9 and got[-1].value == [[1]], got
