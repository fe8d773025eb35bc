"""What a move leaves on the replica a call was given back by (client/fwdmove.py).

A consumer given back by a ``Steal`` no longer counts its values' keys as taken on the
replica it left (so that, moved back there, it takes them again). A second copy of such
a value that came there after it left (a value may come twice: its producer's replica
sent it and the client sent it on, or a producer ran again) waited, taken by nothing,
until the replica's bound on unclaimed values pushed it out: the client now tells that
replica when the consumer ends, and the copy goes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import polybus
from polybus.client.calls import ReplicaLink
from polybus.client.session import Session
from polybus.wire.messages import Deliver

from .comm_harness import Cluster
from .test_forward_backlog import settled
from .test_forward_migration import _grow, by_hand, grown, queued_on, steal, wait_until  # noqa: F401 (_grow: the same autouse fixture)


def _link(s: Session, name: str) -> ReplicaLink:
    return next(lk for links in s.links.values() for lk in links if lk.name == name)


def _rt(c: Cluster, name: str) -> Any:
    return next(rt for rt in c.runtimes if rt.name == name)


def test_a_copy_that_came_after_its_consumer_left_goes_when_the_consumer_ends(
        tmp_path: Path) -> None:
    # q waits on server-1 with its value, is moved to server-2 (busy in turn), and a
    # second copy of its value comes to server-1 after: as the client sends on a value
    # its producer's replica sent too, when it had no room to pin it.
    gates = [tmp_path / "gate1", tmp_path / "gate2"]
    with by_hand(tmp_path) as c:
        s = c.session()
        fwd1 = _rt(c, "server-1").forwarding
        b1 = s.call("busy1", (0, str(gates[0])), {})
        b2 = s.call("busy2", (0, str(gates[1])), {})
        p = s.call("grow", (5, str(tmp_path / "go")), {})
        q = s.call("double", (p,), {})
        (tmp_path / "go").touch()
        try:
            queued_on(c, "server-1", s)
            steal(s, "server-1", "server-2")
            queued_on(c, "server-2", s)
            key = s.forwarder.deps[q._rec.id][0].key  # type: ignore[attr-defined]
            assert s.gate is not None
            s.gate.enter()
            try:
                s.reactor.send(_link(s, "server-1"), Deliver(key, True, grown(5)))
            finally:
                s.gate.leave()
            wait_until(lambda: key in fwd1._arrived, s)  # (q may come back: it waits)
        finally:
            for g in gates:
                g.touch()
        settled(q)
        assert np.array_equal(np.asarray(q), grown(5) * 2)
        wait_until(lambda: key not in fwd1._arrived, s)  # (it waited there till the bound)
        assert not fwd1._arrived and fwd1._arrived_bytes == 0
        polybus.wait(b1)
        polybus.wait(b2)
