"""A long-lived session gets a lost replica's place filled for an aggregating binding too
(client/revive.py, as the front door's Revival does it: http/revival.py): its batches
go to the replacement again; and the replacement, which holds none of the session's
cached operands, is sent them rather than named them (aggregating or not).

In-process (comm_harness): `[serve]` routes take no ``aggregate``, so a session whose
binding aggregates is made here, and revive's steps are called as Revival calls them.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import polybus
from polybus.client.batching import Batcher
from polybus.client.calls import ReplicaLink
from polybus.client.revive import dial, install, wanted
from polybus.client.session import Session

from .comm_harness import Cluster, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.mul = { cache = ["b"] }

[modules.client]
source = "client.py"
entrypoint = "main"
use.mul = { callstyle = "async"AGGREGATE }

[bind]
"client.mul" = "server.mul"
"""


def _revive(s: Session) -> list[ReplicaLink]:
    """One look of the front door's Revival for module server's links."""
    w = wanted(s, "server")
    if w is None:
        return []
    found, failed = dial(w)
    assert not failed, failed
    return install(s, "server", found)


def _products(s: Session, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    rows = [s.call("mul", (a[i], b), {}) for i in range(len(a))]
    return np.vstack([polybus.wait(r) for r in rows])


def _until_lost(s: Session, name: str) -> None:
    deadline = time.monotonic() + 20
    link = next(lk for lk in s.links["server"] if lk.name == name)
    while not link.dead and time.monotonic() < deadline:
        s.reactor.poll()
        time.sleep(0.01)
    assert link.dead, f"{name} not found lost"


def _replace(c: Cluster, s: Session, i: int) -> None:
    """server-``i`` stopped, and a new server-``i`` registered in its place."""
    c.runtimes[i].stop()
    _until_lost(s, f"server-{i}")
    c.runtimes[i] = c.start_replica(f"server-{i}")
    c.runtimes.pop()  # (start_replica appended it; it is in the old one's place)


@pytest.mark.parametrize("aggregate", [', aggregate = 4, linger = "60s"', ""])
def test_a_binding_uses_the_replacement_and_puts_it_the_operands(
        tmp_path: Path, aggregate: str) -> None:
    """An aggregating binding's links were never refilled: every batch went to server-0
    for good, though a new server-1 had registered. With or without aggregation, the
    new server-1 was taken to hold the old one's operands: each call or batch named B
    there, missed, and went again."""
    a, b = np.random.default_rng(51).random((16, 16)), np.random.default_rng(52).random((16, 16))
    with cluster(tmp_path, TOML.replace("AGGREGATE", aggregate), replicas=2) as c:
        s = c.session()
        assert (type(s.entries["mul"]) is Batcher) == bool(aggregate)
        assert np.allclose(_products(s, a, b), a @ b)  # (4 batches: 2 on each replica)
        assert c.runtimes[0].calls == c.runtimes[1].calls == 8
        _replace(c, s, 1)
        assert np.allclose(_products(s, a, b), a @ b)  # (server-0 alone, still lost)
        _revive(s)
        comm = s.dispatchers["mul"].comm
        assert comm is not None
        resent = comm.resent
        assert np.allclose(_products(s, a, b), a @ b)
        assert c.runtimes[1].calls == 8, "the new server-1 got no call"
        # B went to it in a Put: the client did not take it for the old server-1's
        # cache (a miss, and the batch sent again)
        assert c.runtimes[1].cache.misses == 0 and comm.resent == resent
        assert len(c.runtimes[1].cache) == 1

