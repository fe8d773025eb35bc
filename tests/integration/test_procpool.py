"""pool = "processes:N": calls run in the replica's child processes, same answers."""

from __future__ import annotations

import os
from pathlib import Path

import polybus

APP = Path(__file__).parent / "apps" / "procpool" / "app.toml"


def test_process_pool_runs_calls_in_child_processes_of_the_replica() -> None:
    r = polybus.run(APP)
    assert r.result["ok"] is True
    assert r.calls == 8
    # Each call ran in a child of the one replica, not in the replica itself (whose
    # parent is this test process, which started it through the local engine).
    assert len(r.result["parents"]) == 1
    assert r.result["parents"][0] != os.getpid()


def test_thread_pool_runs_calls_in_the_replica_itself() -> None:
    r = polybus.run(APP, {"modules.server.define.work.pool": 2})
    assert r.result == {"ok": True, "parents": [os.getpid()]}


def test_the_children_are_started_with_the_replica_not_by_the_first_calls() -> None:
    """Spawning them (and importing the module in each) is start-up, which elapsed_s
    does not count: the first calls of a run used to pay for it."""
    r = polybus.run(APP, {"modules.client.entrypoint": "before_any_call"})
    assert r.result == 2
