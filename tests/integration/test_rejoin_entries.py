"""What a binding's entry is while a lost replica's place is empty, and after
(client/rejoin.py): a run at a shared registry wraps it from the loss until the place is
filled again, then gives it back as it would be had nothing been lost."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

import polybus
from polybus.client.session import Session
from polybus.client.stats import link_bytes
from polybus.client.stubs import activate
from polybus.wire.messages import Replica
from polybus.worker.main import options_for
from polybus.worker.runtime import WorkerRuntime

from .comm_harness import Cluster, call, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.echo" = "server.echo"
"""


def _rejoining(c: Cluster) -> Session:
    s = Session(c.app, str(c.registry.address), c.token, rejoin=True)
    c.sessions.append(s)
    activate(s)
    return s


def _lose_first(c: Cluster, s: Session) -> None:
    c.runtimes[0].stop(grace=0.1)
    link = s.links["server"][0]
    deadline = time.monotonic() + 20
    while not link.dead and time.monotonic() < deadline:
        s.reactor.poll()
        time.sleep(0.01)
    assert link.dead, "server-0 not found lost"


def _back(c: Cluster, s: Session) -> None:
    """A new server-0 registered, and put in the lost one's place by the next calls."""
    c.runtimes[0] = c.start_replica("server-0")
    c.runtimes.pop()
    deadline = time.monotonic() + 20
    while any(lk.dead for lk in s.links["server"]) and time.monotonic() < deadline:
        assert call(s, "echo", 0) == 0
        time.sleep(0.05)
    assert not any(lk.dead for lk in s.links["server"]), "server-0 not taken back"


def test_a_broadcast_while_a_place_is_empty_still_travels_as_a_handle(
        tmp_path: Path) -> None:
    """A `broadcast` made while server-0 was lost (the sync binding's entry wrapped) left
    the binding on the plain sync path, meanwhile and once server-0 was back: a path
    with no cache, where the handle went by value, its 400 kB at every call."""
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = _rejoining(c)
        assert call(s, "echo", 1) == 1
        _lose_first(c, s)
        value = np.arange(50_000.0)  # 400 kB
        h = polybus.broadcast(value)
        _sends_refs(s, h, value)  # (its calls while the place is empty, on server-1)
        _back(c, s)
        _sends_refs(s, h, value)


def _sends_refs(s: Session, h: object, value: np.ndarray) -> None:
    """Four calls passing the handle ``h`` of ``value`` answer it, and carry it as a Ref."""
    before = sum(link_bytes(lk)[0] for lk in s.links["server"] if not lk.dead)
    for _ in range(4):
        assert np.array_equal(call(s, "echo", h), value)
    sent = sum(link_bytes(lk)[0] for lk in s.links["server"] if not lk.dead) - before
    # (at most a Put of it to the new server-0, which holds none of it, and four Refs)
    assert sent < 2 * value.nbytes, sent


TWO = """
[modules.server]
source = "server.py"
replication = 1

[modules.other]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.nap = { callstyle = "async-demand(1)" }

[bind]
"client.echo" = "server.echo"
"client.nap" = "other.nap"
"""


def test_a_call_waiting_for_a_lost_replica_leaves_the_pump_to_move_other_work(
        tmp_path: Path) -> None:
    """A program thread whose call waited for server-0 to come back stayed inside
    polybus all the while (up to the bound: 5 s, or --wait-for-workers), so the pump
    stood back: a call another thread left in another module's async-demand backlog
    waited for it, though its replica was free."""
    with cluster(tmp_path, TWO) as c:
        spec = c.app.modules["other"]
        other = WorkerRuntime("other-0", c.functions, c.token, "tcp://127.0.0.1:0",
                              options_for(spec, None, 1 << 30)).start()
        c.runtimes.append(other)
        c.reg_client.register(Replica("other-0", "other", str(other.address),
                                      sorted(c.functions)))
        s = _rejoining(c)
        assert s.gate is not None and s.rejoin is not None
        s.rejoin.bound = 60.0
        c.runtimes[0].stop(grace=0.1)
        link = s.links["server"][0]
        deadline = time.monotonic() + 20
        while not link.dead and time.monotonic() < deadline:
            s.reactor.poll()
            time.sleep(0.01)
        assert link.dead, "server-0 not found lost"
        echo, nap = polybus.use("echo"), polybus.use("nap")
        got: list[object] = []
        waiting = threading.Thread(target=lambda: got.append(echo(5)), daemon=True)
        waiting.start()
        try:
            deadline = time.monotonic() + 10
            while not s.gate.inside and time.monotonic() < deadline:
                time.sleep(0.01)
            p1, p2 = nap(1, 0.2), nap(2, 0.0)  # (the second waits in the backlog)
            deadline = time.monotonic() + 10
            while other.calls < 2 and time.monotonic() < deadline:
                time.sleep(0.01)  # (outside polybus: the pump moves what is left)
            assert other.calls == 2, "the backlog's call waited for the other thread"
            assert waiting.is_alive()  # (still waiting for server-0)
        finally:
            c.runtimes[0] = c.start_replica("server-0")
            c.runtimes.pop()
            waiting.join(30)
        assert got == [5]
        assert polybus.wait(p1) == 1 and polybus.wait(p2) == 2
