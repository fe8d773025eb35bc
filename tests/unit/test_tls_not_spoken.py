"""A connection accepted under ``[cluster] tls`` from a peer that speaks no TLS is said
as such (transport/tls.py `client_hello`): it sent no ClientHello in time, closed
without one, or sent bytes that are no TLS record. OpenSSL said only "_ssl.c:989: The
handshake operation timed out", or a reason such as WRONG_VERSION_NUMBER."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.errors import TLSHandshakeError
from polybus.registry.service import RegistryService
from polybus.transport import tls
from polybus.transport.endpoints import authenticate
from polybus.wire.codec import Codec

TOKEN = b"tls-not-spoken-token-0123456789"
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command to make a test CA")


def _ossl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> tls.TLSConfig:
    """A CA and a certificate it signed for 127.0.0.1."""
    d = tmp_path_factory.mktemp("pki")
    _ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ca",
          "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    (d / "node.ext").write_text("subjectAltName=IP:127.0.0.1\n"
                                "extendedKeyUsage=serverAuth,clientAuth\n")
    _ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=node", "-keyout", "node.key",
          "-out", "node.csr", cwd=d)
    _ossl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
          "-CAcreateserial", "-days", "2", "-extfile", "node.ext", "-out", "node.pem", cwd=d)
    return tls.TLSConfig(str(d / "node.pem"), str(d / "node.key"), str(d / "ca.pem"))


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket, tuple[str, int]]]:
    """A plain client connected over loopback, and the accepted socket and peer."""
    lst = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(lst.getsockname()[:2], timeout=10)
    sock, peer = lst.accept()
    try:
        yield client, sock, peer
    finally:
        for s in (client, sock, lst):
            s.close()


def _refusal(node: tls.TLSConfig, sock: socket.socket, peer: object) -> str:
    with pytest.raises(TLSHandshakeError) as info:
        authenticate(sock, peer, TOKEN, Codec(), 0.3, tls=node)
    return str(info.value)


def test_a_peer_that_sends_nothing_sent_no_client_hello(
        node: tls.TLSConfig, pair: tuple[socket.socket, socket.socket, tuple[str, int]]) -> None:
    _, sock, peer = pair  # (a plain polybus peer waits for a greeting, sending nothing)
    said = _refusal(node, sock, peer)
    assert said.startswith(f"handshake with {peer[0]}:{peer[1]} failed: the peer "
                           "does not speak TLS: it sent no TLS ClientHello within 0.3 s "
                           "(a polybus process without [cluster] tls"), said
    assert "timed out" not in said and "_ssl.c" not in said, said


def test_a_peer_that_sends_something_else_sent_no_tls_record(
        node: tls.TLSConfig, pair: tuple[socket.socket, socket.socket, tuple[str, int]]) -> None:
    client, sock, peer = pair
    client.sendall(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    said = _refusal(node, sock, peer)
    assert ("the peer does not speak TLS: it sent bytes that are not a TLS record "
            "(b'GET /'...; another protocol, such as HTTP") in said, said


def test_a_tls_registry_says_a_plain_peer_closed_without_a_client_hello(
        node: tls.TLSConfig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    tls.configure(node)
    try:
        with RegistryService(TOKEN) as reg:
            plain = socket.create_connection((reg.address.host, reg.address.port), timeout=10)
            plain.close()  # (as a plain peer does once it gives up waiting for a greeting)
            deadline = time.monotonic() + 20
            while not (said := [r.getMessage() for r in caplog.records
                                if "refused a connection" in r.getMessage()]):
                assert time.monotonic() < deadline, "the registry said nothing"
                time.sleep(0.02)
    finally:
        tls.configure(None)
    assert ("registry refused a connection: handshake with 127.0.0.1:" in said[0]
            and "failed: the peer does not speak TLS: it closed the connection without "
                "sending a TLS ClientHello (a polybus process without [cluster] tls"
            in said[0]), said
