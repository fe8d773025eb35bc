"""A session whose workers were started apart (``rejoin``: a run at a shared registry)
takes a lost replica back (client/rejoin.py); a run's own session does not.

In-process (comm_harness): the registry and the replicas run on threads; a replica is
stopped, and a new one registered under its name as `polybus worker` would register.
The wait for a lost replica is bounded by ``Rejoin.bound`` (5 s in a run), shortened here.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import polybus
from polybus.client.session import Session
from polybus.client.stubs import activate
from polybus.errors import ConnectionLostError, NoReplicaError

from .comm_harness import Cluster, call, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.until = { callstyle = "async" }

[bind]
"client.echo" = "server.echo"
"client.until" = "server.until"
"""


def _session(c: Cluster, rejoin: bool, bound: float) -> Session:
    s = Session(c.app, str(c.registry.address), c.token, rejoin=rejoin)
    c.sessions.append(s)
    activate(s)
    if s.rejoin is not None:
        s.rejoin.bound = bound
    return s


def _until_lost(s: Session, name: str) -> None:
    deadline = time.monotonic() + 20
    link = next(lk for lk in s.links["server"] if lk.name == name)
    while not link.dead and time.monotonic() < deadline:
        s.reactor.poll()
        time.sleep(0.01)
    assert link.dead, f"{name} not found lost"


def _lose(c: Cluster, s: Session) -> None:
    """server-0 stopped, and found lost by the session."""
    c.runtimes[0].stop(grace=0.1)
    _until_lost(s, "server-0")


def _again(c: Cluster) -> None:
    """A new server-0 registered in the stopped one's place."""
    c.runtimes[0] = c.start_replica("server-0")
    c.runtimes.pop()  # (start_replica appended it; it is in the old one's place)


def test_a_call_with_no_live_replica_waits_then_says_a_restart_is_taken_back(
        tmp_path: Path) -> None:
    """NoReplicaError at once, for good, though a new server-0 registered: now the
    call waits for the looks, fails once the bound passed saying what a restart would
    do, and the next call goes to the new server-0; the binding's entry is its plain
    one again once the place is filled."""
    with cluster(tmp_path, TOML) as c:
        s = _session(c, rejoin=True, bound=0.3)
        plain = s.entries["echo"]
        assert call(s, "echo", 1) == 1
        _lose(c, s)
        with pytest.raises(NoReplicaError) as e:
            call(s, "echo", 2)
        text = str(e.value)
        assert text.startswith("no live replica serves echo; lost replica(s) server-0 of "
                               f"module 'server' not back at {c.registry.address} within "
                               "0.3 s"), text
        assert "a worker started again under its name" in text, text
        assert "is taken back by later calls" in text, text
        # (the next call's wait, for a look that dials the new one, bounded as a run's:
        # 0.3 s was a flake on a loaded machine, where a dial took longer)
        s.rejoin.bound = 30.0  # type: ignore[union-attr]
        _again(c)
        assert call(s, "echo", 3) == 3
        assert c.runtimes[0].calls == 1
        assert s.entries["echo"] is plain


def test_a_call_lost_with_every_replica_runs_on_the_one_that_comes_back(
        tmp_path: Path) -> None:
    """A call held by the only replica when it went failed at once with
    ConnectionLostError; it waits for a live replica and runs there."""
    flag = tmp_path / "flag"
    with cluster(tmp_path, TOML) as c:
        try:
            s = _session(c, rejoin=True, bound=30.0)
            p = s.call("until", (7, str(flag)), {})
            _lose(c, s)
            flag.write_text("")
            _again(c)
            assert polybus.wait(p) == 7
            assert c.runtimes[0].calls == 1
        finally:
            flag.write_text("")


def test_a_call_lost_with_every_replica_fails_once_none_came_back(tmp_path: Path) -> None:
    """Past the bound, the error a run with its own workers gives at once, with what
    was waited for."""
    flag = tmp_path / "flag"
    with cluster(tmp_path, TOML) as c:
        try:
            s = _session(c, rejoin=True, bound=0.3)
            p = s.call("until", (7, str(flag)), {})
            _lose(c, s)
            with pytest.raises(ConnectionLostError) as e:
                polybus.wait(p)
            text = str(e.value)
            assert text.startswith("the call until(7, ") and " was lost: every replica of " \
                "until is gone (last: server-0: " in text, text
            assert "; lost replica(s) server-0 of module 'server' not back at" in text, text
        finally:
            flag.write_text("")


def test_a_run_with_its_own_workers_keeps_what_it_dialled(tmp_path: Path) -> None:
    """Without ``rejoin`` (the run started its workers): a lost replica stays lost, a
    call with none live fails at once, as documented, and nothing is looked for."""
    with cluster(tmp_path, TOML) as c:
        s = _session(c, rejoin=False, bound=0.0)
        assert s.rejoin is None
        assert call(s, "echo", 1) == 1
        _lose(c, s)
        _again(c)
        for x in (2, 3):
            with pytest.raises(NoReplicaError, match=r"^no live replica serves echo$"):
                call(s, "echo", x)
        assert c.runtimes[0].calls == 0
