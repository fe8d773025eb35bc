"""Mutual TLS configuration: the certificate, key and CA files of [cluster] tls checked
where they are read (`polybus check`, with --host on a multi-host cluster; loading the
configuration; `tls.configure` at run time; a worker at its start, and an engine's
replicas at the host name they register), each mistake named by its key. Certificates
from a CA the test makes (openssl CLI); skipped without it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_security_tls import cfg, make_leaf, make_pki  # tests/unit

from polybus.cli.main import main
from polybus.config import load, validate
from polybus.errors import ConfigError
from polybus.testing.apps import write_one_call_app
from polybus.transport import tls

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command to make a test CA")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


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
    # Placed as the other mistakes of [cluster] tls are, at its file and line (it had
    # neither), and OpenSSL's sentence without its full stop before the hint (it read
    # "not valid for '127.0.0.1'. (its subjectAltName ...").
    line = app.read_text().splitlines().index(next(
        x for x in app.read_text().splitlines() if x.startswith("tls = "))) + 1
    assert p.stderr.startswith(f"polybus worker: error: {app}:{line}: cluster.tls.cert: the "
                               f"certificate {pki}/node2.pem does not name 127.0.0.1"), p.stderr
    assert "'127.0.0.1' (its subjectAltName must name that host" in p.stderr, p.stderr
    assert "'. (" not in p.stderr, p.stderr


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


def test_a_mistake_found_after_loading_is_placed_as_loading_places_its_own(
        pki: Path, tmp_path: Path) -> None:
    """`config.placed`: at the line that wrote the key, or at the overrides that did."""
    from polybus.config import placed

    app_path = write_one_call_app(tmp_path, tail=(
        '[cluster]\nregistry = "127.0.0.1:9"\n'
        f'tls = {{ cert = "{pki}/node.pem", key = "{pki}/node.key", ca = "{pki}/ca.pem" }}\n'))
    lines = app_path.read_text().splitlines()
    line = next(i for i, x in enumerate(lines, 1) if x.startswith("tls = "))
    err = ConfigError("found at start", key="cluster.tls.cert", hint="do this")
    assert str(placed(err, load(app_path))) == (
        f"{app_path}:{line}: cluster.tls.cert: found at start (do this)")
    over = load(app_path, (f'cluster.tls.cert="{pki}/node.pem"',))
    assert str(placed(err, over)) == "--set: cluster.tls.cert: found at start (do this)"
    there = ConfigError("said already", file="elsewhere", key="cluster.tls.cert")
    assert placed(there, load(app_path)) is there
