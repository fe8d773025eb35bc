"""Forwarding between an aggregated producer and calls that migration may move.

An aggregated call's promise is forwarded (``Forward`` with the call's ``index`` in its
batch), and a consumer whose binding may migrate (here ``balance = "steal"``) forwards
too, asking that the value stay pinned for it (``Forward`` with ``hold``) till it ends.
Both at once: the consuming call returns while the producer's batch waits, the value
goes replica to replica, a consumer moved after its value came gets it again from the
producer's store, and when the consumers end nothing stays pinned. A steal takes any of
the client's calls queued on a connection, an aggregated batch of another binding too:
it moves whole, and its calls' consumers are served from where it runs (client/migrate.py
and client/fwdmove.py; it failed the pump thread with an AttributeError before).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.client.migrate import Migrator
from polybus.client.session import Session
from polybus.wire.codec import Ref

from .comm_harness import Cluster, cluster
from .test_forward_aggregated import written
from .test_forward_backlog import SLACK, client_bytes, replica, settled
from .test_forward_migration import N, _grow, give_back, grown, queued_behind, queued_on, wait_until  # noqa: F401 (_grow: the same autouse fixture)

CONF = """
[modules.server]
source = "server.py"
replication = 3
{define}
[modules.client]
source = "client.py"
entrypoint = "main"
use.busy1 = {{ callstyle = "async", loadratio = "0:1:0" }}
use.agg = {{ callstyle = "async", aggregate = 4, linger = "{linger}", loadratio = "{agg}" }}
use.double = {{ callstyle = "async", balance = "steal", loadratio = "{double}" }}

[bind]
"client.busy1" = "server.grow"
"client.agg" = "server.grow"
"client.double" = "server.double"
"""


def conf(agg: str, double: str, define: str = "", linger: str = "5ms") -> str:
    return CONF.format(agg=agg, double=double, define=define, linger=linger)


def pinned(c: Cluster) -> int:
    return sum(rt.forwarding.kept.pinned for rt in c.runtimes)


def asked(c: Cluster) -> int:
    """Forward/Keep requests left on the replicas (single calls' and batches')."""
    return sum(len(rt.forwarding.targets) + len(rt.forwarding.slots) for rt in c.runtimes)


def by_hand(s: Session) -> Migrator:
    """The consumer binding's migrator, which moves nothing by itself now."""
    m = next(m for m in s.migrators if m.d.interface == "double")
    m.tick = lambda: None  # type: ignore[method-assign]
    return m


def steal(s: Session, m: Migrator, src: str, dst: str) -> None:
    """One waiting call of the client's on ``src`` given back, for ``dst`` (a Steal)."""
    before = sum(m.moved_in.values())
    give_back(s, m, src, dst)
    wait_until(lambda: sum(m.moved_in.values()) > before, s)


def test_an_aggregated_producer_feeds_a_migrating_consumer_without_blocking(
        tmp_path: Path) -> None:
    # Two batches of 4 on server-0, gated; every consumer placed on server-1, which the
    # idle replicas steal from. Each consuming call returns while its producer waits.
    # (A linger that cannot run out: each batch is written when full, at its fourth
    # call, so the first three consumers of each are asked with their batch and the
    # fourth after it; with 5 ms a loaded machine wrote batches of any size.)
    n = 8
    gate = tmp_path / "gate"
    with cluster(tmp_path, conf("1:0:0", "0:1:0", linger="1h"), replicas=3) as c:
        s = c.session()
        try:
            ps, qs = [], []
            for i in range(n):
                ps.append(s.call("agg", (i, str(gate)), {}))
                qs.append(s.call("double", (ps[-1],), {}))  # (it waited here for ps[-1])
            assert not any(p.done for p in ps)
            # The Forwards written and read before a producer answers: one not yet read
            # then found no request there, and its value went through the client.
            written(s, c)
        finally:
            gate.touch()
        got = [np.asarray(q) for q in qs]
        for i in range(n):
            assert np.array_equal(got[i], grown(i) * 2)
        f = s.forwarder  # type: ignore[attr-defined]
        assert f.forwarded == n and f.relayed == 0
        for p in ps:  # (answered Ref: each value went replica to replica)
            b, i = p._rec, p._i  # type: ignore[attr-defined]
            assert type(b.values[i]) is Ref, b.values[i]
        sent, recv = client_bytes(c)
        assert sent < n * SLACK and recv < n * (N + SLACK), (sent, recv)
        # Each consumer's end lets its value go: nothing pinned, nothing asked.
        wait_until(lambda: pinned(c) == 0 and asked(c) == 0, s)


