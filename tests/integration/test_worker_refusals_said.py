"""A replica that refused calls says, as it stops, the refusals it held back as calls
refused: a new user's three calls with an argument of a class of the client module
(pickle on) were said at the replica's stop as "worker server-0 refused connections:
2 more like this ...", though every connection was taken and only calls refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    def echo(x):
        return x
"""

CLIENT = """
    from polybus import use, wait
    from polybus.errors import RemoteError

    echo = use("echo")

    class Box:  # (only the client has this class: a replica cannot unpickle it)
        pass

    def main():
        failed = 0
        for _ in range(3):
            try:
                wait(echo(Box()))
            except RemoteError:
                failed += 1
        return failed
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 1
    pickle = true

    [modules.client]
    source = "client.py"
    entrypoint = "main"

    [bind]
    "client.echo" = "server.echo"
"""


@pytest.mark.timeout(60)
def test_calls_held_back_are_said_as_calls_refused_not_connections(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    lines = io.StringIO()
    assert polybus.run(app, worker_output=lines).result == 3
    said = lines.getvalue()
    assert "refused connections" not in said, said
    assert "worker server-0 refused calls: 2 more like this since the last said" in said, said
