"""`polybus worker --config` listens at the configuration's ``[cluster] listen_host``
when given no --listen (it listened on loopback whatever the file said); an explicit
--listen still wins, and with neither it stays on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polybus.cli.main import main
from polybus.errors import TransportError
from polybus.worker.main import Stopped


def _app(tmp_path: Path, cluster: str = "") -> Path:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return 0\n")
    app = tmp_path / "app.toml"
    app.write_text(f"{cluster}\n[modules.server]\nsource = \"server.py\"\n\n"
                   '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n')
    return app


def _serve_seen(monkeypatch: pytest.MonkeyPatch, *args: str) -> dict[str, Any]:
    """What `polybus worker ARGS` would serve with (serve replaced: nothing listens)."""
    seen: dict[str, Any] = {}
    monkeypatch.setattr("polybus.worker.main.serve",
                        lambda **kw: seen.update(kw) or Stopped(None, 0))
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    assert main(["worker", "--registry", "127.0.0.1:1", *args]) == 0
    return seen


def test_the_files_listen_host_is_where_a_configured_worker_listens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(tmp_path, '[cluster]\nlisten_host = "0.0.0.0"\n')
    seen = _serve_seen(monkeypatch, "--config", str(app), "--as", "server")
    assert seen["listen"] == ["tcp://0.0.0.0:0"]
    assert seen["listen_from"] == f"listen_host from {app}"  # (said in its banner)


def test_a_set_listen_host_is_said_as_the_sets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(tmp_path)
    seen = _serve_seen(monkeypatch, "--config", str(app), "--as", "server",
                       "--set", 'cluster.listen_host="127.0.0.2"')
    assert seen["listen"] == ["tcp://127.0.0.2:0"]
    assert seen["listen_from"] == "listen_host from --set"


def test_the_modules_transport_is_listened_on_beside_the_files_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(tmp_path, '[cluster]\nlisten_host = "127.0.0.2"\n')
    seen = _serve_seen(monkeypatch, "--config", str(app), "--as", "server",
                       "--set", 'modules.server.transport="ipc"')
    tcp, ipc = seen["listen"]
    assert tcp == "tcp://127.0.0.2:0" and ipc.startswith("ipc://")


def test_an_explicit_listen_wins_over_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(tmp_path, '[cluster]\nlisten_host = "0.0.0.0"\n')
    seen = _serve_seen(monkeypatch, "--config", str(app), "--as", "server",
                       "--listen", "tcp://127.0.0.1:0")
    assert seen["listen"] == ["tcp://127.0.0.1:0"]
    assert seen["listen_from"] is None


def test_with_no_listen_host_a_worker_stays_on_loopback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(tmp_path)
    seen = _serve_seen(monkeypatch, "--config", str(app), "--as", "server")
    assert seen["listen"] == ["tcp://127.0.0.1:0"] and seen["listen_from"] is None
    seen = _serve_seen(monkeypatch, "--module", str(tmp_path / "server.py"))
    assert seen["listen"] == ["tcp://127.0.0.1:0"]


def test_a_listen_host_not_of_this_machine_is_said_where_it_was_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = _app(tmp_path, '[cluster]\nlisten_host = "10.9.9.9"\n')

    def refused(**kw: Any) -> Stopped:
        raise TransportError(f"cannot listen on {kw['listen'][0]}: Cannot assign "
                             "requested address")
    monkeypatch.setattr("polybus.worker.main.serve", refused)
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    assert main(["worker", "--registry", "127.0.0.1:1", "--config", str(app),
                 "--as", "server"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "polybus worker: error: cannot listen on tcp://10.9.9.9:0: Cannot assign "
        "requested address",
        f"  the host is [cluster] listen_host from {app}; give this host's address "
        "there, or --listen tcp://HOST:0"]
