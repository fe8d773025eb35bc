"""The run report's ``lost`` for a replica whose connection breaks as the report is
made: a trial killed a replica just before its entrypoint returned, and the report said
``"lost": false`` (its figures "?") right under the warning that it was lost. The
replica was counted alive before it was asked for its figures, and found gone by that
asking."""

from __future__ import annotations

from pathlib import Path

import polybus

from .comm_harness import cluster
from .test_forward_backlog import kill

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.echo = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.echo = { callstyle = "sync" }

[bind]
"client.echo" = "server.echo"
"""


def test_a_replica_found_gone_while_its_figures_are_asked_is_reported_lost(
        tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = c.session()
        for i in range(4):
            assert polybus.wait(s.call("echo", (i,), {})) == i
        gone = c.runtimes[0]  # (asked first: nothing read of its break before)
        kill(gone)  # (the client has read nothing of it since)
        rows = {r.name: r for r in s.stats().replicas}
        assert rows[gone.name].busy_s is None  # (no answer to the asking: not known)
        assert rows[gone.name].lost, rows
        assert not rows[c.runtimes[1].name].lost
