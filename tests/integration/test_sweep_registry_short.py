"""A sweep at a registry whose replication asks for more replicas than are registered:
each run goes on with those registered (and says so, once), and the sweep's efficiency
is the speedup per replica that served, not per replica asked for. With one worker
registered, ``--vary modules.server.replication=1,2`` ran both cells on that one worker
and the table gave the second an efficiency of its speedup / 2 (0.5 for the same time),
as if two replicas had shared the work."""

from __future__ import annotations

import json
from pathlib import Path

from integration.conftest import EXAMPLES, Procs, cli, read_line, start_registry

SORT = EXAMPLES / "sort"


def test_efficiency_counts_the_replicas_that_served(procs: Procs, tmp_path: Path) -> None:
    env = {"POLYBUS_TOKEN": "sweepshort-token-" + "s" * 20}
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--module", SORT / "server.py",
                    "--name", "server-0", env=env)
    assert w.stderr is not None
    read_line(w.stderr, "serving")
    out = tmp_path / "s.json"
    p = cli("sweep", SORT / "app.toml", "--set", f'cluster.registry="{addr}"',
            "--set", "modules.client.args=[2000, 2]", "--vary",
            "modules.server.replication=1,2", "--repeat", "1", "--quiet", "--json", out,
            env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "configured 2 replica(s), found 1 registered" in p.stderr, p.stderr
    cells = {c["config"]["modules.server.replication"]: c
             for c in json.loads(out.read_text())["cells"]}
    assert cells[1]["replicas"] == {"server": [1]}, cells[1]
    assert cells[2]["replicas"] == {"server": [1]}, cells[2]
    two = cells[2]
    # one replica served each: the efficiency is the speedup itself, per that replica
    assert two["efficiency"] == two["speedup"], two
    assert "replication=2: its runs found 1 replica" in p.stdout, p.stdout
