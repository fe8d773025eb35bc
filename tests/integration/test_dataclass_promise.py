"""A promise inside a dataclass argument is answered when a sync call is made, as one in
a list, tuple or dict is (client/wireargs.py): it was met only while the message was
encoded, with the connection's send lock held, so a sync call waiting on an unanswered
one hung, and a failed one was taken for the connection breaking (the replica declared
lost, every later call refused). An async call forwards it (pickle off: client/fwdargs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import os
    import time

    def slow(x, flag):
        while not os.path.exists(flag):  # (answered once the client has sent its call)
            time.sleep(0.01)
        return x

    def fail(x):
        raise ValueError(f"no {x}")

    def echo(b):
        return b
"""

CLIENT = """
    from dataclasses import dataclass
    from pathlib import Path

    from polybus import RemoteError, use, wait

    slow = use("slow"); fail = use("fail"); echo = use("echo"); aecho = use("aecho")

    @dataclass
    class Box:
        v: object

    @dataclass(slots=True)
    class Slotted:
        v: object
        w: int = 7

    def main(flag):
        p = slow(2, flag)
        Path(flag).touch()
        out = [echo(Box(p)), echo(Slotted(slow(5, flag)))]  # sync: waits for them first
        try:
            wait(aecho(Box(fail(1))))
            out.append("no error")
        except RemoteError as e:  # (forwarded, fail still running: its error is the
            # consumer's, "an upstream call failed: ..."; answered first, raised at the call)
            out.append(str(e).split(" (")[0].replace("an upstream call failed: ", ""))
        out.append(wait(aecho(Box(3))))  # the replica serves on
        return out
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 1

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.slow = { callstyle = "async" }
    use.fail = { callstyle = "async" }
    use.echo = { callstyle = "sync" }
    use.aecho = { callstyle = "async" }

    [bind]
    "client.slow" = "server.slow"
    "client.fail" = "server.fail"
    "client.echo" = "server.echo"
    "client.aecho" = "server.echo"
"""


@pytest.mark.parametrize("aggregate", [None, 8])
def test_a_promise_in_a_dataclass_argument_is_answered_first(
        tmp_path: Path, aggregate: int | None) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    sets = {"modules.client.args": [str(tmp_path / "sent")]}
    if aggregate is not None:
        sets["modules.client.use.aecho.aggregate"] = aggregate  # type: ignore[assignment]
    run = polybus.run(app, sets, worker_output=False, timeout=60)
    assert run.result == [{"v": 2}, {"v": 5, "w": 7}, "ValueError: no 1", {"v": 3}]
