"""A worker started with --config whose module's replication gives replicas speeds
(``"a:speed=0.25,b"``) serves at a replica's speed only under that replica's --name;
under another name it served at full speed without a word. Now it says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polybus.cli.main import main
from polybus.worker.main import Stopped

SLOW = '--set=modules.server.replication="a:speed=0.25,b"'


def _worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> dict[str, Any]:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return 0\n")
    app = tmp_path / "app.toml"
    app.write_text('[modules.server]\nsource = "server.py"\n\n'
                   '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n')
    seen: dict[str, Any] = {}
    monkeypatch.setattr("polybus.worker.main.serve",
                        lambda **kw: seen.update(kw) or Stopped(None, 0))
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    assert main(["worker", "--registry", "127.0.0.1:1", "--config", str(app), "--as",
                 "server", *args]) == 0
    return seen


def test_a_worker_named_as_no_slowed_replica_says_it_serves_at_full_speed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    seen = _worker(tmp_path, monkeypatch, SLOW, "--name", "c")
    assert seen["replica"] is None
    assert capsys.readouterr().err == (
        "polybus worker: warning: [modules.server] replication gives replica a speed 0.25, "
        "and this worker, c, is none of its replicas: it serves at full speed (give it "
        "--name a to serve as that replica)\n")


def test_a_worker_named_as_a_replica_takes_its_speed_and_says_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    seen = _worker(tmp_path, monkeypatch, SLOW, "--name", "a")
    assert seen["replica"].speed == 0.25
    assert _worker(tmp_path, monkeypatch, SLOW, "--name", "b")["replica"].speed == 1.0
    _worker(tmp_path, monkeypatch, "--name", "c")  # (no speeds given: nothing to say)
    assert capsys.readouterr().err == ""
