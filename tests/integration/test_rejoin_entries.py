"""What a binding's entry is while a lost replica's place is empty, and after
(client/rejoin.py): a run at a shared registry wraps it from the loss until the place is
filled again, then gives it back as it would be had nothing been lost."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import polybus
from polybus.client.session import Session
from polybus.client.stats import link_bytes
from polybus.client.stubs import activate

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
