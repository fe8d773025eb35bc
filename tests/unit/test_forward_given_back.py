"""A replica's forwarded values where migration meets forwarding (worker/fwdheld.py).

A consumer queued with its values may be given back by a ``Steal``; the replica then no
longer counts its keys as taken, so that, placed there again, it takes them again. A
copy of such a value that comes after (a value may come twice: its producer's replica
sent it and the client sent it on, or a producer ran again) waited there, taken by
nothing, until the bound on unclaimed values pushed it out: the client now says when
the consumer has ended (``Cancel`` with its keys), and it goes. A consumer that took its
values and is then refused (a full queue with ``overflow = "reject"``, an interface not
served) kept what it took recorded until its client went.
"""

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
    Fail,
    Released,
    Result,
    Steal,
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
def gated(go: threading.Event) -> Iterator[WorkerRuntime]:
    """One handler, a queue of one that rejects past it, and ``wait``, which holds the
    handler until the test sets ``go``."""
    rt = WorkerRuntime("w", {"echo": lambda *xs: list(xs), "wait": lambda: go.wait(20.0)},
                       FORWARD_TOKEN,
                       options=ServeOptions(pool=1, queue=1, overflow="reject")).start()
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




def test_a_copy_that_comes_after_its_consumer_was_given_back_goes_when_it_ends(
        gated: WorkerRuntime, peer: Channel, go: threading.Event) -> None:
    fwd = gated.forwarding
    peer.send(Call(1, "wait", []))
    _running(gated)
    peer.send(Deliver("c.2.0", True, 5))  # (the producer's replica sent it)
    peer.send(Call(2, "echo", [Ref("fwd", "c.2.0")]))  # takes it, queued behind 1
    peer.send(Steal(1, 9))
    assert _next(peer) == Released([2], 9)
    peer.send(Deliver("c.2.0", True, 5))  # (and the client sent it on: a second copy)
    _sync(peer, 1)
    assert "c.2.0" in fwd._arrived  # (the consumer may come back: it would take it)
    peer.send(Cancel([2], ["c.2.0"]))  # the consumer ended elsewhere
    _sync(peer, 2)
    assert not fwd._arrived and fwd._arrived.nbytes == 0
    peer.send(Deliver("c.2.0", True, 5))  # a copy later still (a producer run again)
    _sync(peer, 3)
    assert not fwd._arrived and not fwd._took and not fwd._held
    go.set()
    assert _next(peer) == Result(1, True)


def test_a_consumer_given_back_takes_its_value_again_when_it_comes_back(
        gated: WorkerRuntime, peer: Channel, go: threading.Event) -> None:
    peer.send(Call(1, "wait", []))
    _running(gated)
    peer.send(Deliver("c.2.0", True, 5))
    peer.send(Call(2, "echo", [Ref("fwd", "c.2.0")]))
    peer.send(Steal(1, 9))
    assert _next(peer) == Released([2], 9)
    peer.send(Deliver("c.2.0", True, 5))  # (sent again for it: a Forward from the store)
    peer.send(Call(2, "echo", [Ref("fwd", "c.2.0")]))  # moved back here
    go.set()
    assert _next(peer) == Result(1, True)
    assert _next(peer) == Result(2, [5])
    assert not gated.forwarding._arrived and not gated.forwarding._took


def test_a_refused_consumer_leaves_nothing_recorded_of_what_it_took(
        gated: WorkerRuntime, peer: Channel, go: threading.Event) -> None:
    fwd = gated.forwarding
    peer.send(Call(1, "wait", []))
    _running(gated)
    peer.send(Call(2, "echo", [0]))  # the queue's one place
    peer.send(Deliver("c.3.0", True, 5))
    peer.send(Call(3, "echo", [Ref("fwd", "c.3.0")]))  # takes its value: the queue is full
    got = _next(peer)
    assert isinstance(got, Fail) and got.id == 3 and got.kind == "busy", got
    peer.send(Call(4, "nowhere", [Ref("fwd", "c.4.0")]))  # not served here
    peer.send(Deliver("c.4.0", True, 6))
    got = _next(peer)
    assert isinstance(got, Fail) and got.id == 4 and got.kind == "no-interface", got
    _sync(peer, 1)  # (the Fail goes before the Deliver's handling ends)
    assert not fwd._took  # (each was kept till the client went)
    peer.send(Deliver("c.3.0", True, 5))  # a second copy: still taken, dropped
    _sync(peer, 2)
    assert not fwd._arrived
    go.set()
    assert _next(peer) == Result(1, True)
    assert _next(peer) == Result(2, [0])
