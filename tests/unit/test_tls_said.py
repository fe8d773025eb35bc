"""What each side of a refused TLS handshake says, in the user's terms: a certificate
out of its dates is said to be so (not "not signed by the CA"), and the accepting side
(a registry's or worker's log) says what the dialling side says, not OpenSSL's words.
Certificates from a CA the test makes (openssl CLI); skipped without it."""

from __future__ import annotations

import queue
import shutil
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_security_tls import TOKEN, cfg, make_pki  # tests/unit

from polybus.errors import ConfigError, PolybusError, TLSHandshakeError
from polybus.transport import tls
from polybus.transport.endpoints import PeerWentAway, authenticate, connect
from polybus.wire.codec import Codec

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command to make a test CA")

Server = Callable[[tls.TLSConfig | None], tuple[str, "queue.Queue[BaseException | None]"]]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """make_pki's files, and ``old``: a leaf of ca that expired yesterday."""
    d = make_pki(tmp_path_factory.mktemp("pki"))
    (d / "old.ext").write_text("subjectAltName=IP:127.0.0.1\n"
                               "extendedKeyUsage=serverAuth,clientAuth\n")
    import subprocess

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=old", "-keyout", "old.key",
         "-out", "old.csr")
    ossl("x509", "-req", "-in", "old.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-days", "-1", "-extfile", "old.ext", "-out", "old.pem")
    return d


@pytest.fixture
def server() -> Iterator[Server]:
    """server(tls): a loopback listener whose connections get the accepting side of the
    handshake in that setting; its address, and a queue of what each handshake raised
    (None: it passed)."""
    listeners: list[socket.socket] = []

    def start(config: tls.TLSConfig | None) -> tuple[str, queue.Queue[BaseException | None]]:
        lst = socket.create_server(("127.0.0.1", 0))
        listeners.append(lst)
        said: queue.Queue[BaseException | None] = queue.Queue()

        def serve() -> None:
            while True:
                try:
                    sock, peer = lst.accept()
                except OSError:
                    return
                try:
                    authenticate(sock, peer, TOKEN, Codec(), 2.0, tls=config).close()
                    said.put(None)
                except Exception as exc:
                    said.put(exc)

        threading.Thread(target=serve, daemon=True).start()
        return f"127.0.0.1:{lst.getsockname()[1]}", said

    yield start
    for lst in listeners:
        lst.close()


def _refused(address: str, config: tls.TLSConfig, host: str = "") -> str:
    if host:
        address = f"{host}:{address.rpartition(':')[2]}"
    with pytest.raises(PolybusError) as info:
        connect(address, TOKEN, Codec(), timeout=2.0, tls=config).close()
    return str(info.value)


def test_check_says_an_expired_certificate_has_expired(pki: Path) -> None:
    with pytest.raises(ConfigError) as info:
        cfg(pki, "old").verify("127.0.0.1")
    text = str(info.value)
    assert info.value.key == "cluster.tls.cert"
    assert f"the certificate {pki}/old.pem has expired (certificate has expired)" in text
    assert "not signed" not in text


def test_a_peer_with_an_expired_certificate_is_said_expired_on_both_sides(
        pki: Path, server: Server) -> None:
    # The accepting side's certificate expired: the dialling side says so.
    at, said = server(cfg(pki, "old"))
    text = _refused(at, cfg(pki))
    assert "its certificate has expired (certificate has expired)" in text, text
    assert "not signed" not in text
    assert "TLS handshake" in str(said.get(timeout=5))
    # The dialling side's expired: the accepting side says it, the dialling side is told.
    at, said = server(cfg(pki))
    text = _refused(at, cfg(pki, "old"))
    assert f"the peer refused this process's certificate {pki}/old.pem" in text, text
    assert "it has expired" in text, text
    error = said.get(timeout=5)
    assert isinstance(error, TLSHandshakeError), error
    assert "the peer's certificate has expired (certificate has expired)" in str(error)


