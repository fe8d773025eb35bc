"""Where inside a value the part that cannot be sent sits, said in the error: in an
argument at the client, in an answer at the replica (aggregated or not)."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import threading

    def answer(x):
        return {"ok": x, "lock": threading.Lock()}

    def echo(x):
        return x
"""

CLIENT = """
    import threading
    from polybus import use, wait

    answer = use("answer")
    echo = use("echo")

    def main():
        out = []
        for call in (lambda: answer(1), lambda: echo([1, 2, {"k": threading.Lock()}])):
            try:
                wait(call())
            except Exception as exc:
                out.append(str(exc).split(": a value of type")[0])
        out.append(wait(echo(5)))
        return out
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 1

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.answer = {{ callstyle = "{style}"{extra} }}
    use.echo = {{ callstyle = "{style}" }}

    [bind]
    "client.answer" = "server.answer"
    "client.echo" = "server.echo"
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("style", "extra"), [("sync", ""), ("async", ", aggregate = 2"),
                                              ("async-demand(1)", "")])
def test_the_error_says_where_in_the_value(tmp_path: Path, style: str, extra: str) -> None:
    # It said "a value of type lock cannot be sent", nowhere in particular.
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(style=style, extra=extra))
    assert polybus.run(app, worker_output=False).result == [
        "TypeError: the value it returned cannot be sent, at result['lock']",
        "echo(...) argument 1, at [2]['k']",
        5,
    ]
