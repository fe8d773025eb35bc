"""A replica's side of ``p.cancel()`` (``Revoke``, worker/intake.py): it drops the named
calls of the connection that no handler has taken, queued or held for forwarded values,
answers ``Released`` with those it dropped, and leaves the others as they are: a call
running (or answered) still answers. A dropped call is forgotten whole: what it was
asked to forward goes, and the forwarded values it took are given back, as a Steal's."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from conftest import FORWARD_TOKEN  # tests/conftest.py
from polybus.testing.reading import MessageReader
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec, Ref
from polybus.wire.messages import (
    Call,
    Cancel,
    Deliver,
    Forward,
    Released,
    Result,
    Revoke,
)
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime
from unit.held_handler import running as _running

_reader = MessageReader(within=5.0)
_next = _reader.next  # (the next message a channel received)
_sync = _reader.synced  # (until the replica has handled all a channel sent before)


@pytest.fixture
def go() -> threading.Event:
    return threading.Event()


@pytest.fixture
def ran() -> list[int]:
    return []


@pytest.fixture
def gated(go: threading.Event, ran: list[int]) -> Iterator[WorkerRuntime]:
    """One handler; ``wait`` holds it until the test sets ``go``; ``note(i)`` records
    that it ran."""
    def note(i: int) -> int:
        ran.append(i)
        return i

    rt = WorkerRuntime("w", {"note": note, "wait": lambda: go.wait(20.0)}, FORWARD_TOKEN,
                       options=ServeOptions(pool=1)).start()
    try:
        yield rt
    finally:
        go.set()
        rt.stop()


@pytest.fixture
def peer(gated: WorkerRuntime) -> Iterator[Channel]:
    ch = connect(gated.address, FORWARD_TOKEN, Codec())
    try:
        yield ch
    finally:
        ch.close()




def test_a_queued_call_is_dropped_and_a_running_one_is_left(
        gated: WorkerRuntime, peer: Channel, go: threading.Event, ran: list[int]) -> None:
    peer.send(Call(1, "wait", []))
    _running(gated)
    peer.send(Call(2, "note", [2]))
    peer.send(Call(3, "note", [3]))
    peer.send(Revoke([1, 2, 99], 7))  # running, queued, unknown
    assert _next(peer) == Released([2], 7)
    assert len(gated._queue) == 1
    go.set()
    assert _next(peer) == Result(1, True)  # (the running call answers all the same)
    assert _next(peer) == Result(3, 3)
    _sync(peer, 1)  # (nothing came for 2)
    assert ran == [3]


def test_a_call_held_for_forwarded_values_is_dropped_and_its_values_not_waited_for(
        gated: WorkerRuntime, peer: Channel, go: threading.Event, ran: list[int]) -> None:
    fwd = gated.forwarding
    peer.send(Deliver("c.2.0", True, 5))  # one of its two values came
    peer.send(Call(2, "note", [Ref("fwd", "c.2.0"), Ref("fwd", "c.2.1")]))
    _sync(peer, 1)
    assert fwd.held_calls() == 1 and "c.2.0" in fwd._taken
    peer.send(Revoke([2], 8))
    assert _next(peer) == Released([2], 8)
    assert fwd.held_calls() == 0 and not fwd._held
    assert "c.2.0" not in fwd._taken  # (given back, as a Steal's: it may come back)
    peer.send(Deliver("c.2.1", True, 6))  # the other, later: no call takes it
    peer.send(Cancel([], ["c.2.0", "c.2.1"]))  # the client: its consumer has ended
    _sync(peer, 2)
    assert not fwd._arrived and fwd._arrived.nbytes == 0
    peer.send(Call(3, "note", [3]))
    assert _next(peer) == Result(3, 3)
    assert ran == [3]


def test_a_dropped_producer_forgets_what_it_was_asked_to_forward(
        gated: WorkerRuntime, peer: Channel, go: threading.Event, ran: list[int]) -> None:
    fwd = gated.forwarding
    peer.send(Call(1, "wait", []))
    _running(gated)
    peer.send(Call(2, "note", [2]))
    peer.send(Forward(2, "p.2", "c.5.0", "tcp://127.0.0.1:9"))
    _sync(peer, 1)
    assert fwd.targets
    peer.send(Revoke([2], 9))
    assert _next(peer) == Released([2], 9)
    assert not fwd.targets
    go.set()
    assert _next(peer) == Result(1, True)
    _sync(peer, 2)
    assert ran == []


def test_a_revoke_drops_nothing_of_another_connection(
        gated: WorkerRuntime, peer: Channel, go: threading.Event, ran: list[int]) -> None:
    """Call ids are the sending client's own: another connection naming the same ids
    (another client's calls happen to have them) drops nothing, and is told so."""
    other = connect(gated.address, FORWARD_TOKEN, Codec())
    try:
        peer.send(Call(1, "wait", []))
        _running(gated)
        peer.send(Call(2, "note", [2]))
        _sync(peer, 1)
        other.send(Revoke([1, 2], 5))
        assert _next(other) == Released([], 5)
        assert len(gated._queue) == 1
        go.set()
        assert _next(peer) == Result(1, True)
        assert _next(peer) == Result(2, 2)
        assert ran == [2]
    finally:
        other.close()


def test_a_huge_revoke_is_answered_with_what_it_dropped_and_the_replica_serves_on(
        gated: WorkerRuntime, peer: Channel, go: threading.Event, ran: list[int]) -> None:
    """A Revoke is bounded as every message is, by the frame limit: a million ids (a
    few MB) are looked up once each, and the answer lists only the calls dropped (at
    most the queue's), each once however often it was named."""
    peer.send(Call(1, "wait", []))
    _running(gated)
    peer.send(Call(2, "note", [2]))
    peer.send(Call(3, "note", [3]))
    peer.send(Revoke([*range(10, 1_000_010), 3, 3, -1, 2**63 - 1], 6))
    assert _next(peer) == Released([3], 6)
    go.set()
    assert _next(peer) == Result(1, True)
    assert _next(peer) == Result(2, 2)
    peer.send(Call(4, "note", [4]))
    assert _next(peer) == Result(4, 4)
    assert ran == [2, 4]
