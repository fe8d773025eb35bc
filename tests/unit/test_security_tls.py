"""Mutual TLS: certificates from a CA the test makes (openssl CLI); skipped without it."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from polybus.cli.main import main
from polybus.config import load, validate
from polybus.errors import ConfigError, TLSHandshakeError, TransportError
from polybus.registry.client import RegistryClient
from polybus.testing.apps import write_one_call_app
from polybus.transport import tls
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


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "ca")
    make_ca(d, "otherca")
    make_leaf(d, "ca", "node")
    make_leaf(d, "otherca", "stranger")
    make_leaf(d, "ca", "node2", "DNS:node2.example.org")  # one host's own, not the registry's
    _ossl("pkey", "-in", "node.key", "-aes128", "-passout", "pass:pw", "-out", "locked.key", cwd=d)
    (d / "junk.pem").write_text("not PEM\n")
    return d


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
        big = b"x" * 300_000  # many TLS records, and non-blocking reads of them
        for i in range(20):
            ch.send(Call(i, "echo", [i if i % 5 else big]))
        got: list[object] = []
        while len(got) < 20:
            got += ch.receive()
        got.sort(key=lambda r: r.id)  # type: ignore[attr-defined]
        assert got == [Result(i, i if i % 5 else big) for i in range(20)]
    finally:
        ch.close()


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


def test_tls_key_in_configuration(pki: Path, tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")
    (tmp_path / "app.toml").write_text(
        '[modules.s]\nsource = "s.py"\n[modules.c]\nsource = "c.py"\nentrypoint = "main"\n'
        '[bind]\n"c.f" = "s.f"\n'
        f'[cluster]\ntls = {{ cert = "{pki}/node.pem", key = "{pki}/node.key", ca = "{pki}/ca.pem" }}\n')
    app = load(tmp_path / "app.toml")
    assert app.cluster.tls is not None and app.cluster.tls.ca == str(pki / "ca.pem")
    try:
        tls.configure_cluster(app.cluster)
        assert tls.current() == cfg(pki)
    finally:
        tls.configure(None)
    with pytest.raises(ConfigError, match="no such file"):
        tls.configure(tls.TLSConfig(str(tmp_path / "missing.pem"), "k", "ca"))
    secret = (pki / "node.key").read_text()
    with pytest.raises(ConfigError) as info:
        tls.configure(tls.TLSConfig(str(pki / "node.pem"), str(pki / "stranger.key"), str(pki / "ca.pem")))
    assert secret[40:80] not in str(info.value)


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


def _check(pki: Path, tmp_path: Path, **files: str) -> list[tuple[str | None, str]]:
    """(key, message) of each mistake `polybus check` finds in [cluster] tls."""
    names = {"cert": "node.pem", "key": "node.key", "ca": "ca.pem", **files}
    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")
    (tmp_path / "app.toml").write_text(
        '[modules.s]\nsource = "s.py"\n[modules.c]\nsource = "c.py"\nentrypoint = "main"\n'
        '[bind]\n"c.f" = "s.f"\n[cluster]\ntls = { '
        + ", ".join(f'{k} = "{pki / v}"' for k, v in names.items()) + " }\n")
    _, found = validate(tmp_path / "app.toml")
    return [(e.key, e.bare_message) for e in found]


def test_check_loads_the_tls_files_and_names_the_key_at_fault(pki: Path, tmp_path: Path) -> None:
    # check said ok, and run failed with "cannot load node.pem / ca.pem: KEY_VALUES_MISMATCH"
    assert _check(pki, tmp_path) == []
    assert _check(pki, tmp_path, key="ca.key") == [(
        "cluster.tls.key", f"{pki}/ca.key is not the private key of the certificate "
        f"{pki}/node.pem (cluster.tls.cert): key values mismatch")]
    assert _check(pki, tmp_path, key="locked.key") == [(
        "cluster.tls.key", f"{pki}/locked.key is encrypted with a passphrase; polybus needs "
        "the key unencrypted (a file only its owner can read)")]
    assert _check(pki, tmp_path, key="junk.pem") == [(
        "cluster.tls.key", f"cannot load {pki}/junk.pem as a private key (PEM): PEM lib")]
    assert _check(pki, tmp_path, cert="junk.pem") == [(
        "cluster.tls.cert", f"cannot load {pki}/junk.pem as a certificate (PEM): it holds none")]
    assert _check(pki, tmp_path, ca="node.key") == [(
        "cluster.tls.ca", f"cannot load {pki}/node.key as the CA's certificate (PEM): "
        "NO_CERTIFICATE_OR_CRL_FOUND")]
    # A certificate and key that match, from another CA: every peer would refuse it.
    [(key, message)] = _check(pki, tmp_path, cert="stranger.pem", key="stranger.key")
    assert key == "cluster.tls.cert"
    assert message.startswith(f"the certificate {pki}/stranger.pem is not signed by the CA "
                              f"{pki}/ca.pem (cluster.tls.ca): ")
    # The CA's own certificate verifies, but names no host: run's connections to
    # 127.0.0.1 (the local engine's listen_host) would fail.
    [(key, message)] = _check(pki, tmp_path, cert="ca.pem", key="ca.key")
    assert (key, message.split(":")[0]) == (
        "cluster.tls.cert", f"the certificate {pki}/ca.pem does not name 127.0.0.1, where this "
        "cluster's connections go")


def _host_app(pki: Path, tmp_path: Path, cluster: str) -> str:
    """app.toml of a cluster whose [cluster] tls is node2's own certificate."""
    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")
    (tmp_path / "app.toml").write_text(
        '[modules.s]\nsource = "s.py"\n[modules.c]\nsource = "c.py"\nentrypoint = "main"\n'
        f'[bind]\n"c.f" = "s.f"\n[cluster]\n{cluster}'
        f'tls = {{ cert = "{pki}/node2.pem", key = "{pki}/node2.key", ca = "{pki}/ca.pem" }}\n')
    return str(tmp_path / "app.toml")


