"""Two replicas forwarding kept values to each other at once (worker/fwdpeers.py).

A value kept on its replica (``forward = "keep"``, or answered before its consumer was
placed) goes on when the client's ``Forward`` for it comes, and the replica reading its
sockets handled that request. The first value to a peer dials it: the reading thread
waited there for the peer's greeting, which the peer sends only once its own reading
thread accepts the connection. Two replicas each sending a value to the other at once
both waited, reading nothing, answering no Ping: the client took both for dead after 3 s
and the run failed (a two-stage program, `a = f(g1); b = f(g0)` on two replicas).
The dial is made by a thread of its own now, and the pollers read on.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polybus.worker import fwdpeers

from .comm_harness import cluster, heard
from .test_forward_backlog import settled

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.double = {}
define.add = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = { callstyle = "async", forward = "keep" }
use.add = { callstyle = "async" }

[bind]
"client.double" = "server.double"
"client.add" = "server.add"
"""

X = np.random.default_rng(3).random(32768)  # 256 KiB: kept on its replica


@pytest.fixture
def slow_dial(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica's dial of another takes 0.3 s first (a slow network's, or a busy
    host's): both replicas are then dialing when either's connection arrives."""
    real = fwdpeers.connect

    def connect(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)
        return real(*args, **kwargs)

    monkeypatch.setattr(fwdpeers, "connect", connect)


def _crossed(tmp_path: Path) -> None:
    """Two values, each kept on its replica, each sent to the other replica at once:
    both arrive, and each replica counts the one it sent on."""
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = c.session()
        p0 = s.call("double", (X,), {})        # server-0
        p1 = s.call("double", (X + 1,), {})    # server-1
        settled(p0)
        settled(p1)
        q0 = s.call("add", (p1, 1.0), {})  # one replica, the value from the other
        q1 = s.call("add", (p0, 1.0), {})  # and the other way round, at once
        assert np.array_equal(np.asarray(q0), (X + 1) * 2 + 1)
        assert np.array_equal(np.asarray(q1), X * 2 + 1)
        # (sent replica to replica, each way: neither through the client)
        assert [rt.forwarding.forwarded for rt in c.runtimes] == [1, 1]


def test_two_replicas_forwarding_to_each_other_at_once_both_deliver(
        tmp_path: Path, slow_dial: None) -> None:
    _crossed(tmp_path)


def test_two_producers_finishing_at_once_forward_to_each_other(
        tmp_path: Path, slow_dial: None) -> None:
    toml = TOML.replace("define.add = {}", "define.add = {}\ndefine.gated_double = {}")
    toml = toml.replace('"client.add" = "server.add"', '"client.add" = "server.add"\n'
                        '"client.gated_double" = "server.gated_double"')
    toml = toml.replace('use.add = {', 'use.gated_double = { callstyle = "async" }\n'
                        'use.add = {')
    flag = tmp_path / "go"
    with cluster(tmp_path, toml, replicas=2) as c:
        s = c.session()
        p0 = s.call("gated_double", (X, str(flag)), {})      # server-0, held
        p1 = s.call("gated_double", (X + 1, str(flag)), {})  # server-1, held
        q0 = s.call("add", (p1, 1.0), {})  # asked before the producers answer
        q1 = s.call("add", (p0, 1.0), {})
        heard(c, s, p0, p1)  # (the Forwards read by both replicas)
        flag.touch()     # both answer at once, each sending its value to the other
        assert np.array_equal(np.asarray(q0), (X + 1) * 2 + 1)
        assert np.array_equal(np.asarray(q1), X * 2 + 1)
        assert [rt.forwarding.forwarded for rt in c.runtimes] == [1, 1]


def test_a_value_sent_on_is_counted_before_its_consumer_can_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The count of values a replica sent on includes one as soon as it went: counted
    after the send returned, a consumer's answer (and the client's look at the counts)
    could come first, when the sending thread was slow to return (a busy machine)."""
    real = fwdpeers.Peers._peer

    class Slow:  # a peer connection whose send returns late, the message gone at once
        def __init__(self, ch: Any) -> None:
            self.ch = ch

        def send(self, msg: Any) -> None:
            self.ch.send(msg)
            time.sleep(1.0)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.ch, name)

    monkeypatch.setattr(fwdpeers.Peers, "_peer", lambda self, to: Slow(real(self, to)))
    _crossed(tmp_path)
