"""How many calls ran again after their replica was lost is said, per binding, in the
summary and in --json's ``interfaces`` (``run_again``): a new user killed a worker
mid-run, saw every result right and the lost replica in the summary, and nothing said
how many calls it cost."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import polybus
from polybus.summary import strategies
from polybus.testing.apps import write_bound_app

SERVER = """
    import os

    def f(x, marker):
        if x == 2 and not os.path.exists(marker):  # (its first run ends its replica)
            open(marker, "w").close()
            os._exit(3)
        return x * 10
"""

CLIENT = """
    from polybus import use, wait

    f = use("f")

    def main(marker, together=False):
        if together:  # (the four in one aggregated batch)
            ps = [f(i, marker) for i in range(4)]
            return [wait(p) for p in ps]
        return [wait(f(i, marker)) for i in range(4)]  # (one call in flight at a time)
"""


@pytest.mark.parametrize(("use", "together", "again"), [
    ('{ callstyle = "async" }', False, 1),
    ('{ callstyle = "async-demand(1)" }', False, 1),  # (placed from the backlog)
    ('{ callstyle = "async", aggregate = 4, linger = "10s" }', True, 4),  # (a batch: each call)
])
def test_a_call_run_again_after_its_replica_was_lost_is_counted(
        tmp_path: Path, use: str, together: bool, again: int) -> None:
    app = write_bound_app(tmp_path, server=SERVER, client=CLIENT, names=("f",),
                          server_keys="replication = 2", client_keys=f"use.f = {use}")
    marker = tmp_path / "died-once"
    r = polybus.run(app, {"modules.client.args": [str(marker), together]}, worker_output=False)
    assert r.result == [0, 10, 20, 30] and os.path.exists(marker)
    counts = r.interfaces["client.f"]
    assert counts["calls"] == 4 and counts["run_again"] == again, counts
    assert any(f"{again} run again (a replica lost)" in line for line in strategies(r)), strategies(r)