def test_a_consumer_of_an_aggregated_call_moved_after_its_value_came_gets_it_again(
        tmp_path: Path) -> None:
    # The consumer waits in server-1's queue (behind a gated call) with its value, which
    # a call of a batch on server-0 sent and keeps pinned (Forward with index and hold);
    # moved to server-2, it is sent it again from server-0's store.
    busy, go = tmp_path / "gate1", tmp_path / "go"
    with cluster(tmp_path, conf("1:0:0", "0:1:0"), replicas=3) as c:
        s = c.session()
        m = by_hand(s)
        b1 = s.call("busy1", (0, str(busy)), {})
        ps = [s.call("agg", (i, str(go)), {}) for i in range(3)]
        q = s.call("double", (ps[2],), {})  # (asked of the batch when it is placed)
        ps.append(s.call("agg", (3, str(go)), {}))
        go.touch()
        try:
            queued_on(c, "server-1", s)  # (with its value: held calls do not move)
            assert pinned(c) == 1  # (kept for it while it may move)
            steal(s, m, "server-1", "server-2")
        finally:
            busy.touch()
        settled(q)
        assert np.array_equal(np.asarray(q), grown(2) * 2)
        assert replica(c, q).name == "server-2"
        assert s.forwarder.relayed == 0  # type: ignore[attr-defined]
        sent, recv = client_bytes(c)
        # q, b1 and the batch's other three values came; ps[2]'s never did
        assert sent < SLACK and recv < 5 * N + SLACK, (sent, recv)
        wait_until(lambda: pinned(c) == 0 and asked(c) == 0, s)
        polybus.wait(b1)


@pytest.mark.parametrize("dst", ["server-0", "nowhere", "cached"])
def test_a_batch_a_steal_gives_back_moves_whole_with_its_forwards(
        tmp_path: Path, dst: str) -> None:
    # The batch waits on server-1 behind a gated call of another binding; the consumer
    # binding's steal gives it back (a steal takes any of the client's calls there) and
    # it runs elsewhere at once (``nowhere``: no live replica was planned for it, as when
    # the one planned died: its binding's least loaded one), its values forwarded from
    # there, and server-1 forgets what it was asked for it. (``cached``: its binding
    # caches operands, so it is written for its new replica as its Batcher writes it.)
    busy = tmp_path / "gate1"
    cache = 'define.grow = { cache = "auto" }\ndefine.double = {}\n' if dst == "cached" else ""
    # (a linger that cannot run out: the four calls are one batch, written when full;
    # with 5 ms a loaded machine wrote two, and the one not moved waited behind busy1)
    with cluster(tmp_path, conf("0:1:0", "0:0:1", cache, linger="1h"), replicas=3) as c:
        s = c.session()
        m = by_hand(s)
        b1 = s.call("busy1", (0, str(busy)), {})
        try:
            ps = [s.call("agg", (i, ""), {}) for i in range(4)]
            qs = [s.call("double", (p,), {}) for p in ps]
            rt1 = next(rt for rt in c.runtimes if rt.name == "server-1")
            queued_behind(c, "server-1", s, "grow", batch=4)  # (behind busy1, running)
            steal(s, m, "server-1", {"nowhere": "server-1", "cached": "server-0"}.get(dst, dst))
            got = [np.asarray(q) for q in qs]  # (server-1 still busy: run elsewhere)
            assert not b1.done
        finally:
            busy.touch()
        for i in range(4):
            assert np.array_equal(got[i], grown(i) * 2)
        b: Any = ps[0]._rec  # type: ignore[attr-defined]
        assert b.link.name != "server-1"
        assert s.forwarder.relayed == 0  # type: ignore[attr-defined]
        polybus.wait(b1)
        # (server-1 has read what was sent it before this call: the Cancel among it)
        polybus.wait(s.call("busy1", (1, ""), {}))
        assert not rt1.forwarding.slots  # (the Cancel of what it was asked)
        wait_until(lambda: pinned(c) == 0 and asked(c) == 0, s)
