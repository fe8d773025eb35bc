"""A dict keyed by a dataclass, sent as an argument or returned as an answer, fails its
own call and nothing else (wire/undecodable.py `salvage`). Before, the replica (or the
client) took the frame for malformed and closed the connection; the call ran again on
the next replica and cut that one too, until every replica of the module was lost and
each later call raised NoReplicaError."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import os
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Key:
        x: int

    def echo(v):
        return v

    def keyed(n):
        return {Key(n): "v"}

    def pid(x):
        return os.getpid()
"""

CLIENT = """
    from dataclasses import dataclass

    from polybus import use, wait

    echo = use("echo")
    keyed = use("keyed")
    pid = use("pid")

    @dataclass(frozen=True)
    class Key:
        x: int

    def failed(call):
        try:
            wait(call())
        except Exception as exc:
            return [type(exc).__name__, str(exc)]
        return "answered"

    def main():
        out = []
        for bad in (lambda: keyed(1), lambda: echo({Key(1): 1})):
            good = [echo({(i, i): i}) for i in range(3)]
            out.append(failed(bad))
            out.append(wait(good))
        pids = set()
        for _ in range(40):  # both replicas still serve
            pids.update(wait([pid(i) for i in range(4)]))
        out.append(len(pids))
        return out
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2
    transport = "{transport}"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.echo = {{ {use} }}
    use.keyed = {{ {use} }}

    [bind]
    "client.echo" = "server.echo"
    "client.keyed" = "server.keyed"
    "client.pid" = "server.pid"
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("use", "transport"), [
    ('callstyle = "sync"', "tcp"), ('callstyle = "async"', "shm"),
    ('callstyle = "async-demand(2)", aggregate = 4', "tcp")],
    ids=["sync-tcp", "async-shm", "aggregated-tcp"])
def test_a_dict_keyed_by_a_dataclass_fails_its_call_alone(
        tmp_path: Path, use: str, transport: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(use=use, transport=transport))
    answer, good1, argument, good2, replicas = polybus.run(app).result
    assert answer[0] == "RemoteError", answer
    assert answer[1].startswith("TypeError: its answer could not be decoded in the client: "
                                "a dict key arrived as a map or a reference"), answer[1]
    assert argument[0] == "RemoteError", argument
    assert argument[1].startswith(
        "TypeError: an argument of this call could not be decoded on the replica: a dict "
        "key arrived as a map or a reference"), argument[1]
    assert "a dataclass, a msgspec Struct or a dict as a key travels as a map" in argument[1]
    assert good1 == good2 == [{(i, i): i} for i in range(3)]
    assert replicas == 2
