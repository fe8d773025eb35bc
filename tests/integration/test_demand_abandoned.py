"""async-demand(N): a call the client gave up on (timed out) whose replica has not
answered keeps one of that replica's N places until its late answer comes (or the
replica is lost), so the next calls go to a replica that is free, or wait at the client."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.errors import CallTimeoutError, ConnectionLostError

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.until = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.until = { callstyle = "async-demand(1)", timeout = "1s" }

[bind]
"client.until" = "server.until"
"""


def _poll_until(s: Any, done: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        s.reactor.poll()
        time.sleep(0.02)


def test_a_replica_still_running_a_call_given_up_on_gets_no_next_call(tmp_path: Path) -> None:
    """Call 0 hangs on one replica and times out; the next six, made at once, all run on
    the other, one at a time. Its place used to be freed at the timeout, and the next
    call went to the hung replica, to time out behind it."""
    hang, go = tmp_path / "hang", tmp_path / "go"
    go.touch()
    with cluster(tmp_path, TOML, replicas=2) as c:
        try:
            s = c.session()
            p0 = s.call("until", (0, str(hang)), {})
            with pytest.raises(CallTimeoutError):
                polybus.wait(p0)
            links = s.links["server"]
            (busy,) = [lk for lk in links if lk.abandoned]
            (free,) = [lk for lk in links if lk is not busy]
            before = {lk.name: lk.calls for lk in links}
            ps = [s.call("until", (i, str(go)), {}) for i in range(1, 7)]
            assert [polybus.wait(p) for p in ps] == [1, 2, 3, 4, 5, 6]
            assert free.calls == before[free.name] + 6
            assert busy.calls == before[busy.name]
            assert busy.abandoned  # (still running call 0 all along)
        finally:
            hang.touch()
        # Its late answer comes, is dropped, and gives the replica its place back.
        _poll_until(s, lambda: not busy.abandoned)
        assert not busy.abandoned
        before = {lk.name: lk.calls for lk in links}
        ps = [s.call("until", (i, str(go)), {}) for i in range(2)]
        assert [polybus.wait(p) for p in ps] == [0, 1]
        assert busy.calls == before[busy.name] + 1
        assert free.calls == before[free.name] + 1


def test_calls_wait_at_the_client_while_every_replica_runs_a_call_given_up_on(
        tmp_path: Path) -> None:
    """One replica, its call given up on: the next call is not written to it (where its
    count would run behind the hung call) but waits in the backlog, and runs once the
    late answer frees the place, its timeout counted from then."""
    hang, go = tmp_path / "hang", tmp_path / "go"
    go.touch()
    with cluster(tmp_path, TOML, replicas=1) as c:
        try:
            s = c.session()
            with pytest.raises(CallTimeoutError):
                polybus.wait(s.call("until", (0, str(hang)), {}))
            (link,) = s.links["server"]
            d = s.dispatchers["until"]
            p1 = s.call("until", (1, str(go)), {})
            for _ in range(5):
                s.reactor.poll()
            assert d.backlogged == 1
            assert not link.outstanding and link.abandoned
        finally:
            hang.touch()
        assert polybus.wait(p1) == 1
        assert not link.abandoned and d.inflight == [0]


def test_a_lost_replica_frees_the_places_of_its_calls_given_up_on(tmp_path: Path) -> None:
    """The replica running the call given up on is lost: its place goes with it (no
    answer will come), and the next calls run on the replica left."""
    hang, go = tmp_path / "hang", tmp_path / "go"
    go.touch()
    with cluster(tmp_path, TOML, replicas=2) as c:
        try:
            s = c.session()
            with pytest.raises(CallTimeoutError):
                polybus.wait(s.call("until", (0, str(hang)), {}))
            links = s.links["server"]
            (busy,) = [lk for lk in links if lk.abandoned]
            d = s.dispatchers["until"]
            i = links.index(busy)
            assert d.inflight[i] == 1
            s.reactor._lost(busy, ConnectionLostError("taken for lost by the test"))
            assert d.inflight[i] == 0 and not busy.abandoned
            ps = [s.call("until", (k, str(go)), {}) for k in range(3)]
            assert [polybus.wait(p) for p in ps] == [0, 1, 2]
        finally:
            hang.touch()
