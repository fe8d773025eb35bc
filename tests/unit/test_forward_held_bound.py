"""Calls held on a replica for forwarded values are bounded, in count and bytes.

A call naming ``Ref("fwd", key)`` whose value has not come is held, decoded, until it
does (worker/fwdheld.py). Those calls were not counted anywhere: a slow producer stage
and a consumer stage called with plain ``async`` left any number of them held on the
consumer's replica. They are not counted against the replica's ``queue`` either: under
``overflow = "block"`` a queue full of them would stop the reading of the connection
that brings their own values (a client's ``Deliver``, or their producers' calls), for
ever. So they have a bound of their own, ``held_max`` calls and ``held_bytes_max``
bytes, and a call that would be held past it is refused at once with a ``BusyError``
(``Fail(kind="busy")``), under either overflow: the replica never stops reading for it.
"""

from __future__ import annotations

import select
import time
from collections.abc import Iterator

import numpy as np
import pytest

from polybus.client.calls import error_from
from polybus.errors import BusyError
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec, Ref
from polybus.wire.messages import (
    Batch,
    Call,
    Deliver,
    Fail,
    Message,
    Ping,
    Pong,
    Released,
    Result,
    Revoke,
)
from polybus.worker.cache import DEFAULT_CAPACITY
from polybus.worker.forwarding import HELD_BOUND
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"forward-held-bound-token-0123456789"


class _Reader:
    """A channel's next message (a corked Batch's items one by one), or None if none
    came within 5 s: a test fails on its own assertion, never waits for ever."""

    def __init__(self) -> None:
        self._read: dict[Channel, list[Message]] = {}

    def next(self, ch: Channel) -> Message | None:
        waiting = self._read.setdefault(ch, [])
        deadline = time.monotonic() + 5.0
        while not waiting:
            msg = ch.next_message()
            if msg is not None:
                waiting.extend(msg.items if isinstance(msg, Batch) else [msg])
            elif time.monotonic() > deadline:
                return None
            elif select.select([ch.sock], [], [], 0.05)[0]:
                ch.fill(wait=False)
        return waiting.pop(0)

    def synced(self, ch: Channel, req: int) -> None:
        """Once the replica has handled all ``ch`` sent before (a Ping is answered as
        it is read, after them)."""
        ch.send(Ping(req))
        got = self.next(ch)
        assert isinstance(got, Pong) and got.req == req, got


reader = _Reader()


@pytest.fixture
def worker() -> Iterator[WorkerRuntime]:
    """One handler and a queue of 1 that blocks: the smallest a replica takes."""
    rt = WorkerRuntime("w", {"echo": lambda *xs: list(xs)}, TOKEN,
                       options=ServeOptions(pool=1, queue=1, overflow="block")).start()
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


def _answers(ch: Channel, n: int) -> dict[int, Message]:
    got: dict[int, Message] = {}
    for _ in range(n):
        msg = reader.next(ch)
        assert isinstance(msg, Result | Fail), msg
        got[msg.id] = msg
    return got


def _busy(msg: Message | None, cid: int) -> str:
    assert isinstance(msg, Fail) and msg.id == cid, msg
    assert msg.kind == "busy" and msg.type == "BusyError", msg
    err = error_from(msg, "echo", "w")  # what the program gets: a BusyError
    assert type(err) is BusyError, err
    return msg.message


def test_the_default_held_bounds() -> None:
    rt = WorkerRuntime("d", {}, TOKEN)
    try:
        assert rt.forwarding.held_max == HELD_BOUND == 100_000
        assert rt.forwarding.held_bytes_max == DEFAULT_CAPACITY
    finally:
        rt.stop()


def test_calls_past_the_bound_are_refused_at_once_and_the_values_behind_them_still_read(
        worker: WorkerRuntime, peer: Channel) -> None:
    fwd = worker.forwarding
    fwd.held_max = 3
    for i in range(6):  # (before the bound: all 6 held, none answered)
        peer.send(Call(i + 1, "echo", [Ref("fwd", f"k{i}"), i]))
    got = _answers(peer, 3)
    assert sorted(got) == [4, 5, 6]
    text = _busy(got[4], 4)
    assert text.startswith("w did not take this call: 3 calls wait there for forwarded "
                           "values (at most 3, or "), text
    assert "async-demand" in text, text
    assert fwd.held_calls() == 3
    # Their values come on the same connection, after them (as a client sends a value
    # it has itself): read, though 3 calls are held with a queue of 1 that blocks.
    for i in range(6):
        peer.send(Deliver(f"k{i}", True, i * 10))
    peer.send(Call(7, "echo", ["plain"]))
    got = _answers(peer, 4)
    assert got == {1: Result(1, [0, 0]), 2: Result(2, [10, 1]), 3: Result(3, [20, 2]),
                   7: Result(7, ["plain"])}
    # The values of the calls refused were let go (taken), not kept unclaimed.
    assert fwd.held_calls() == 0 and not fwd._arrived and fwd._holding == 0
    assert fwd._holding_bytes == 0 and fwd.held_refused == 3
    # Room again: as many are held as before.
    for i in range(3):
        peer.send(Call(10 + i, "echo", [Ref("fwd", f"m{i}")]))
    reader.synced(peer, 1)
    assert fwd.held_calls() == 3
    for i in range(3):
        peer.send(Deliver(f"m{i}", True, i))
    assert _answers(peer, 3) == {10 + i: Result(10 + i, [i]) for i in range(3)}


