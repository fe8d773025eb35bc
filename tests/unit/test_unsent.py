"""A send that must not wait (transport/channel.py's LATER, the client's pump): what the
connection cannot take now stays in the channel (``unsent``), the next send writes it
first, and `send_unsent` writes on with it; the reader gets every frame whole and in
order, over a socket and through an shm ring."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from polybus.errors import ConnectionLostError
from polybus.transport import ring as ring_mod
from polybus.transport.channel import LATER, Channel
from polybus.transport.shm import ShmChannel
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Message

MiB = 1 << 20


@contextmanager
def _pair(kind: str) -> Iterator[tuple[Channel, Channel]]:
    """Writer and reader. ``ring``: a small ring, and buffers in the frame (not by
    segment), so a large frame fills it."""
    a, b = socket.socketpair()
    if kind == "socket":
        w, r = Channel(a, Codec(), "reader"), Channel(b, Codec(), "writer")
    else:
        if not ring_mod.supported():
            pytest.skip("the ring needs x86-64")
        w = ShmChannel(a, Codec(), "reader", threshold=1 << 30, ring_capacity=1 << 16)
        r = ShmChannel(b, Codec(), "writer", threshold=1 << 30, ring_capacity=1 << 16)
        w.fill(wait=False)
        r.fill(wait=False)  # each takes the other's ring descriptor
        assert w._tx is not None and r._rx is not None
    try:
        yield w, r
    finally:
        w.close()
        r.close()


def _calls(first: int, n: int, size: int) -> list[Message]:
    return [Call(i, "f", [os.urandom(size)]) for i in range(first, first + n)]


def _in_thread(fn: Callable[[], None], seconds: float = 30.0) -> None:
    """Run ``fn`` in a thread; it must end (a send that waited would wait for ever: no
    one reads)."""
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the send waited for the reader"


def _reader(r: Channel, want: int, got: list[Message]) -> threading.Thread:
    def read() -> None:
        try:
            while len(got) < want:
                got.extend(r.receive())
        except ConnectionLostError:
            pass

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("kind", ["socket", "ring"])
def test_what_a_later_send_leaves_goes_first_with_the_next_send(kind: str) -> None:
    with _pair(kind) as (w, r):
        early = _calls(1, 3, 2 * MiB)  # far more than the socket or ring holds
        _in_thread(lambda: [w.send(m, LATER) for m in early])
        assert w.unsent  # the rest of the first, and the others behind it, wait in w
        got: list[Message] = []
        reader = _reader(r, 4, got)
        last = _calls(4, 1, 10)
        w.send(last[0], on_blocked=lambda: None)  # a writer that waits: the rest first
        reader.join(30)
        assert not w.unsent
        assert got == [*early, *last]


@pytest.mark.parametrize("kind", ["socket", "ring"])
def test_send_unsent_writes_on_as_room_frees_never_waiting(kind: str) -> None:
    with _pair(kind) as (w, r):
        msgs = _calls(1, 4, MiB)
        _in_thread(lambda: w.send_many(msgs, LATER))
        assert w.unsent
        _in_thread(lambda: w.send_unsent(LATER))  # no room yet: nothing waits
        got: list[Message] = []
        reader = _reader(r, 4, got)
        while w.unsent:  # (the pump's turns, or a program thread's reads)
            w.send_unsent(LATER)
            reader.join(0.001)
        reader.join(30)
        assert got == msgs


def test_close_drops_what_was_left() -> None:
    with _pair("socket") as (w, _):
        w.send(_calls(1, 1, 4 * MiB)[0], LATER)
        assert w.unsent
        w.close()
        assert w.unsent == [] and w.send_unsent(LATER) == 0
        with pytest.raises(ConnectionLostError):
            w.send(_calls(2, 1, 10)[0], LATER)


@pytest.mark.parametrize("kind", ["socket", "ring"])
def test_a_burst_of_small_later_sends_behind_a_full_connection(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of small LATER sends while the connection is full (the Revokes of calls
    timing out together at a replica that is not reading) each went over every piece
    left before them, to try the write again: 8,000 took 25 s of CPU over a socket,
    1.7 s through a ring. A send that finds it still full now puts its pieces behind the
    rest untried; all arrive whole and in order once the reader reads."""
    with _pair(kind) as (w, r):
        big = _calls(1, 1, 4 * MiB)
        _in_thread(lambda: w.send(big[0], LATER))
        assert w.unsent
        taken = 0
        take = w._take_unsent

        def counted(pieces: list[bytes | memoryview]) -> list[bytes | memoryview]:
            nonlocal taken
            taken += 1
            return take(pieces)

        monkeypatch.setattr(w, "_take_unsent", counted)
        small = _calls(2, 2000, 8)
        _in_thread(lambda: [w.send(m, LATER) for m in small])
        assert taken == 0, taken  # (none went over what was left before it)
        got: list[Message] = []
        reader = _reader(r, 2001, got)
        while w.unsent:
            w.send_unsent(LATER)
            reader.join(0.001)
        reader.join(30)
        assert got == [*big, *small]
