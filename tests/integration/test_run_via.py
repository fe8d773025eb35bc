"""Which transport the client reached each replica by: the summary's `via` column and
the JSON's ``transports`` (client/stats.py). A new user switching tcp, ipc and shm in
the configuration could not confirm the switch from anything `polybus run` printed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from integration.conftest import cli
from polybus.testing.apps import write_app

SERVER = """
    def f(x):
        return x + 1

    def g(x):
        return x * 2
"""

CLIENT = """
    from polybus import use

    f = use("f")
    g = use("g")

    def main():
        return [f(1), g(2)]
"""


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"
_SAID = "exists only while its replica serves"


def _json_description() -> str:
    """docs/guide.md's description of `run --json`'s ``addresses``, one line."""
    text = " ".join(GUIDE.read_text().split())
    start = text.index("`addresses`: where,")
    return text[start:text.index("`interfaces`", start)]


@pytest.mark.parametrize(("module", "binding", "want"), [
    ("tcp", "", ["tcp"]), ("shm", "", ["shm"]), ("ipc", "", ["ipc"]),
    ("shm", 'use.g = { transport = "tcp" }', ["shm", "tcp"])],
    ids=["tcp", "shm", "ipc", "shm-and-a-tcp-binding"])
def test_each_replica_says_the_transport_of_each_of_its_connections(
        tmp_path: Path, module: str, binding: str, want: list[str]) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=f"""
        [modules.server]
        source = "server.py"
        replication = 2
        transport = "{module}"

        [modules.client]
        source = "client.py"
        entrypoint = "main"
        {binding}

        [bind]
        "client.f" = "server.f"
        "client.g" = "server.g"
    """)
    p = cli("run", app, "--json", tmp_path / "run.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["result"] == [2, 4]
    assert [sorted(r["transports"]) for r in doc["replicas"]] == [want, want], doc["replicas"]
    # Where each was dialled, one address per transport, in the same order: TCP at its
    # host and port, ipc and shm at a socket file of the run's own directory.
    for r in doc["replicas"]:
        assert [a.partition("://")[0] for a in r["addresses"]] == r["transports"], r
        for a in r["addresses"]:
            assert a.startswith("tcp://127.0.0.1:") or a.startswith(
                (f"ipc://{tempfile.gettempdir()}/polybus-", f"shm://{tempfile.gettempdir()}/polybus-")), r
    assert len({a for r in doc["replicas"] for a in r["addresses"]}) == 2 * len(want)
    # An ipc or shm address names a socket file of the run's directory, gone once the
    # run has ended, as the JSON's description (docs/guide.md) says: the address tells the
    # transport and that the replica was on the client's host, not a file to find.
    for a in (a for r in doc["replicas"] for a in r["addresses"]):
        scheme, _, path = a.partition("://")
        assert scheme == "tcp" or not Path(path).exists(), a
    if want != ["tcp"]:
        assert _SAID in _json_description()
    # (the table's rows: a slow start's notice, "worker server-1 not registered after
    # 2 s", names a replica too)
    rows = [ln for ln in p.stderr.splitlines() if ln.startswith("│ server-")]
    assert len(rows) == 2 and all(
        sorted(ln.split("│")[2].strip().split("+")) == want for ln in rows), p.stderr
    header = next(ln for ln in p.stderr.splitlines() if "replica" in ln)
    assert [c.strip() for c in header.split("┃")[1:4]] == ["replica", "via", "speed"], header