def test_the_accepting_side_says_why_in_the_users_terms(
        pki: Path, tmp_path: Path, server: Server) -> None:
    first, said = server(cfg(pki))
    at = first
    # A peer that trusts another CA refuses this side's certificate.
    _refused(at, cfg(pki, "stranger", "otherca"))
    error = said.get(timeout=5)
    assert isinstance(error, TLSHandshakeError), error
    assert (f"the peer refused this process's certificate {pki}/node.pem (cluster.tls.cert) "
            "(TLSV1_ALERT_UNKNOWN_CA): does it trust another CA?") in str(error)
    assert "_ssl.c" not in str(error)
    # A peer whose certificate this side's CA did not sign (it trusts both CAs).
    bundle = tmp_path / "both.pem"
    bundle.write_text((pki / "ca.pem").read_text() + (pki / "otherca.pem").read_text())
    _refused(at, tls.TLSConfig(str(pki / "stranger.pem"), str(pki / "stranger.key"),
                               str(bundle)))
    error = said.get(timeout=5)
    assert isinstance(error, TLSHandshakeError), error
    assert f"the peer's certificate is not signed by this process's CA {pki}/ca.pem" in str(error)
    # A peer that dialled a name this side's certificate does not hold (node2's names
    # only node2.example.org; the peer dials 127.0.0.1).
    at, said = server(cfg(pki, "node2"))
    text = _refused(at, cfg(pki))
    assert "its certificate does not name 127.0.0.1" in text, text
    assert "'.)" not in text, text  # (OpenSSL's sentence, its full stop left out)
    error = said.get(timeout=5)
    assert isinstance(error, TLSHandshakeError), error
    assert (f"the peer refused this process's certificate {pki}/node2.pem (cluster.tls.cert) "
            "(SSLV3_ALERT_BAD_CERTIFICATE): does it name the host the peer dialled?") in str(error)
    # The first server still takes a member in good standing.
    connect(first, TOKEN, Codec(), timeout=2.0, tls=cfg(pki)).close()


def test_a_malformed_tls_handshake_is_said_as_such_not_in_openssls_word_alone(
        pki: Path, server: Server) -> None:
    """A peer that sends a TLS record which is no ClientHello: the log said only
    ``UNEXPECTED_MESSAGE``."""
    at, said = server(cfg(pki))
    host, _, port = at.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"\x16\x03\x01\x00\x05hello")
        try:
            s.recv(100)  # (its alert, or the close)
        except OSError:
            pass
    error = said.get(timeout=5)
    assert isinstance(error, TLSHandshakeError), error
    text = str(error)
    assert "UNEXPECTED_MESSAGE" in text, text  # (OpenSSL's word kept, in brackets)
    assert ("sent a TLS handshake this process cannot take (UNEXPECTED_MESSAGE): not a "
            "member of this cluster") in text, text
    # The server takes a member in good standing after it.
    connect(at, TOKEN, Codec(), timeout=2.0, tls=cfg(pki)).close()


def _client_hello_then_close(at: str, config: tls.TLSConfig, *, read_flight: bool) -> None:
    """A TLS client that sends its ClientHello and closes without a word: a member whose
    own handshake deadline passed, or whose process was killed (``read_flight``: after
    the server's first flight came)."""
    host, _, port = at.rpartition(":")
    out, into = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = config.client_context().wrap_bio(into, out, server_hostname=host)
    with pytest.raises(ssl.SSLWantReadError):
        hello.do_handshake()
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(out.read())
        if read_flight:
            s.recv(65536)


@pytest.mark.parametrize("read_flight", [False, True])
def test_a_peer_gone_in_the_tls_handshake_is_said_gone_not_a_stranger(
        pki: Path, server: Server, read_flight: bool) -> None:
    """It said `the peer sent a TLS handshake this process cannot take
    (UNEXPECTED_EOF_WHILE_READING): not a member of this cluster`, of a member that
    gave up: gone, as a plain peer that closes before its proof is said."""
    at, said = server(cfg(pki))
    _client_hello_then_close(at, cfg(pki), read_flight=read_flight)
    error = said.get(timeout=5)
    assert isinstance(error, PeerWentAway), error
    assert "went away during the handshake" in str(error), error
    assert "not a member" not in str(error), error
    connect(at, TOKEN, Codec(), timeout=2.0, tls=cfg(pki)).close()



def test_a_tls_member_at_a_plain_listener_is_said_as_one(pki: Path, server: Server) -> None:
    """A polybus process with [cluster] tls dialling one without: the plain side said its
    ClientHello's bytes were `another protocol, such as HTTP, or a client that is not
    polybus`."""
    at, said = server(None)  # (plain: tls.current() is None here)
    _refused(at, cfg(pki))
    error = said.get(timeout=5)
    text = str(error)
    assert "not a polybus peer" in text, text
    assert "a TLS ClientHello" in text and "[cluster] tls" in text, text
    assert "such as HTTP" not in text, text
