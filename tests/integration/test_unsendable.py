"""An argument the codec cannot carry: the error names the interface and the argument,
the same under every call style and transport, and the calls around it are answered."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from integration.conftest import write_app

SERVER = """
    def echo(x, y=None):
        return x
"""

CLIENT = """
    from polybus import use, wait

    echo = use("echo")

    def main():
        out = []
        for args, kw in [((object(),), {}), ((1, object()), {}), ((1,), {"y": object()})]:
            good = [echo(i) for i in range(3)]  # in flight: async-demand holds the next one
            try:
                wait(echo(*args, **kw))
            except TypeError as exc:
                out.append([type(exc).__name__, str(exc)])
            out.append(wait(good))
        out.append(wait(echo(5)))
        return out
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 1
    transport = "{transport}"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    transport = "{transport}"
    use.echo = {{ callstyle = "{style}" }}

    [bind]
    "client.echo" = "server.echo"
"""

WHY = ("a value of type object cannot be sent by the safe codec (msgpack types, numpy "
       "arrays, bytes); convert it, or set pickle = true on the serving module in the "
       "configuration")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("style", ["sync", "async", "async-demand(1)"])
def test_the_error_names_the_interface_and_argument(tmp_path: Path, style: str,
                                                    transport: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(style=style, transport=transport))
    assert polybus.run(app).result == [
        ["UnsendableError", f"echo(...) argument 1: {WHY}"], [0, 1, 2],
        ["UnsendableError", f"echo(...) argument 2: {WHY}"], [0, 1, 2],
        ["UnsendableError", f"echo(...) argument 'y': {WHY}"], [0, 1, 2],
        5,
    ]
