"""`handshake_timeout` bounds the whole handshake under `[cluster] tls` too, at a
registry and at a replica (one code path: endpoints.authenticate), over loopback.

Its parts had a timeout each: the wait for a ClientHello, the TLS handshake, then the
polybus greeting and proof. A peer that took nearly a timeout over each held its
handshake, and its place among the 64 under way, for nearly three (a peer pausing
0.9 s of a 1 s timeout before its ClientHello, 0.8 s before its Finished and dripping
its proof was dropped after 2.8 s). Here a peer pauses 0.7 of the timeout before its
ClientHello and as long before its last TLS flight: within each part's own timeout,
past the whole's, so it is never greeted. (The ssl module bounds a TLS handshake as a
whole by the socket's timeout: a record dripped a byte at a time within it is cut
there; the proof after it was bounded by test_handshake_drip.py.)
"""

from __future__ import annotations

import logging
import shutil
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from test_security_tls import cfg, make_pki  # tests/unit

from polybus.registry.service import RegistryService
from polybus.transport import tls
from polybus.transport.endpoints import Address, connect
from polybus.wire import handshake
from polybus.wire.codec import Codec
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"tls-whole-handshake-token-0123456"
TIMEOUT = 1.5
PAUSE = 0.7 * TIMEOUT  # before the ClientHello, and before the last TLS flight

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command to make a test CA")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


@contextmanager
def _registry() -> Iterator[Address]:
    with RegistryService(TOKEN, "tcp://127.0.0.1:0", handshake_timeout=TIMEOUT) as reg:
        yield reg.address


@contextmanager
def _replica() -> Iterator[Address]:
    rt = WorkerRuntime("tls-whole", {"echo": lambda x: x}, TOKEN,
                       options=ServeOptions(handshake_timeout=TIMEOUT)).start()
    try:
        yield rt.address
    finally:
        rt.stop()


def _slow_peer(address: Address, config: tls.TLSConfig) -> str:
    """A TLS peer of the cluster that pauses PAUSE before its ClientHello and before
    each later flight of its TLS handshake: "greeted" if the polybus greeting came
    after, "closed" if the server closed the connection first."""
    s = socket.create_connection((address.host, address.port), timeout=5)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    peer = config.client_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    try:
        time.sleep(PAUSE)
        flights = 0
        while True:
            try:
                peer.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            if flight := outgoing.read():
                if flights:
                    time.sleep(PAUSE)
                s.sendall(flight)
                flights += 1
            if done:
                break
            if not (got := s.recv(65536)):
                return "closed"
            incoming.write(got)
        while True:
            try:
                hello = peer.read(handshake.HELLO_SIZE)
                return "greeted" if hello.startswith(b"PBUS") else "closed"
            except ssl.SSLWantReadError:
                if not (got := s.recv(65536)):
                    return "closed"
                incoming.write(got)
    except (ssl.SSLError, ConnectionError):
        return "closed"
    finally:
        s.close()


@pytest.mark.parametrize(("server", "logger"), [(_registry, "polybus.registry"),
                                                (_replica, "polybus.worker")],
                         ids=["registry", "replica"])
def test_a_tls_handshake_is_bounded_as_a_whole(
        pki: Path, caplog: pytest.LogCaptureFixture,
        server: Callable[[], AbstractContextManager[Address]],
        logger: str) -> None:
    caplog.set_level(logging.WARNING, logger=logger)
    tls.configure(cfg(pki))
    try:
        with server() as address:
            assert _slow_peer(address, cfg(pki)) == "closed"
            deadline = time.monotonic() + 3
            while "TLS handshake" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.01)
            assert "timed out in its TLS handshake" in caplog.text, caplog.text
            connect(address, TOKEN, Codec()).close()  # (a good peer gets through)
    finally:
        tls.configure(None)