def test_a_refused_call_lets_go_of_the_values_it_found(
        worker: WorkerRuntime, peer: Channel) -> None:
    fwd = worker.forwarding
    fwd.held_max = 1
    peer.send(Call(1, "echo", [Ref("fwd", "a")]))
    peer.send(Deliver("here", True, 5))
    peer.send(Call(2, "echo", [Ref("fwd", "here"), Ref("fwd", "later")]))
    _busy(reader.next(peer), 2)
    assert not fwd._arrived and fwd._arrived.nbytes == 0  # "here" went with it
    peer.send(Deliver("later", True, 6))  # not kept: its call was answered
    # A call whose values are all here is not held: the bound does not refuse it.
    peer.send(Deliver("b", True, 7))
    peer.send(Call(3, "echo", [Ref("fwd", "b")]))
    assert reader.next(peer) == Result(3, [7])
    assert not fwd._arrived and fwd.held_calls() == 1
    peer.send(Deliver("a", True, 1))
    assert reader.next(peer) == Result(1, [1])


def test_held_calls_are_bounded_by_bytes_their_values_included(
        worker: WorkerRuntime, peer: Channel) -> None:
    fwd = worker.forwarding
    fwd.held_bytes_max = 1 << 20
    block = np.ones(300_000 // 8)  # 300 kB: three calls carrying one fit, not four
    for i in range(4):
        peer.send(Call(i + 1, "echo", [Ref("fwd", f"k{i}"), block]))
    _busy(reader.next(peer), 4)
    assert fwd.held_calls() == 3 and 900_000 < fwd._holding_bytes <= fwd.held_bytes_max
    for i in range(3):
        peer.send(Deliver(f"k{i}", True, i))
    assert sorted(_answers(peer, 3)) == [1, 2, 3]
    assert fwd._holding_bytes == 0
    # A value that comes for a call still held counts with it: 600 kB filled into call
    # 5 leaves no room for call 6's 500 kB.
    peer.send(Call(5, "echo", [Ref("fwd", "big"), Ref("fwd", "small")]))
    peer.send(Deliver("big", True, np.ones(600_000 // 8)))
    peer.send(Call(6, "echo", [Ref("fwd", "c"), np.ones(500_000 // 8)]))
    _busy(reader.next(peer), 6)
    peer.send(Deliver("small", True, 1))
    got = reader.next(peer)
    assert isinstance(got, Result) and got.id == 5 and got.value[1] == 1, got
    assert fwd._holding_bytes == 0 and fwd.held_calls() == 0
    # One call over the byte bound alone is held (max_frame bounds it), as nothing is.
    peer.send(Call(7, "echo", [Ref("fwd", "d"), np.ones((2 << 20) // 8)]))
    reader.synced(peer, 2)
    assert fwd.held_calls() == 1
    peer.send(Deliver("d", True, 0))
    got = reader.next(peer)
    assert isinstance(got, Result) and got.id == 7, got


def test_a_closed_or_revoked_clients_held_calls_leave_the_count(
        worker: WorkerRuntime, peer: Channel) -> None:
    fwd = worker.forwarding
    fwd.held_max = 2
    other = connect(worker.address, TOKEN, Codec())
    try:
        other.send(Call(1, "echo", [Ref("fwd", "o1")]))
        other.send(Call(2, "echo", [Ref("fwd", "o2"), Ref("fwd", "o3")]))
        reader.synced(other, 1)
        assert fwd.held_calls() == 2
        peer.send(Call(1, "echo", [Ref("fwd", "p1")]))
        _busy(reader.next(peer), 1)
    finally:
        other.close()
    deadline = time.monotonic() + 5  # (the replica sees the close at its next poll)
    while fwd.held_calls() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fwd.held_calls() == 0 and fwd._holding == 0 and fwd._holding_bytes == 0
    peer.send(Call(2, "echo", [Ref("fwd", "p2")]))  # (other's calls went with it)
    peer.send(Call(3, "echo", [Ref("fwd", "p3")]))
    reader.synced(peer, 2)
    assert fwd.held_calls() == 2 and fwd._holding == 2
    peer.send(Revoke([2], 9))  # (p.cancel(): a held call dropped)
    assert reader.next(peer) == Released([2], 9)
    assert fwd._holding == 1
    peer.send(Deliver("p3", True, 3))
    assert reader.next(peer) == Result(3, [3])
    assert fwd._holding == 0 and fwd._holding_bytes == 0
