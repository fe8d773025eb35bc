"""A failure too large for a frame: a function raising an exception whose message is
200 KB, with ``max_frame = "64KiB"``. It reaches the client as itself (its type, the
head of its message and of its traceback, each cut with a note saying how much went),
forwarded or not, and the replicas serve on.

It was lost: answered to the client, it became "MessageTooLarge: the value it returned
cannot be sent", the ValueError gone; in an aggregated batch, every call of the batch
failed with it; forwarded to a consumer on the same replica, the consumer's answer
could not be sent and was dropped, and its promise waited for ever (a run timed out);
forwarded to another replica, the ``Deliver`` was refused there and the consumer failed
with that MessageTooLarge too (the client sent it on)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.deadline import RunTimeout
from polybus.testing.apps import write_app

SERVER = """
    import time

    def raises(delay):
        time.sleep(delay)  # (a forwarded producer: the Forward comes before its answer)
        raise ValueError("x" * 200_000)

    def echo(x):
        return x

    def maybe(i):
        if i == 2:
            raise ValueError("y" * 200_000)
        return i
"""

CLIENT = """
    from polybus import RemoteException, use, wait

    raises, echo, maybe = use("raises"), use("echo"), use("maybe")

    def said(f):
        try:
            return wait(f())
        except RemoteException as exc:
            return [exc.remote_type, exc.remote_message, exc.remote_traceback]

    def plain():
        return [said(lambda: raises(0)), said(lambda: raises(0)), wait(echo(5))]

    def forwarded():
        p = raises(0.3)
        return [said(lambda: echo(p)), said(lambda: p), wait(echo(5)),
                wait(echo(echo(7)))]

    def aggregated():
        ps = [maybe(i) for i in range(8)]  # (one batch, sent after its linger)
        consumer = echo(ps[2])  # (sent before the batch: the failure is forwarded)
        return [said(lambda: p) for p in ps] + [said(lambda: consumer), wait(maybe(9))]
"""

TOML = """
    [modules.server]
    source = "server.py"
    transport = "{transport}"
    {server}

    [modules.client]
    source = "client.py"
    entrypoint = "{entrypoint}"
    transport = "{transport}"
    use.raises = {{ callstyle = "{style}" }}
    use.echo = {{ callstyle = "{style}" }}
    use.maybe = {{ callstyle = "async", aggregate = 16, linger = "200ms" }}

    [bind]
    "client.raises" = "server.raises"
    "client.echo" = "{consumer}.echo"
    "client.maybe" = "server.maybe"
    {stage2}

    [cluster]
    max_frame = "64KiB"
"""

STAGE2 = """
    [modules.stage2]
    source = "server.py"
    transport = "{transport}"
    {server}
"""

POOL = ('define.raises = { pool = "processes:2" }\n    define.echo = { pool = "processes:2" }'
        '\n    define.maybe = {}')
NOTE = re.compile(r" \.\.\. \((\d+) more characters cut: the failure did not fit max_frame\)$")


def app(tmp_path: Path, entrypoint: str, *, style: str = "async", transport: str = "tcp",
        pool: str = "", other: bool = False) -> Path:
    """The program: ``echo`` on a module of its own (another replica) if ``other``."""
    stage2 = STAGE2.format(transport=transport, server=pool) if other else ""
    return write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(
        transport=transport, server=pool, entrypoint=entrypoint, style=style,
        consumer="stage2" if other else "server", stage2=stage2))


def run(path: Path) -> Any:
    """The program's result; a run that hangs fails the test (and the session goes on:
    the run's timeout is a KeyboardInterrupt)."""
    try:
        return polybus.run(path, timeout=30).result
    except RunTimeout as exc:
        pytest.fail(f"the run hung: {exc}")


def cut(text: str, whole: str) -> str:
    """``text`` is the head of ``whole`` with the note of how much was cut: that head
    (as much as fits, so more than a few characters)."""
    m = NOTE.search(text)
    assert m is not None, text[-200:]
    head = text[:m.start()]
    assert whole.startswith(head) and len(head) + int(m.group(1)) == len(whole)
    assert len(head) > 10_000
    return head


def check_failure(got: Any, letter: str = "x", prefix: str = "") -> None:
    """``got`` (type, message, traceback) is the ValueError of 200,000 ``letter``s, cut;
    its message after ``prefix`` (a consumer's says its upstream call failed)."""
    assert isinstance(got, list) and got[0] == "ValueError", str(got)[:300]
    message, traceback = got[1], got[2]
    assert message.startswith(prefix), message[:200]
    cut(message.removeprefix(prefix), letter * 200_000)
    tail = f"ValueError: {letter * 200_000}\n"  # (the last line of the traceback)
    if traceback:  # (the producer's own: its frames, then as much of the last line as fits)
        start = traceback.index(tail[:100])
        assert "raise ValueError" in traceback[:start]
        cut(traceback[start:], tail)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("style", ["sync", "async"])
def test_a_failure_over_the_frame_limit_reaches_the_client_cut(
        tmp_path: Path, style: str, transport: str) -> None:
    """A plain call: the ValueError, its message and traceback cut to fit (it was
    "MessageTooLarge: the value it returned cannot be sent"); twice, and the replica
    serves on."""
    got = run(app(tmp_path, "plain", style=style, transport=transport))
    check_failure(got[0])
    check_failure(got[1])
    assert got[2] == 5


@pytest.mark.timeout(90)
@pytest.mark.parametrize("pool", ["", POOL], ids=["threads", "processes"])
@pytest.mark.parametrize("other", [False, True], ids=["same-replica", "other-replica"])
def test_a_forwarded_failure_over_the_frame_limit_fails_its_consumer(
        tmp_path: Path, pool: str, other: bool) -> None:
    """``wait(echo(raises(...)))``, the failure forwarded to echo's replica: the consumer
    fails with the producer's ValueError, cut (on the same replica its answer could not
    be sent and it waited for ever; on another the Deliver was refused and it failed
    with "the value it returned cannot be sent"), the producer's own promise too, and
    both replicas serve on, forwarding included."""
    got = run(app(tmp_path, "forwarded", pool=pool, other=other))
    consumer, producer, after, forwarded = got
    check_failure(consumer, prefix="an upstream call failed: ")
    check_failure(producer)
    assert after == 5 and forwarded == 7


@pytest.mark.timeout(90)
def test_an_aggregated_call_failing_over_the_frame_limit_fails_alone(tmp_path: Path) -> None:
    """A batch of 8 whose third call raises a 200 KB message: that call fails with its
    ValueError, cut, and the other 7 have their values (the whole batch failed: "the
    answers of this batch of 8 calls do not fit in one frame together"); its failure,
    forwarded from the batch, fails its consumer the same way."""
    got = run(app(tmp_path, "aggregated"))
    assert got[:2] + got[3:8] == [0, 1, 3, 4, 5, 6, 7]
    check_failure(got[2], "y")
    check_failure(got[8], "y", prefix="an upstream call failed: ")
    assert got[9] == 9
