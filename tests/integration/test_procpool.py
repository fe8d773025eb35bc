"""pool = "processes:N": calls run in the replica's child processes, same answers."""

from __future__ import annotations

from pathlib import Path

import polybus

APP = Path(__file__).parent / "apps" / "procpool" / "app.toml"


def test_process_pool_runs_calls_in_child_processes() -> None:
    r = polybus.run(APP)
    assert r.result["ok"] is True
    assert r.result["pids"] == 2  # two children of one replica served the eight calls
    assert r.calls == 8


def test_thread_pool_gives_the_same_answers_in_one_process() -> None:
    r = polybus.run(APP, {"modules.server.define.work.pool": 2})
    assert r.result == {"ok": True, "pids": 1}
