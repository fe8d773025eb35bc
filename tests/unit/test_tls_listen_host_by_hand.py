"""A configuration with ``[cluster] tls`` and ``listen_host = "0.0.0.0"`` and no
``registry`` key, for `polybus registry --config` and `polybus worker --config` started
by hand (which listen at listen_host since it applies to them): both refused to start
because the certificate "does not name 0.0.0.0", an address nobody dials them at. The
worker registers, and checks at start, the address its host reaches the registry from;
the registry is dialled at an address of its host. A run of the file (the local
engine, whose workers register 0.0.0.0 as it is) still checks 0.0.0.0."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_security_tls import make_pki  # tests/unit

from polybus.cli.main import main
from polybus.config import load
from polybus.errors import ConfigError
from polybus.transport import tls
from polybus.worker.main import Stopped

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command to make a test CA")


@pytest.fixture(autouse=True)
def _plain_after() -> Iterator[None]:
    """This process's TLS setting as it was: `main(["worker", "--config", ...])` sets it
    from the file, and the tests run after in this process then spoke TLS."""
    yield
    tls.configure(None)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _app(pki: Path, tmp_path: Path) -> Path:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return 0\n")
    app = tmp_path / "app.toml"
    app.write_text(
        '[cluster]\nlisten_host = "0.0.0.0"\n'
        f'tls = {{ cert = "{pki}/node.pem", key = "{pki}/node.key", ca = "{pki}/ca.pem" }}\n'
        '\n[modules.server]\nsource = "server.py"\n\n'
        '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n')
    return app


def test_a_worker_of_the_file_starts_and_checks_what_it_registers(
        pki: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(pki, tmp_path)
    seen: dict[str, Any] = {}
    monkeypatch.setattr("polybus.worker.main.serve",  # (nothing listens)
                        lambda **kw: seen.update(kw) or Stopped(None, 0))
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    assert main(["worker", "--registry", "127.0.0.1:1", "--config", str(app),
                 "--as", "server"]) == 0
    assert seen["listen"] == ["tcp://0.0.0.0:0"]


def test_a_registry_of_the_file_starts_and_a_run_still_checks_the_wildcard(
        pki: Path, tmp_path: Path) -> None:
    app = _app(pki, tmp_path)
    assert load(app, tls_hosts="registry-by-hand").cluster.listen_host == "0.0.0.0"
    with pytest.raises(ConfigError, match=r"does not name 0\.0\.0\.0"):
        load(app)  # (a run: its local engine's workers register 0.0.0.0)
    # ... and `polybus check`, which checks the file for such a run.
    assert main(["check", str(app), "--no-import"]) == 2


@pytest.mark.filterwarnings("ignore:.*nothing calls it")  # (its server: no call, on purpose)
def test_a_run_through_a_registry_given_apart_checks_no_listen_host(
        pki: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It starts no worker and is never dialled: the file's listen_host is not its."""
    import polybus

    app = _app(pki, tmp_path)
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    # (its program calls nothing: no registry is asked, none need listen there)
    assert polybus.run(app, registry="127.0.0.1:9").result == 0
