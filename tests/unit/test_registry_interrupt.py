"""`RegistryClient.interrupt` (a session closing, on its own thread) and the request's
own end (`close`, on the look's thread) never interleave: the interrupt shuts down the
client's own connection or nothing. Without that, a close between the interrupt's look
and its `shutdown` could free the descriptor for a new connection, and the interrupt
would shut down that one (no network: a socket pair as the registry's connection, the
socket-level shutdown replaced by one that records and waits)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from polybus.errors import TransportError
from polybus.registry.client import RegistryClient
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec


@pytest.fixture
def client() -> Iterator[tuple[RegistryClient, socket.socket]]:
    a, b = socket.socketpair()
    c = RegistryClient("127.0.0.1:9", b"token")
    c._ch = Channel(a, Codec(), "registry")  # (as if connected)
    try:
        yield c, b
    finally:
        c.close()
        a.close()
        b.close()


def test_close_waits_for_an_interrupt_under_way(
        client: tuple[RegistryClient, socket.socket],
        monkeypatch: pytest.MonkeyPatch) -> None:
    c, _ = client
    assert c._ch is not None
    fd = c._ch.sock.fileno()
    in_shutdown, let_go = threading.Event(), threading.Event()
    seen: list[int] = []
    plain = socket.socket.shutdown

    def slow_shutdown(s: Any, how: int) -> None:
        seen.append(s.fileno())  # (the descriptor the shutdown would be given)
        in_shutdown.set()
        let_go.wait(10)
        seen.append(s.fileno())
        plain(s, how)

    monkeypatch.setattr(socket.socket, "shutdown", slow_shutdown)
    interrupter = threading.Thread(target=c.interrupt)
    interrupter.start()
    assert in_shutdown.wait(10)
    closer = threading.Thread(target=c.close)
    closer.start()
    closer.join(0.2)
    alive = closer.is_alive()
    let_go.set()
    interrupter.join(10)
    closer.join(10)
    assert alive, "close freed the descriptor while an interrupt was using it"
    assert seen == [fd, fd]


def test_an_interrupted_client_asks_nothing_more(
        client: tuple[RegistryClient, socket.socket]) -> None:
    c, peer = client
    c.interrupt()
    peer.settimeout(5)
    assert peer.recv(1) == b""  # (its connection ended: the registry sees it closed)
    with pytest.raises(TransportError, match=r"^the request to the registry at "
                       r"127\.0\.0\.1:9 was interrupted \(the client is closing\)$"):
        c.resolve(module="m")
