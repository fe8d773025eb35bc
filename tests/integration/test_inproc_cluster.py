"""A registry, replicas and a client session of one process, every connection over
inproc:// (no socket file, no network port): calls are answered as over tcp."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybus

from .comm_harness import call, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.double = {}
define.scale = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = { callstyle = "async" }
use.scale = {}

[bind]
"client.double" = "server.double"
"client.scale" = "server.scale"
"""


def test_calls_through_an_inproc_registry_and_replicas(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=2, transport="inproc") as c:
        assert str(c.registry.address) == f"inproc://{tmp_path}/registry"
        assert all(rt.address.scheme == "inproc" for rt in c.runtimes)
        s = c.session()
        assert [call(s, "double", i) for i in range(6)] == [0, 2, 4, 6, 8, 10]
        big = np.arange(100_000, dtype=np.float64)  # out of band, as between processes
        assert np.array_equal(call(s, "scale", big, 3.0), big * 3.0)
        assert sum(rt.calls for rt in c.runtimes) == 7
        assert {lk.channel.peer for lk in s.links["server"]} == {
            str(rt.address) for rt in c.runtimes}
        # (the names are paths in tmp_path, unique to the test: nothing is made there)
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "app.toml", "client.py", "server.py"]


def test_polybus_run_with_an_inproc_registry(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`polybus.run(..., registry=...)` uses the replicas registered there: in-process
    ones, at an inproc address, are reached as any others."""
    with cluster(tmp_path, TOML, replicas=2, transport="inproc") as c:
        (tmp_path / "client.py").write_text(
            "from polybus import use\n\ndouble = use('double')\n\n"
            "def main():\n    return [double(i) for i in range(6)]\n")
        monkeypatch.setenv("POLYBUS_TOKEN", c.token.decode())
        r = polybus.run(c.path, registry=str(c.registry.address))
        assert r.result == [0, 2, 4, 6, 8, 10]
        assert r.calls == 6 and sorted(x.name for x in r.replicas) == ["server-0", "server-1"]
