"""Where inside a value the part that cannot be sent sits, said in the error: in an
argument at the client, in an answer at the replica (aggregated or not), in a value a
replica sends on to the next stage's (forwarding)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

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



MAKE = """
    import os
    import threading
    import time

    def make(go):
        if go is None:
            return [2, {"k": 0}]
        for _ in range(3000):  # (the client makes ``go`` once this replica has read the
            if os.path.exists(go):  # Forwards of its consumer calls)
                break
            time.sleep(0.01)
        return [2, {"k": threading.Lock()}]
"""

TAKE = """
    def size(x):
        return len(x)

    def echo(x):
        return x
"""

STAGES_CLIENT = """
    import pathlib
    from polybus import RemoteException, use, wait

    make = use("make")
    size = use("size")
    echo = use("echo")

    def main():
        wait([size(make(None)), echo(1)])  # (every replica reached once)
        p = make({go!r})
        consumers = [size(p), echo(p)]
        # make's replica reads its connection in order: answering this call (its pool
        # has room beside p's), it has read the Forwards the consumer calls sent first
        wait(make(None))
        pathlib.Path({go!r}).touch()
        out = []
        for c in consumers:
            try:
                out.append(wait(c))
            except RemoteException as exc:
                out.append([exc.remote_type, exc.remote_message, str(exc)])
        return out
"""

STAGES_TOML = """
    [modules.stage1]
    source = "server.py"
    transport = "{transport}"
    define.make = {{ pool = 2 }}
    {served}
    {stage2}
    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.make = {{ callstyle = "async" }}
    use.size = {{ callstyle = "async" }}
    use.echo = {{ callstyle = "async" }}

    [bind]
    "client.make" = "stage1.make"
    "client.size" = "{consumer}.size"
    "client.echo" = "{consumer}.echo"
"""

STAGE2 = """
    [modules.stage2]
    source = "stage2.py"
    transport = "{transport}"
"""

LOCK = "a value of type lock cannot be sent"


def stages(tmp_path: Path, transport: str, apart: bool) -> list[Any]:
    """What the program sees of ``size(p)`` and ``echo(p)``, ``p`` the promise of a
    value with a lock inside it forwarded to them: from stage1's replica to stage2's
    (``apart``), or to stage1's own, with no socket."""
    go = str(tmp_path / "go")
    app = write_app(tmp_path, server=MAKE if apart else MAKE + TAKE,
                    client=STAGES_CLIENT.format(go=go),
                    toml=STAGES_TOML.format(
                        transport=transport, consumer="stage2" if apart else "stage1",
                        served="" if apart else "define.size = {}\n    define.echo = {}",
                        stage2=STAGE2.format(transport=transport) if apart else ""))
    if apart:
        (tmp_path / "stage2.py").write_text(textwrap.dedent(TAKE))
    out: list[Any] = polybus.run(app, worker_output=False).result
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_forwarded_value_that_cannot_be_sent_on_says_where(tmp_path: Path,
                                                            transport: str) -> None:
    """A producer's value that the codec cannot carry, forwarded from its replica to
    another module's, fails its consumers saying where in the value the bad part sits,
    as the producer's own answer would have. It said only "a value of type lock"."""
    for (kind, message, text), name in zip(stages(tmp_path, transport, True),
                                           ("size", "echo"), strict=True):
        assert kind == "TypeError"
        # (sent on by the producer's replica: not its own answer, which said where)
        assert message.startswith("an upstream call failed: the value it returned cannot be "
                                  f"sent, at result[1]['k']: {LOCK}"), message
        assert message.endswith(" (sent on by stage1-0)"), message
        # (and the calls are named, as they were)
        assert text == (f"TypeError: {message} (failed in make on stage1-0, upstream of "
                        f"{name} on stage2-0)"), text


@pytest.mark.timeout(60)
def test_a_forwarded_value_that_stays_on_its_replica_is_taken_as_it_is(tmp_path: Path) -> None:
    """To a consumer on the producer's own replica the value goes with no encoding: one
    that uses it is answered, one that returns it fails as its answer, saying where."""
    size, (kind, message, _) = stages(tmp_path, "tcp", False)
    assert size == 2 and kind == "TypeError"
    assert message.startswith(f"the value it returned cannot be sent, at result[1]['k']: {LOCK}"), \
        message
