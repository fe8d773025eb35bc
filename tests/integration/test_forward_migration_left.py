"""What a move leaves on the replica a call was given back by (client/fwdmove.py).

A consumer given back by a ``Steal`` no longer counts its values' keys as taken on the
replica it left (so that, moved back there, it takes them again). A second copy of such
a value that came there after it left (a value may come twice: its producer's replica
sent it and the client sent it on, or a producer ran again) waited, taken by nothing,
until the replica's bound on unclaimed values pushed it out: the client now tells that
replica when the consumer ends, and the copy goes.

An aggregated batch given back moves whole to another replica, and the replica it left
is sent ``Cancel([batch id])``, forgetting what it was asked for the batch. A request a
consumer made of the batch while the Batcher's writes were held back (the linger timer
writing) was written after that, to the replica the batch had left, and stayed there,
waiting for a batch that would not come back, until the client went.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import polybus
from polybus.client.batchcalls import Pending
from polybus.client.calls import ReplicaLink
from polybus.client.session import Session
from polybus.wire.messages import Deliver

from .comm_harness import Cluster, cluster
from .test_forward_backlog import settled
from .test_forward_migration import (  # noqa: F401 (_grow: the same autouse fixture)
    _grow,
    by_hand,
    gated_pair,
    grown,
    queued_behind,
    queued_on,
    steal,
    wait_until,
)
from .test_forward_migration_aggregated import asked, conf, pinned
from .test_forward_migration_aggregated import by_hand as by_hand_agg
from .test_forward_migration_aggregated import steal as steal_agg


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
        (b1, b2), _p, q = gated_pair(s, tmp_path, 5, *gates)
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
        assert not fwd1._arrived and fwd1._arrived.nbytes == 0
        polybus.wait(b1)
        polybus.wait(b2)


def test_a_request_held_back_while_its_batch_moved_goes_where_the_batch_went(
        tmp_path: Path) -> None:
    # The batch waits on server-1 behind a gated call; its consumers are placed on
    # server-2 while the Batcher's writes are held back (as while the linger timer
    # writes), so what they ask of the batch waits; the batch is then given back and
    # moves to server-0 before those requests are written. (A linger that cannot run
    # out: the four calls are one batch, written when full; with 5 ms a program slowed
    # between its calls, as on a loaded machine, wrote two or more.)
    busy = tmp_path / "gate1"
    with cluster(tmp_path, conf("0:1:0", "0:0:1", linger="1h"), replicas=3) as c:
        s = c.session()
        m = by_hand_agg(s)
        fwd1 = _rt(c, "server-1").forwarding
        b1 = s.call("busy1", (0, str(busy)), {})
        try:
            ps = [s.call("agg", (i, ""), {}) for i in range(4)]
            b: Pending = ps[0]._rec  # type: ignore[attr-defined]
            bt = b.batcher
            queued_behind(c, "server-1", s, "grow", batch=4)  # (behind busy1, running)
            bt._writing = True
            try:
                qs = [s.call("double", (p,), {}) for p in ps]
                assert bt._after, len(bt._after)  # (the requests wait)
                steal_agg(s, m, "server-1", "server-0")
                assert b.link is not None and b.link.name == "server-0"
            finally:
                bt._writing = False
            bt._settle()  # (what waited is written now)
            got = [np.asarray(q) for q in qs]  # (server-1 still busy: run elsewhere)
            assert not b1.done
        finally:
            busy.touch()
        for i in range(4):
            assert np.array_equal(got[i], grown(i) * 2)
        polybus.wait(b1)
        polybus.wait(s.call("busy1", (1, ""), {}))  # server-1 has read all sent before
        assert not fwd1.slots and not fwd1.targets  # (nothing asked of it waits there)
        assert s.forwarder.relayed == 0  # type: ignore[attr-defined]
        wait_until(lambda: pinned(c) == 0 and asked(c) == 0, s)
