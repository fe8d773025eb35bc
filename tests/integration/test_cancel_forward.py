"""``p.cancel()`` in pipelines (client/cancel.py, client/forward.py): cancelling a
consumer breaks neither its producer nor the producer's other consumers; cancelling a
producer fails each consumer that needed its value with a CancelledError naming it
(the consumers themselves were not cancelled: their ``cancelled()`` stays False)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.errors import CancelledError

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
define.gated_double = {{ pool = {pool} }}
define.until = {{ pool = {pool} }}
define.double = {{ pool = {pool} }}
define.echo = {{ pool = {pool} }}

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated_double = {{ callstyle = "async" }}
use.until = {{ callstyle = "async" }}
use.double = {{ callstyle = "{style}"{forward} }}
use.echo = {{ callstyle = "async", aggregate = 4, linger = "30s" }}

[bind]
"client.gated_double" = "server.gated_double"
"client.until" = "server.until"
"client.double" = "server.double"
"client.echo" = "server.echo"
"""


def _toml(pool: int = 1, forward: str = "", style: str = "async") -> str:
    return TOML.format(pool=pool, forward=forward, style=style)


def _clean(s: Any, runtime: Any) -> None:
    """No edge left at the client, no call or value left waiting on the replica."""
    f = getattr(s, "forwarder", None)
    if f is not None:
        assert not f.edges and not f.deps
    fwd = runtime.forwarding
    assert not fwd._held and not fwd._arrived and not fwd.targets
    (link,) = s.links["server"]
    assert not link.outstanding and not s.reactor.revoking
    if s.awaiting is not None:
        assert not s.awaiting.calls and not s.awaiting.by_producer


def test_cancelling_a_consumer_leaves_its_running_producer_and_other_consumers(
        tmp_path: Path) -> None:
    flag = tmp_path / "go"
    with cluster(tmp_path, _toml(pool=4)) as c:
        s = c.session()
        p = s.call("gated_double", (1, str(flag)), {})  # runs until the flag
        c1 = s.call("double", (p,), {})  # both held on the replica for p's value
        c2 = s.call("double", (p,), {})
        assert c1.cancel() is True
        assert c.runtimes[0].forwarding.held_calls() == 1  # (c2: c1 went)
        assert c1.cancelled() and not p.cancelled() and not c2.cancelled()
        flag.touch()
        assert polybus.wait(c2) == 4 and polybus.wait(p) == 2
        with pytest.raises(CancelledError, match="was cancelled before it ran"):
            polybus.wait(c1)
        s.reactor.poll()
        assert c.runtimes[0].calls == 2  # (p and c2)
        _clean(s, c.runtimes[0])


@pytest.mark.parametrize("forward", ["", ", forward = false"])
def test_cancelling_a_producer_fails_its_consumers_with_cancelled_error(
        tmp_path: Path, forward: str) -> None:
    """The producer is queued behind a call that runs until the test says; its consumer
    (and the consumer's own consumer) is held for its value: on the replica (forwarding),
    or at the client (``forward = false``)."""
    hang = tmp_path / "hang"
    with cluster(tmp_path, _toml(forward=forward)) as c:
        s = c.session()
        blocker = s.call("until", (0, str(hang)), {})
        p = s.call("double", (1,), {})
        consumer = s.call("double", (p,), {})
        further = s.call("double", (consumer,), {})
        assert p.cancel() is True
        for q in (consumer, further):
            with pytest.raises(CancelledError, match=r"was not run: it needed the value of "
                                                     r"the call double\(1\), which was "
                                                     "cancelled") as e:
                polybus.wait(q)
            assert e.value.upstream == "double(1)" and e.value.interface == "double"
            assert q.done and not q.cancelled() and q.cancel() is False
            assert q.exception() is e.value  # (its own error: it was not cancelled)
        hang.touch()
        assert polybus.wait(blocker) == 0
        assert c.runtimes[0].calls == 1  # (none of the three ran)
        _clean(s, c.runtimes[0])


def test_cancelling_an_aggregated_producer_fails_its_forwarded_consumer(
        tmp_path: Path) -> None:
    with cluster(tmp_path, _toml()) as c:
        s = c.session()
        p = s.call("echo", (5,), {})  # (in the open batch)
        q = s.call("echo", (6,), {})
        consumer = s.call("double", (p,), {})  # (held on the replica for p's value)
        other = s.call("double", (q,), {})
        assert p.cancel() is True
        with pytest.raises(CancelledError, match=r"it needed the value of the call "
                                                 r"echo\(5\)"):
            polybus.wait(consumer)
        assert polybus.wait(other) == 12 and polybus.wait(q) == 6
        _clean(s, c.runtimes[0])


def test_cancelling_a_consumer_in_the_backlog_lets_go_what_its_producer_keeps_for_it(
        tmp_path: Path) -> None:
    """async-demand(1): the second consumer waits at the client, its producer's replica
    asked to keep the value for it (``Keep``); cancelled, that is let go."""
    flag = tmp_path / "go"
    with cluster(tmp_path, _toml(pool=4, style="async-demand(1)")) as c:
        s = c.session()
        p = s.call("gated_double", (1, str(flag)), {})
        c1 = s.call("double", (p,), {})  # placed, held on the replica for p's value
        c2 = s.call("double", (p,), {})  # in the backlog: p's replica keeps it for c2
        assert s.dispatchers["double"].backlogged == 1
        assert s.forwarder.keeps == 1
        assert c2.cancel() is True
        assert s.dispatchers["double"].backlogged == 0
        flag.touch()
        assert polybus.wait(c1) == 4 and polybus.wait(p) == 2
        with pytest.raises(CancelledError):
            polybus.wait(c2)
        s.reactor.poll()
        assert c.runtimes[0].forwarding.kept.pinned == 0  # (nothing kept for c2)
        _clean(s, c.runtimes[0])
