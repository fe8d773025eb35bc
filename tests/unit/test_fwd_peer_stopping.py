"""A connection closed by a peer before its polybus greeting is said as that, not as a
peer in another TLS setting (transport/endpoints.py `connect`).

A replica stopping on SIGTERM ends its handshakes first (`Greeting.end`) and closes
the listener last: a connection its poller accepts meanwhile is closed at once, with
not a byte sent (worker/accepting.py). A replica forwarding a value to it then said
"closed the connection without a polybus greeting (a peer that uses TLS, [cluster]
tls, closes a plain connection so ...)". The TLS hint stays for bytes that look like
TLS: a peer in TLS answers a plain connection with a TLS alert before it closes it."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polybus.errors import TLSHandshakeError, TransportError
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Deliver, Message, Undelivered
from polybus.worker.runtime import WorkerRuntime
from unit.test_fwd_send_later import _Client

TOKEN = b"fwd-stop-token-0123456789abcdef!"
CLOSED = "closed the connection during the greeting, before sending it"


@pytest.fixture
def peer() -> Iterator[Callable[[bytes], str]]:
    """peer(first): a loopback listener that answers each connection with ``first``
    (nothing, or a few bytes) and closes it; its address."""
    listeners: list[socket.socket] = []

    def start(first: bytes) -> str:
        lst = socket.create_server(("127.0.0.1", 0))
        listeners.append(lst)

        def serve() -> None:
            while True:
                try:
                    sock, _ = lst.accept()
                except OSError:
                    return
                with sock:
                    sock.sendall(first)

        threading.Thread(target=serve, daemon=True).start()
        return f"127.0.0.1:{lst.getsockname()[1]}"

    yield start
    for lst in listeners:
        lst.close()


def test_a_peer_that_closes_before_its_greeting_is_said_so_without_a_tls_hint(
        peer: Callable[[bytes], str]) -> None:
    with pytest.raises(TransportError) as info:
        connect(peer(b""), TOKEN, Codec(), timeout=5.0)
    assert CLOSED in str(info.value)
    assert "stopping" in str(info.value)
    assert "TLS" not in str(info.value) and not isinstance(info.value, TLSHandshakeError)


def test_a_tls_alert_where_the_greeting_was_due_is_said_as_a_peer_in_tls(
        peer: Callable[[bytes], str]) -> None:
    alert = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28])  # (fatal handshake_failure)
    with pytest.raises(TLSHandshakeError, match=r"it answered in TLS.*\[cluster\] tls"):
        connect(peer(alert), TOKEN, Codec(), timeout=5.0)


def test_a_replica_forwarding_to_a_stopping_one_says_it_closed_the_connection(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    sender = WorkerRuntime("w0", {}, TOKEN).start()
    stopping = WorkerRuntime("w1", {}, TOKEN).start()
    client = _Client()

    def told(ch: Any, msg: Message) -> None:
        client.told.append(msg)

    monkeypatch.setattr(sender, "_send_quietly", told)
    try:
        stopping._greeting.end(timeout=0)  # (stop()'s first step: its listener still open)
        with caplog.at_level(logging.WARNING, logger="polybus.worker"):
            went = sender.forwarding._send(str(stopping.address), Deliver("k", True, 1),
                                           client)  # type: ignore[arg-type]
    finally:
        stopping.stop()
        sender.stop()
    assert not went
    said = [r.getMessage() for r in caplog.records if "cannot forward" in r.getMessage()]
    assert len(said) == 1 and CLOSED in said[0] and "TLS" not in said[0], said
    (undelivered,) = client.told
    assert isinstance(undelivered, Undelivered)
    assert CLOSED in undelivered.message and "TLS" not in undelivered.message
