"""Mutual TLS between peers: certificates from a CA the test makes (openssl CLI); skipped
without it. The configuration's TLS files checked where they are read:
test_security_tls_check.py."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from polybus.client.stats import first_stats
from polybus.errors import TLSHandshakeError, TransportError
from polybus.registry.client import RegistryClient
from polybus.transport import tls
from polybus.transport.channel import Channel
from polybus.transport.endpoints import authenticate, connect
from polybus.transport.wake import Wake
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"tls-test-token-0123456789abcdef"
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command to make a test CA")


def _ossl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d: Path, name: str) -> None:
    _ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
          "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)


def make_leaf(d: Path, ca: str, name: str, san: str = "IP:127.0.0.1,DNS:localhost") -> None:
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\n"
                                   "extendedKeyUsage=serverAuth,clientAuth\n")
    _ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
          "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    _ossl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
          "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)


def make_pki(d: Path) -> Path:
    """In ``d``: two CAs (ca, otherca), leaves of ca (node, and node2 naming only
    node2.example.org) and of otherca (stranger), node's key locked with a passphrase
    (locked.key), and a file that is not PEM (junk.pem)."""
    make_ca(d, "ca")
    make_ca(d, "otherca")
    make_leaf(d, "ca", "node")
    make_leaf(d, "otherca", "stranger")
    make_leaf(d, "ca", "node2", "DNS:node2.example.org")  # one host's own, not the registry's
    _ossl("pkey", "-in", "node.key", "-aes128", "-passout", "pass:pw", "-out", "locked.key", cwd=d)
    (d / "junk.pem").write_text("not PEM\n")
    return d


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


def cfg(d: Path, leaf: str = "node", ca: str = "ca") -> tls.TLSConfig:
    return tls.TLSConfig(str(d / f"{leaf}.pem"), str(d / f"{leaf}.key"), str(d / f"{ca}.pem"))


@pytest.fixture
def tls_worker(pki: Path) -> Iterator[WorkerRuntime]:
    tls.configure(cfg(pki))
    rt = WorkerRuntime("t0", {"echo": lambda x: x}, TOKEN,
                       options=ServeOptions(handshake_timeout=2.0)).start()
    try:
        yield rt
    finally:
        rt.stop()
        tls.configure(None)


def test_mutual_tls_round_trip(tls_worker: WorkerRuntime) -> None:
    ch = connect(tls_worker.address, TOKEN, Codec())
    try:
        assert ch.tls
        version = ch.sock.version()  # type: ignore[attr-defined]
        assert version in ("TLSv1.2", "TLSv1.3")
        echo_twenty(ch)  # many TLS records, and non-blocking reads of them
    finally:
        ch.close()


def echo_twenty(ch: Channel) -> None:
    """Twenty echo calls on ``ch``, every fifth 300 KB (more than a socket takes at
    once), and every answer checked, in any order."""
    big = b"x" * 300_000
    for i in range(20):
        ch.send(Call(i, "echo", [i if i % 5 else big]))
    got: list[object] = []
    while len(got) < 20:
        got += ch.receive()
    got.sort(key=lambda r: r.id)  # type: ignore[attr-defined]
    assert got == [Result(i, i if i % 5 else big) for i in range(20)]


def _refused(address: str, ctx: ssl.SSLContext | None) -> None:
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    try:
        if ctx is not None:
            s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
        s.sendall(b"\0" * 72)
        data = s.recv(100)
        assert not data.startswith(b"PBUS"), "a polybus greeting reached a peer without TLS"
    except (ssl.SSLError, ConnectionError, TimeoutError):
        pass
    finally:
        s.close()


def test_peers_without_the_cluster_certificate_are_refused(tls_worker: WorkerRuntime, pki: Path) -> None:
    addr = str(tls_worker.address)
    _refused(addr, None)  # plain TCP: never greeted
    no_cert = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    _refused(addr, no_cert)  # TLS, but no client certificate
    foreign = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    foreign.load_cert_chain(str(pki / "stranger.pem"), str(pki / "stranger.key"))
    _refused(addr, foreign)  # a certificate from another CA
    # The client side checks the server too: trusting another CA, it refuses this one.
    with pytest.raises(TransportError, match=r"handshake|certificate"):
        connect(addr, TOKEN, Codec(), tls=cfg(pki, "stranger", "otherca"))
    ok = connect(addr, TOKEN, Codec())  # the worker still serves its cluster
    ok.close()


def test_a_tls_reader_asleep_wakes_when_rung(tls_worker: WorkerRuntime) -> None:
    """A client thread waiting on a TLS connection comes back when another rings its
    Wake (transport/wake.py), with nothing read, rather than waiting for data."""
    ch = connect(tls_worker.address, TOKEN, Codec())
    wake = Wake()
    ch.wake = wake
    ringer = threading.Timer(0.1, wake.ring)
    try:
        ringer.start()
        assert ch.fill(wait=True) == 0  # (without the ring: asleep until data, i.e. for ever)
        ch.send(Call(1, "echo", [5]))
        got: list[object] = []
        while not got:
            got += ch.receive()
        assert got == [Result(1, 5)]  # the connection is as it was
    finally:
        ringer.cancel()
        ch.close()
        wake.close()


def test_a_replica_s_counters_are_waited_for_asleep_over_tls(tls_worker: WorkerRuntime) -> None:
    """`first_stats` (client/stats.py) sleeps on the connection (`wait_readable`): over
    TLS too, where the poll cannot see records OpenSSL has already decrypted."""
    ch = connect(tls_worker.address, TOKEN, Codec())
    try:
        assert not ch.wait_readable(0.05)  # (nothing sent: nothing comes)
        got = first_stats(ch, seconds=10.0)
        assert got is not None and got.name == "t0" and got.calls == 0
    finally:
        ch.close()


@pytest.fixture
def server() -> Iterator[Callable[[tls.TLSConfig | None, float], str]]:
    """server(tls, timeout): a listener on loopback whose every connection gets the
    server side of the handshake (`authenticate`) with that TLS setting, whatever this
    process's `tls.configure` says; its address."""
    listeners: list[socket.socket] = []

    def start(config: tls.TLSConfig | None, timeout: float) -> str:
        lst = socket.create_server(("127.0.0.1", 0))
        listeners.append(lst)

        def serve() -> None:
            while True:
                try:
                    sock, peer = lst.accept()
                except OSError:
                    return
                try:
                    authenticate(sock, peer, TOKEN, Codec(), timeout, tls=config).close()
                except Exception:  # (refused: what the client says is under test)
                    pass

        threading.Thread(target=serve, daemon=True).start()
        return f"127.0.0.1:{lst.getsockname()[1]}"

    yield start
    for lst in listeners:
        lst.close()


