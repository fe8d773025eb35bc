"""A peer that closes its end during the accepting side's handshake went away: it was
not refused. A client whose own handshake gave up (after 5 s against a worker stopped
with SIGSTOP) left the worker, once it ran again, to log "refused a connection:
handshake with 127.0.0.1:PORT failed: [Errno 32] Broken pipe" (transport/endpoints.py
`authenticate`, worker/accepting.py, registry/service.py)."""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Callable

import pytest

from polybus.errors import AuthenticationError
from polybus.registry.service import RegistryService
from polybus.transport.endpoints import Address, PeerWentAway, authenticate
from polybus.wire import handshake
from polybus.wire.codec import Codec
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"handshake-gone-token-0123456789ab"


def _pair() -> tuple[socket.socket, socket.socket, tuple[str, int]]:
    """A connected loopback pair: the peer's end, the accepted end, the peer's address."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        peer = socket.create_connection(server.getsockname(), timeout=10)
        accepted, where = server.accept()
    return peer, accepted, where


def _closed(peer: socket.socket) -> None:
    peer.close()


def _reset(peer: socket.socket) -> None:
    """Closed with a reset (linger 0), as a peer closing with unread bytes does."""
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()


@pytest.mark.parametrize("close", [_closed, _reset])
def test_a_peer_that_closes_before_its_proof_went_away(
        close: Callable[[socket.socket], None]) -> None:
    peer, accepted, where = _pair()
    close(peer)
    with pytest.raises(PeerWentAway) as info:
        authenticate(accepted, where, TOKEN, Codec(), 5.0)
    said = str(info.value)
    assert said.startswith(f"{where[0]}:{where[1]} went away during the handshake ("), said
    assert "a client that gave up waiting for this process to answer" in said, said
    assert "refused" not in said and "not a polybus peer" not in said, said
    assert accepted.fileno() == -1  # (closed)


def test_a_stranger_that_stays_is_still_refused() -> None:
    """The control: a peer that sends a proof that is not polybus's is refused so."""
    peer, accepted, where = _pair()
    try:
        peer.sendall(b"GET / HTTP/1.1\r\n\r\n".ljust(handshake.PROOF_SIZE, b"\0"))
        with pytest.raises(AuthenticationError, match="not a polybus peer"):
            authenticate(accepted, where, TOKEN, Codec(), 5.0)
    finally:
        peer.close()


def _gone_peer(address: Address, close: Callable[[socket.socket], None],
               caplog: pytest.LogCaptureFixture) -> str:
    """A peer that connects and closes at once, as a client that gave up does: what the
    listener logged of it. (One a listener: a second alike may be held back, quieted.)"""
    close(socket.create_connection((address.host, address.port), timeout=10))
    deadline = time.monotonic() + 20
    while not caplog.records:
        assert time.monotonic() < deadline, "nothing said"
        time.sleep(0.02)
    [said] = [r.getMessage() for r in caplog.records]
    return said


@pytest.mark.parametrize("close", [_closed, _reset])
def test_a_worker_says_a_client_that_gave_up_went_away(
        close: Callable[[socket.socket], None], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    rt = WorkerRuntime("gone-0", {"echo": lambda x: x}, TOKEN,
                       options=ServeOptions(pool=1)).start()
    try:
        said = _gone_peer(rt.address, close, caplog)
    finally:
        rt.stop()
    assert said.startswith("worker gone-0: 127.0.0.1:"), said
    assert "went away during the handshake" in said and "refused" not in said, said


@pytest.mark.parametrize("close", [_closed, _reset])
def test_a_registry_says_a_client_that_gave_up_went_away(
        close: Callable[[socket.socket], None], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    with RegistryService(TOKEN, "tcp://127.0.0.1:0") as reg:
        said = _gone_peer(reg.address, close, caplog)
    assert said.startswith("registry: 127.0.0.1:"), said
    assert "went away during the handshake" in said and "refused" not in said, said
