"""A plain client that dials a TLS registry reads the TLS alert the registry sends a
peer that sent nothing within its handshake timeout (transport/tls.py `_ALERT`) where
its greeting was due. The two sides' timeouts are equal by default, so the alert may
come just before the client's own deadline and the registry's close just after it: the
client then holds 7 bytes of a 40-byte greeting when its deadline passes. It said that
as a registry that does not answer, `no registry answers at HOST:PORT (handshake with
... failed: timed out (7 of its 40 bytes came in time)): is `polybus registry`
running?`, of a registry that was running, in TLS (seen with a plain `polybus run
--registry` against a `polybus registry --config` with `[cluster] tls`, about one try
in four). What came is a TLS record: it is said as one, as when the close came first."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from polybus.errors import TLSHandshakeError
from polybus.registry.client import RegistryClient
from polybus.transport import tls
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec

TOKEN = b"tls-alert-late-token-0123456789"


@pytest.fixture
def alert_then_hold() -> Iterator[str]:
    """A listener that sends each connection the TLS side's alert at once, then holds
    it open, silent, until the test ends (its close comes after the client's deadline)."""
    lst = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    lst.settimeout(0.05)  # (a close does not wake an accept: the loop looks at done)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                sock, _ = lst.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.sendall(tls._ALERT)
            held.append(sock)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{lst.getsockname()[1]}"
    finally:
        done.set()
        thread.join(5)
        lst.close()
        for sock in held:
            sock.close()


def test_a_tls_alert_then_the_deadline_is_said_as_tls(alert_then_hold: str) -> None:
    assert tls.current() is None
    with pytest.raises(TLSHandshakeError) as info:
        connect(alert_then_hold, TOKEN, Codec(), timeout=0.5)
    said = str(info.value)
    assert "it answered in TLS (a TLS record where its polybus greeting was due)" in said
    assert "[cluster] tls" in said
    assert "came in time" not in said


def test_the_registry_client_says_it_is_a_registry_in_tls(alert_then_hold: str) -> None:
    lookup = RegistryClient(alert_then_hold, TOKEN, timeout=0.5)
    try:
        with pytest.raises(TLSHandshakeError) as info:
            lookup.resolve()
    finally:
        lookup.close()
    said = str(info.value)
    assert said.startswith(f"registry at {alert_then_hold}: ")
    assert "it answered in TLS" in said
    assert "no registry answers" not in said
