"""`Channel.cut` (a replica ending a client taken for cut off, from its standby thread)
and `Channel.close` (the connection's owner, in another thread) never interleave: the
cut shuts down the channel's own connection or nothing. Without that, a close between
the cut's look and its `shutdown` could free the descriptor for a new connection, and
the cut would shut down that one (no network: a socket pair, the socket-level cut
replaced by one that records and waits)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from polybus.transport import channel as channel_mod
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec


@pytest.fixture
def chan() -> Iterator[tuple[Channel, socket.socket]]:
    a, b = socket.socketpair()
    ch = Channel(a, Codec(), "test-peer")
    try:
        yield ch, b
    finally:
        ch.close()
        b.close()


def test_a_cut_after_close_touches_no_descriptor(
        chan: tuple[Channel, socket.socket], monkeypatch: pytest.MonkeyPatch) -> None:
    ch, _ = chan
    cuts: list[int] = []
    monkeypatch.setattr(channel_mod, "cut_socket", lambda s: cuts.append(s.fileno()))
    ch.close()
    ch.cut()
    assert cuts == []


def test_close_waits_for_a_cut_under_way(
        chan: tuple[Channel, socket.socket], monkeypatch: pytest.MonkeyPatch) -> None:
    ch, _ = chan
    fd = ch.fileno()
    in_cut, let_go = threading.Event(), threading.Event()
    seen: list[int] = []

    def slow_cut(s: socket.socket) -> None:
        seen.append(s.fileno())  # (the descriptor the shutdown would be given)
        in_cut.set()
        let_go.wait(10)
        seen.append(s.fileno())

    monkeypatch.setattr(channel_mod, "cut_socket", slow_cut)
    cutter = threading.Thread(target=ch.cut)
    cutter.start()
    assert in_cut.wait(10)
    closer = threading.Thread(target=ch.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive(), "close freed the descriptor while a cut was using it"
    let_go.set()
    cutter.join(10)
    closer.join(10)
    assert seen == [fd, fd] and ch.fileno() == -1


def test_a_cut_ends_the_connection_for_its_peer(chan: tuple[Channel, socket.socket]) -> None:
    ch, peer = chan
    ch.cut()
    peer.settimeout(5)
    assert peer.recv(1) == b""  # (the channel's end shut down: its peer sees it ended)