def test_a_tls_mismatch_is_said_as_such_not_as_a_registry_that_does_not_answer(
        pki: Path, tmp_path: Path, server: Callable[[tls.TLSConfig | None, float], str]) -> None:
    # A registry that is running, in another TLS setting than the client's, was reported
    # as "no registry answers at ... : is `polybus registry` running?".
    assert tls.current() is None
    node = cfg(pki)
    # A plain client, a TLS registry that waits for a ClientHello (longer than the
    # client waits for a greeting, then not).
    for server_timeout, said in ((5.0, "sent no polybus greeting within 1 s"),
                                 (0.2, "it answered in TLS (a TLS record where its polybus greeting")):
        with pytest.raises(TLSHandshakeError) as info:
            RegistryClient(server(node, server_timeout), TOKEN, timeout=1.0).resolve()
        assert said in str(info.value)
        assert "[cluster] tls" in str(info.value)
        assert "no registry answers" not in str(info.value)
    # A TLS client, a plain registry.
    plain = server(None, 2.0)
    with pytest.raises(TLSHandshakeError, match=r"the peer does not speak TLS .*was it "
                                                r"started without \[cluster\] tls"):
        connect(plain, TOKEN, Codec(), timeout=2.0, tls=node)
    # Both in TLS: a registry whose certificate this client's CA did not sign, and one
    # that refuses this client's certificate (from a CA this client trusts, it does not).
    at = server(node, 2.0)
    with pytest.raises(TLSHandshakeError) as info:
        connect(at, TOKEN, Codec(), timeout=2.0, tls=cfg(pki, "stranger", "otherca"))
    assert f"its certificate is not signed by this process's CA {pki}/otherca.pem" in str(info.value)
    bundle = tmp_path / "both.pem"
    bundle.write_text((pki / "ca.pem").read_text() + (pki / "otherca.pem").read_text())
    stranger = tls.TLSConfig(str(pki / "stranger.pem"), str(pki / "stranger.key"), str(bundle))
    with pytest.raises(TLSHandshakeError) as info:
        connect(at, TOKEN, Codec(), timeout=2.0, tls=stranger)
    assert (f"the peer refused this process's certificate {pki}/stranger.pem "
            "(cluster.tls.cert)") in str(info.value)
    # The same peers, in the same setting, still meet.
    connect(at, TOKEN, Codec(), timeout=2.0, tls=node).close()
    connect(plain, TOKEN, Codec(), timeout=2.0).close()