MULTI_HOST = 'engine = "hosts"\nregistry = "node1.example.org:7700"\n'


def test_check_host_accepts_a_certificate_for_the_host_this_machine_is_dialled_at(
        pki: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A multi-host cluster with one certificate per host: on node2 (not the registry's
    host) its certificate names node2 only. check compared it with the registry's host
    and refused it; a worker or client there refused to start with the same message."""
    app = _host_app(pki, tmp_path, MULTI_HOST)
    # By default check compares with the registry's host, says so, and names the option.
    assert main(["check", app, "--no-import"]) == 2
    err = capsys.readouterr().err
    assert (f"cluster.tls.cert: the certificate {pki}/node2.pem does not name "
            "node1.example.org, the [cluster] registry's host: ") in err
    assert "check with `polybus check --host NAME`" in err
    # Told the name this machine is dialled at, check accepts the certificate.
    assert main(["check", app, "--no-import", "--host", "node2.example.org"]) == 0
    assert f"{app}: ok" in capsys.readouterr().out
    # A worker, client or run there loads the configuration (its role unknown to the
    # file: no name checked); `polybus registry --config` still checks the registry's.
    assert load(app).cluster.registry == "node1.example.org:7700"
    with pytest.raises(ConfigError, match="does not name node1.example.org, the "
                                          r"\[cluster\] registry's host"):
        load(app, tls_hosts="registry")


def test_check_host_refuses_a_certificate_that_names_neither_host(
        pki: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = _host_app(pki, tmp_path, MULTI_HOST)
    assert main(["check", app, "--no-import", "--host", "node3.example.org"]) == 2
    err = capsys.readouterr().err
    assert (f"cluster.tls.cert: the certificate {pki}/node2.pem does not name "
            "node3.example.org, the host given by --host: ") in err
    # Each name given must be named: the registry's host and a worker's on one machine.
    assert main(["check", app, "--no-import", "--host", "node2.example.org",
                 "--host", "10.0.0.5"]) == 2
    err = capsys.readouterr().err
    assert "does not name 10.0.0.5, the host given by --host" in err
    assert "does not name node2.example.org" not in err
    with pytest.raises(SystemExit):  # a host, not an address with its port
        main(["check", app, "--no-import", "--host", "node2.example.org:7700"])
    assert "give the host alone, without :PORT" in capsys.readouterr().err
    # Without a registry every process of the run listens at listen_host, checked even
    # when --host names another host.
    app = _host_app(pki, tmp_path, "")
    assert main(["check", app, "--no-import", "--host", "node2.example.org"]) == 2
    assert (f"the certificate {pki}/node2.pem does not name 127.0.0.1, where this "
            "cluster's connections go") in capsys.readouterr().err


def test_a_tls_file_that_does_not_load_at_run_time_names_its_key(pki: Path) -> None:
    with pytest.raises(ConfigError) as info:
        tls.configure(tls.TLSConfig(str(pki / "node.pem"), str(pki / "ca.key"), str(pki / "ca.pem")))
    assert str(info.value) == (f"cluster.tls.key: {pki}/ca.key is not the private key of the "
                               f"certificate {pki}/node.pem (cluster.tls.cert): key values mismatch")
    assert tls.current() is None


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
                                 (0.2, "closed the connection without a polybus greeting")):
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


def test_a_worker_checks_at_start_that_its_certificate_names_its_address(pki: Path) -> None:
    from polybus.transport.endpoints import Address
    from polybus.worker.main import check_certificate

    here = [Address.parse("tcp://127.0.0.1:7000"), Address.parse("ipc:///tmp/x.sock")]
    check_certificate(here)  # no tls configured: nothing to check
    tls.configure(cfg(pki))  # names IP:127.0.0.1
    try:
        check_certificate(here)
        tls.configure(cfg(pki, "node2"))  # names DNS:node2.example.org only
        check_certificate([Address.parse("tcp://0.0.0.0:7000")])  # a wildcard names no host
        with pytest.raises(ConfigError) as info:
            check_certificate(here)
        assert info.value.key == "cluster.tls.cert"
        assert (f"the certificate {pki}/node2.pem does not name 127.0.0.1, the address this "
                "worker registers (tcp://127.0.0.1:7000)") in str(info.value)
    finally:
        tls.configure(None)


def test_polybus_worker_with_a_certificate_for_another_host_fails_at_start(
        pki: Path, tmp_path: Path) -> None:
    """Before it registers (nothing listens at the registry's address here): the error
    names the key, the file and the address, rather than every peer's refused dial."""
    app = write_one_call_app(tmp_path, tail=(
        '[cluster]\nregistry = "127.0.0.1:9"\n'
        f'tls = {{ cert = "{pki}/node2.pem", key = "{pki}/node2.key", ca = "{pki}/ca.pem" }}\n'))
    p = subprocess.run([sys.executable, "-m", "polybus", "worker", "--config", str(app),
                        "--as", "server"],
                       env={**os.environ, "POLYBUS_TOKEN": "t" * 32},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert "cluster.tls.cert" in p.stderr
    assert "does not name 127.0.0.1, the address this worker registers (tcp://127.0.0.1:" in p.stderr
    assert "serving" not in p.stderr


@pytest.mark.parametrize("engine", ["mpi", "ray"])
def test_an_engine_bound_to_every_interface_is_checked_at_the_host_name_it_registers(
        pki: Path, tmp_path: Path, engine: str) -> None:
    """listen_host "0.0.0.0": each mpi rank or Ray actor registers its host's name
    (engines/served.py), so the certificate must name that, not 0.0.0.0 (a certificate
    naming only the host name was refused)."""
    host = socket.gethostname()
    for f in ("ca.pem", "ca.key"):
        shutil.copy(pki / f, tmp_path / f)
    make_leaf(tmp_path, "ca", "named", f"DNS:{host}")
    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")

    def check(engine: str) -> list[tuple[str | None, str]]:
        (tmp_path / "app.toml").write_text(
            '[modules.s]\nsource = "s.py"\n[modules.c]\nsource = "c.py"\nentrypoint = "main"\n'
            f'[bind]\n"c.f" = "s.f"\n[cluster]\nengine = "{engine}"\nlisten_host = "0.0.0.0"\n'
            f'tls = {{ cert = "named.pem", key = "named.key", ca = "ca.pem" }}\n')
        _, found = validate(tmp_path / "app.toml")
        return [(e.key, e.bare_message) for e in found]

    assert check(engine) == []
    [(key, message)] = check("local")  # (its workers register 0.0.0.0 itself)
    assert key == "cluster.tls.cert" and "does not name 0.0.0.0" in message
