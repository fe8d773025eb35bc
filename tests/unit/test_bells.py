"""Bells held back (a module's ``coalesce``; worker/bells.py, transport/ring.py): over a
real pair of shm channels, a writer asked to coalesce writes its frames at once and
rings no doorbell until it is owed one and rings it; other threads' sends, and writers
not asked, ring as ever."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from polybus.transport import ring as ring_mod
from polybus.transport.channel import Channel
from polybus.transport.shm import ShmChannel
from polybus.wire.codec import Codec
from polybus.wire.messages import Ping, Result
from polybus.worker.bells import OwedBells, coalescing

pytestmark = pytest.mark.skipif(not ring_mod.supported(), reason="the ring needs x86-64")


@contextmanager
def _pair() -> Iterator[tuple[ShmChannel, ShmChannel]]:
    """Writer (a replica's end) and reader (a client's end), their rings exchanged."""
    sa, sb = socket.socketpair()
    w, r = ShmChannel(sa, Codec(), "client"), ShmChannel(sb, Codec(), "replica")
    try:
        w.fill(wait=False)
        r.fill(wait=False)  # each takes the other's ring descriptor
        assert w._rx is not None and r._rx is not None
        yield w, r
    finally:
        w.close()
        r.close()


def _bells_waiting(reader: ShmChannel) -> int:
    """Doorbell bytes on the reader's socket, left there."""
    try:
        return len(reader.sock.recv(64, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return 0


def _read_all(reader: ShmChannel) -> list[object]:
    reader.fill(wait=False)
    got = []
    while (m := reader.next_message()) is not None:
        got.append(m)
    return got


def test_the_reader_asks_and_the_writer_sees_it() -> None:
    with _pair() as (w, r):
        assert w.coalesce_s() == 0.0 and coalescing(w) == 0.0  # not asked: no holding
        r.coalesce(0.05)
        assert w.coalesce_s() == pytest.approx(0.05) and coalescing(w) == pytest.approx(0.05)
        r.coalesce(0.0)
        assert w.coalesce_s() == 0.0


def test_asked_before_the_ring_came_it_is_set_when_it_does() -> None:
    sa, sb = socket.socketpair()
    w, r = ShmChannel(sa, Codec(), "client"), ShmChannel(sb, Codec(), "replica")
    try:
        r.coalesce(0.02)  # the writer's ring not attached yet
        w.fill(wait=False)
        r.fill(wait=False)
        assert w.coalesce_s() == pytest.approx(0.02)
    finally:
        w.close()
        r.close()


def test_a_quiet_send_writes_the_frame_and_owes_the_bell_until_rung() -> None:
    with _pair() as (w, r):
        with w.quiet():
            w.send(Result(1, "a"))
            w.send(Result(2, "b"))
        assert w.owed and _bells_waiting(r) == 0  # the reader sleeps: no bell yet
        assert r.ring_ready()  # ...but the frames are there for a reader that looks
        w.ring_owed()
        assert not w.owed and _bells_waiting(r) == 1  # one bell for both
        assert _read_all(r) == [Result(1, "a"), Result(2, "b")]


def test_a_plain_send_rings_and_another_threads_send_is_not_held() -> None:
    with _pair() as (w, r):
        w.send(Ping(1))
        assert _bells_waiting(r) == 1 and not w.owed
        r.sock.recv(64)
        with w.quiet():
            t = threading.Thread(target=w.send, args=(Ping(2),))
            t.start()
            t.join()
        assert _bells_waiting(r) == 1 and not w.owed  # that thread's bell went
        assert _read_all(r) == [Ping(1), Ping(2)]


def test_an_awake_reader_is_owed_nothing() -> None:
    with _pair() as (w, r):
        r.stay_awake(True)
        with w.quiet():
            w.send(Ping(3))
        assert not w.owed and _bells_waiting(r) == 0  # it looks anyway
        assert _read_all(r) == [Ping(3)]


def test_owed_bells_ring_when_due_or_all_at_once() -> None:
    with _pair() as (w, r), _pair() as (w2, r2):
        bells = OwedBells()
        assert bells.until_due() >= 3600  # none owed: a poller sleeps as it would
        assert bells.answer(w, [Result(1, 1)], within=60.0)  # (newly owed)
        assert 0 < bells.until_due() <= 60.0
        assert not bells.answer(w, [Result(3, 3)], within=0.0)  # (owed already: as it was)
        assert 0 < bells.until_due() <= 60.0
        assert bells.answer(w2, [Result(2, 2)], within=0.0)  # due at once
        assert bells.until_due() == 0.0
        assert bells and _bells_waiting(r) == 0 and _bells_waiting(r2) == 0
        bells.ring()  # only the due one
        assert _bells_waiting(r) == 0 and _bells_waiting(r2) == 1
        bells.ring(every=True)  # the queue went empty: every one
        assert _bells_waiting(r) == 1 and not bells
        assert _read_all(r) == [Result(1, 1), Result(3, 3)] and _read_all(r2) == [Result(2, 2)]


def test_a_closed_connection_owed_a_bell_is_passed_over() -> None:
    with _pair() as (w, r):
        bells = OwedBells()
        bells.answer(w, [Result(1, 1)], within=60.0)
        r.close()
        w.close()
        bells.ring(every=True)  # no error, nothing left
        assert not bells


def test_a_socket_channel_is_never_asked() -> None:
    a, b = socket.socketpair()
    try:
        assert coalescing(Channel(a, Codec(), "peer")) == 0.0
    finally:
        a.close()
        b.close()
