"""A peer that sends its part of the handshake a byte at a time, each byte sooner than
`handshake_timeout`, at a live replica and a client over loopback TCP.

`handshake_timeout` bounds the whole handshake, not each read: the replica drops such a
peer once its handshake has taken that long, and says so; a client gives up on a server
that drips its greeting so. It bounded each read: one byte every 0.9 s of a 1 s timeout
held the replica's handshake (and its place among the 64 under way) for the 72 bytes
of a proof, over a minute, and a client waited as long for a greeting.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from polybus.errors import TransportError
from polybus.transport.endpoints import connect
from polybus.wire import handshake
from polybus.wire.codec import Codec
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"handshake-drip-token-0123456789!"
TIMEOUT = 1.0
GAP = 0.3  # between two bytes: each read is well within TIMEOUT


@pytest.fixture
def worker() -> Iterator[WorkerRuntime]:
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN,
                       options=ServeOptions(handshake_timeout=TIMEOUT)).start()
    try:
        yield rt
    finally:
        rt.stop()


def _closed(s: socket.socket) -> bool:
    """Whether the peer has closed ``s`` (reading it gives its end, or a reset)."""
    s.settimeout(0.05)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_a_replica_drops_a_peer_that_drips_its_proof(
        worker: WorkerRuntime, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    s = socket.create_connection((worker.address.host, worker.address.port), timeout=3)
    try:
        hello = s.recv(handshake.HELLO_SIZE)
        assert len(hello) == handshake.HELLO_SIZE
        # The bytes of a proof (ones that cannot begin one are refused at once).
        proof = handshake.ClientHandshake(TOKEN).proof(hello)
        dripped = 0
        # Four timeouts' worth of bytes, one per GAP (a proof is 72: far from whole).
        while dripped < 4 * TIMEOUT / GAP and not _closed(s):
            try:
                s.sendall(proof[dripped:dripped + 1])
            except OSError:
                break
            dripped += 1
            time.sleep(GAP)
        assert dripped < handshake.PROOF_SIZE
        assert _closed(s), f"still in its handshake after {dripped} bytes, one per {GAP} s"
    finally:
        s.close()
    deadline = time.monotonic() + 3
    while "timed out" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "timed out" in caplog.text


def test_a_client_gives_up_on_a_server_that_drips_its_greeting() -> None:
    lst = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        conn, _ = lst.accept()
        with conn:
            for b in handshake.ServerHandshake(TOKEN).hello():
                if stop.wait(GAP):
                    return
                try:
                    conn.sendall(bytes([b]))
                except OSError:
                    return

    t = threading.Thread(target=drip, daemon=True)
    t.start()
    try:
        with pytest.raises(TransportError, match="timed out"):
            connect(f"tcp://127.0.0.1:{lst.getsockname()[1]}", TOKEN, Codec(), timeout=TIMEOUT)
    finally:
        stop.set()
        t.join(timeout=5)
        lst.close()
