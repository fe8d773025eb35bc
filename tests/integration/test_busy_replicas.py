"""A replica busy with a call, of any interface, or with one the client gave up on, is
passed over while another is free: a call sent there would wait behind it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.errors import CallTimeoutError

from .comm_harness import call, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.nap = {{}}
define.echo = {{}}

[modules.client]
source = "client.py"
entrypoint = "main"
use.nap = {{ {nap} }}
use.echo = {{ {echo} }}

[bind]
"client.nap" = "server.nap"
"client.echo" = "server.echo"
"""


def _poll_until(s: Any, done: Callable[[], bool], seconds: float = 20.0) -> None:
    """Take in answers (as a program's next wait would) until ``done()``, at most
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        s.reactor.poll()
        time.sleep(0.05)


def test_calls_after_one_given_up_on_go_to_the_free_replica(tmp_path: Path) -> None:
    """Round robin (sync): the replica still running a timed-out call is skipped. The
    next calls of another interface used to go there and wait out the abandoned call."""
    toml = TOML.format(nap='timeout = "0.2s"', echo="")
    with cluster(tmp_path, toml, replicas=2) as c:
        s = c.session()
        with pytest.raises(CallTimeoutError):
            call(s, "nap", 1, 2.0)
        links = s.links["server"]
        busy = [lk for lk in links if lk.abandoned]
        assert len(busy) == 1
        free = next(lk for lk in links if lk is not busy[0])
        before = {lk.name: lk.calls for lk in links}
        assert [call(s, "echo", i) for i in range(3)] == [0, 1, 2]
        assert free.calls == before[free.name] + 3
        assert busy[0].calls == before[busy[0].name]
        # Its late answer is dropped, and frees the replica for the rotation again.
        _poll_until(s, lambda: not busy[0].abandoned)
        assert not busy[0].abandoned


def test_async_demand_counts_the_calls_of_every_interface(tmp_path: Path) -> None:
    """async-demand(1) on echo, while nap (another interface) runs on one replica: echo
    goes to the other. Each interface counted only its own calls, so the replica busy
    with nap looked free to echo."""
    toml = TOML.format(nap='callstyle = "async"', echo='callstyle = "async-demand(1)"')
    with cluster(tmp_path, toml, replicas=2) as c:
        s = c.session()
        napping = s.call("nap", (1, 1.0), {})
        links = s.links["server"]
        busy = next(lk for lk in links if lk.outstanding)
        free = next(lk for lk in links if lk is not busy)
        p = s.call("echo", (7,), {})
        assert polybus.wait(p) == 7
        assert free.calls == 1 and busy.calls == 0
        assert polybus.wait(napping) == 1


def test_a_call_that_could_not_be_sent_leaves_no_replica_busy(tmp_path: Path) -> None:
    """It never left, so no answer will come: it used to be counted as given up on,
    and its replica was passed over for the rest of the run."""
    from polybus.errors import UnsendableError

    toml = TOML.format(nap="", echo="")
    with cluster(tmp_path, toml, replicas=2) as c:
        s = c.session()
        with pytest.raises(UnsendableError):
            call(s, "echo", object())
        links = s.links["server"]
        assert not any(lk.abandoned for lk in links)
        assert [call(s, "echo", i) for i in range(4)] == [0, 1, 2, 3]
        assert sorted(lk.calls for lk in links) == [2, 2]


def test_sync_calls_read_the_late_answer_of_a_call_given_up_on(tmp_path: Path) -> None:
    """A sync program that never polls: its calls to the other replica read the late
    answer too (they read only their own replica, and the first stayed passed over)."""
    toml = TOML.format(nap='timeout = "0.2s"', echo="")
    with cluster(tmp_path, toml, replicas=2) as c:
        s = c.session()
        with pytest.raises(CallTimeoutError):
            call(s, "nap", 1, 0.5)
        links = s.links["server"]
        (busy,) = [lk for lk in links if lk.abandoned]
        deadline = time.monotonic() + 20.0
        while busy.abandoned and time.monotonic() < deadline:
            assert call(s, "echo", 1) == 1
        assert not busy.abandoned


def test_a_call_given_up_on_and_given_back_by_a_steal_is_forgotten(tmp_path: Path) -> None:
    """A steal takes back waiting calls from the end of a replica's queue, one given up
    on among them: it will never run, so its replica is not busy with it."""
    toml = TOML.format(nap='callstyle = "async", balance = "steal", timeout = "1s"', echo="")
    with cluster(tmp_path, toml, replicas=2) as c:
        s = c.session()
        ps = [s.call("nap", (i, t), {}) for i, t in enumerate([3.0, 1.5, 0.0, 0.0, 0.0])]
        with pytest.raises(CallTimeoutError):
            polybus.wait(ps[4])
        links = s.links["server"]
        _poll_until(s, lambda: not any(lk.abandoned or lk.outstanding for lk in links))
        assert not any(lk.abandoned for lk in links)
