"""polybus worker --config takes its heartbeat from [cluster] heartbeat.

The local engine starts each worker with --config and gives its registry a ttl of
3 x cluster.heartbeat; a worker that heartbeats at the command line's default (1 s)
instead is dropped between heartbeats when cluster.heartbeat is below 1/3 s, and a
run then waits up to a minute for workers that are serving.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polybus.cli.main import build_parser
from polybus.worker.main import Stopped


def _served_heartbeat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      extra: list[str]) -> float:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return 0\n")
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "server.py"\n\n'
        '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n\n'
        '[cluster]\nheartbeat = 0.05\n')
    seen: dict[str, Any] = {}

    def fake_serve(**kwargs: Any) -> Stopped:
        seen.update(kwargs)
        return Stopped(None, 0)  # (no signal: a worker's end as its engine stops it)

    monkeypatch.setattr("polybus.worker.main.serve", fake_serve)
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    from polybus.cli import cmd_worker

    args = build_parser().parse_args(
        ["worker", "--registry", "127.0.0.1:1", "--config", str(tmp_path / "app.toml"),
         "--as", "server", *extra])
    assert cmd_worker.main(args) == 0
    return float(seen["heartbeat"])


def test_worker_with_config_heartbeats_as_the_cluster_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _served_heartbeat(tmp_path, monkeypatch, []) == pytest.approx(0.05)


def test_heartbeat_on_the_command_line_wins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _served_heartbeat(tmp_path, monkeypatch, ["--heartbeat", "0.5"]) == pytest.approx(0.5)