def _waits_for_our_hello(s: socket.socket) -> None:
    """The peer sends nothing first (it waits for our TLS hello); then a 3 s bound."""
    s.settimeout(0.3)
    with pytest.raises(TimeoutError):
        s.recv(1)
    s.settimeout(3)


def _closed_by_peer(s: socket.socket) -> None:
    """The peer closed ``s`` (well within its 3 s timeout)."""
    try:
        assert s.recv(1) == b""
    except ConnectionResetError:
        pass  # (also closed by it)

def test_the_registry_close_ends_a_tls_handshake_under_way(pki: Path) -> None:
    """A connection still in its TLS handshake when the registry closes is closed with
    it. The registry shut accepted sockets down to end their handshakes, but a TLS one
    is wrapped (the wrapper takes the descriptor): it ran on to its 5 s timeout."""
    from polybus.registry.service import RegistryService

    tls.configure(cfg(pki))
    reg = RegistryService(TOKEN, "tcp://127.0.0.1:0")
    s = socket.create_connection((reg.address.host, reg.address.port), timeout=3)
    try:
        _waits_for_our_hello(s)
        reg.close()
        _closed_by_peer(s)
    finally:
        s.close()
        reg.close()
        tls.configure(None)


def test_a_replica_s_stop_ends_a_tls_handshake_under_way(pki: Path) -> None:
    """As the registry's close(): a connection still in its TLS handshake when the
    replica stops is closed with it, and its thread ends (they ran on to the
    handshake's timeout, 60 s here)."""
    tls.configure(cfg(pki))
    rt = WorkerRuntime("tls-stop", {"echo": lambda x: x}, TOKEN,
                       options=ServeOptions(pool=1, handshake_timeout=60.0)).start()
    stopped = False
    try:
        s = socket.create_connection((rt.address.host, rt.address.port), timeout=3)
        try:
            _waits_for_our_hello(s)
            deadline = time.monotonic() + 3  # (accepted by the replica's poller)
            while not (greeting := [t for t in threading.enumerate()
                                    if t.name == "polybus-tls-stop-handshake"]):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            rt.stop()
            stopped = True
            greeting[0].join(timeout=3)  # a bound, well short of the 60 s
            assert not greeting[0].is_alive()
            _closed_by_peer(s)
        finally:
            s.close()
    finally:
        if not stopped:
            rt.stop()
        tls.configure(None)


@pytest.mark.skipif(not hasattr(socket, "TCP_KEEPIDLE"), reason="TCP_KEEPIDLE is Linux's")
def test_links_dialled_in_tls_are_probed_as_plain_ones(pki: Path) -> None:
    """A replica's link to the replica it forwards to, and a link to the registry, are
    probed beneath their TLS, as over plain tcp (tests/unit/test_keepalive.py)."""
    from polybus.registry.service import RegistryService
    from polybus.wire.messages import Deliver

    def probing(sock: socket.socket) -> tuple[int, ...]:
        return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL))

    tls.configure(cfg(pki))
    made = []
    try:
        with RegistryService(TOKEN, "tcp://127.0.0.1:0") as reg:
            client = RegistryClient(str(reg.address), TOKEN, heartbeat=2.0)
            try:
                assert client.resolve(module="m") == []
                assert client._ch is not None and client._ch.tls
                assert probing(client._ch.sock) == (1, 2, 2)
            finally:
                client.close()
        made = [WorkerRuntime(n, {}, TOKEN, options=ServeOptions(heartbeat=2.0)).start()
                for n in ("producer", "consumer")]
        producer, consumer = made
        to = str(consumer.address)
        assert producer.forwarding._send(to, Deliver("k", True, 1))
        peer = producer.forwarding._peers[to]
        assert peer.tls and probing(peer.sock) == (1, 2, 2)
    finally:
        for rt in made:
            rt.stop()
        tls.configure(None)
