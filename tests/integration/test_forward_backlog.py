"""Forwarding to a consumer that waits at the client (an ``async-demand`` backlog).

A call naming an unanswered promise that cannot be sent yet (its binding's window is
full) used to make its producer's replica answer the client with the value, which the
client sent on once the consumer was placed: twice through the client's connections.
Now the producer's replica is asked to keep it (``Keep``) and sends it on itself when
the consumer is placed. The program can still ask for the producer's value; a failing
producer still fails its consumer with a typed error; and a producer's replica that
dies while it keeps the value makes the producer run again (idempotent) or fails the
consumer with a WorkerDiedError, never leaves it waiting.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.client.promise import Promise
from polybus.errors import RemoteException, TransportError, WorkerDiedError
from polybus.wire.codec import Ref
from polybus.worker.runtime import WorkerRuntime

from .comm_harness import Cluster, cluster, heard

PIPELINE = """
[modules.server]
source = "server.py"
replication = 3

[modules.client]
source = "client.py"
entrypoint = "main"
use.first = {{ callstyle = "async" }}
use.slow_double = {{ callstyle = "async-demand(1)"{aggregate} }}

[bind]
"client.first" = "server.slow_double"
"client.slow_double" = "server.slow_double"
"""

STAGES = """
[modules.server]
source = "server.py"
replication = 2
define.nap = {{}}
define.slow_double = {{ pool = 2, idempotent = {idempotent} }}

[modules.client]
source = "client.py"
entrypoint = "main"
use.nap = {{ callstyle = "async-demand(1)" }}
use.slow_double = {{ callstyle = "async", forward = {forward} }}

[bind]
"client.nap" = "server.nap"
"client.slow_double" = "server.slow_double"
"""
# (``nap(x, gate)``: x once the file ``gate`` exists, given a directory that does at
# once; ``slow_double(x, gate)``: x * 2 once it exists.)

X = np.random.default_rng(3).random(16384)  # 128 KiB: a value worth keeping off the client
SLACK = 8192  # the small messages of a run: calls, answers, Keeps and Forwards


def stages(idempotent: bool = True, forward: bool = True) -> str:
    return STAGES.format(idempotent=str(idempotent).lower(), forward=str(forward).lower())


def client_bytes(c: Cluster) -> tuple[int, int]:
    links = [lk for links in c.sessions[-1].links.values() for lk in links]
    return (sum(lk.channel.bytes_sent for lk in links),
            sum(lk.channel.bytes_received for lk in links))


def replica(c: Cluster, p: Any) -> WorkerRuntime:
    return next(rt for rt in c.runtimes if rt.name == p._rec.link.name)


def settled(p: Promise, within: float = 10.0) -> None:
    """Until ``p`` is answered (its value is not asked for: not fetched)."""
    for _ in polybus.as_completed([p], timeout=within):
        pass


def kill(rt: WorkerRuntime) -> None:
    """Stop ``rt`` as a kill would: it sends nothing more, to anyone."""
    def dead(to: str) -> Any:
        raise TransportError("killed")

    rt.forwarding._peer = dead  # type: ignore[method-assign]
    rt.stop(grace=0.05)


def backlogged_consumer(c: Cluster, busy: Path, x: Any = X) -> tuple[Any, Any]:
    """A producer (slow_double of ``x``), answered, and a consumer of it (nap) that
    waits in nap's backlog: each replica's window of one holds a nap that runs until the
    file ``busy`` exists, which the caller makes (the consumer is placed after). The
    producer answers once its replica has the Keep the consumer's wait asked of it: its
    value stays there, kept for the consumer."""
    s = c.session()
    for _ in c.runtimes:
        s.call("nap", (np.zeros(4), str(busy)), {})
    gate = c.tmp / "producer-may-answer"
    p1 = s.call("slow_double", (x, str(gate)), {})
    consumer = s.call("nap", (p1, str(c.tmp)), {})
    assert backlogged(consumer)  # (waits at the client to be placed)
    heard(c, s, p1)  # (its replica has the Keep)
    gate.touch()
    settled(p1)
    assert backlogged(consumer)  # (answered while the consumer waits)
    return p1, consumer


def backlogged(p: Any) -> bool:
    """``p`` waits at the client, in its binding's backlog, to be placed."""
    rec = p._rec
    return any(entry[2] is rec for entry in rec.dispatcher._backlog)


def until(what: str, done: Any, s: Any, within: float = 10.0) -> None:
    """Until ``done()``, the client reading its replicas meanwhile (bounded)."""
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, f"not {what} within {within} s"
        s.reactor.poll()
        time.sleep(0.005)


@pytest.mark.parametrize("transport,aggregate", [("tcp", ""), ("shm", ""), ("ipc", ""),
                                                 ("tcp", ", aggregate = 4")])
def test_a_backlogged_pipeline_keeps_its_values_off_the_client(
        tmp_path: Path, transport: str, aggregate: str) -> None:
    # 4 stages, the last three async-demand(1) on 3 replicas: most consumers wait in the
    # backlog while their producers answer. Each intermediate went to the client and
    # back (measured: 1.84 MB sent and received for 0.79 MB of inputs and answers).
    n, k = 6, 4
    with cluster(tmp_path, PIPELINE.format(aggregate=aggregate), replicas=3,
                 transport=transport) as c:
        s = c.session()
        gate = tmp_path / "gate"
        outs = []
        try:
            for i in range(n):
                # (the first stages answer once every call is made: no producer answers
                # before its consumer is, whatever the client's pace)
                p = s.call("first", (X + i, str(gate)), {})
                for _ in range(k - 1):
                    p = s.call("slow_double", (p, 0.05), {})
                outs.append(p)
        finally:
            gate.touch()
        for i, p in enumerate(outs):
            assert np.allclose(np.asarray(p), (X + i) * 2**k)
        sent, recv = client_bytes(c)
        f = s.forwarder  # type: ignore[attr-defined]
        moved = sum(rt.forwarding.forwarded for rt in c.runtimes)
    # The inputs out and the last values in, no intermediate relayed.
    assert sent < n * X.nbytes + n * SLACK, sent
    assert recv < n * X.nbytes + n * SLACK, recv
    assert f.keeps > 0 and moved == n * (k - 1) and f.relayed == 0, (moved, f.relayed)


def test_the_program_still_gets_a_value_kept_for_a_backlogged_consumer(tmp_path: Path) -> None:
    busy = tmp_path / "busy-may-end"
    with cluster(tmp_path, stages(), replicas=2) as c:
        try:
            p1, consumer = backlogged_consumer(c, busy)
            assert np.allclose(np.asarray(p1), X * 2)  # fetched from its replica's store
            assert backlogged(consumer)  # (still kept for it there)
        finally:
            busy.touch()  # (the consumer is placed now)
        assert np.allclose(np.asarray(consumer), X * 2)  # sent on from there
        sent, recv = client_bytes(c)
        assert sent < X.nbytes + SLACK  # X once, not p1's value again
        assert recv < 2 * X.nbytes + SLACK  # p1 (asked for) and the consumer's answer
        f = c.sessions[-1].forwarder  # type: ignore[attr-defined]
        assert (f.keeps, f.fetched, f.relayed) == (1, 1, 0)
        assert sum(rt.forwarding.kept.pinned for rt in c.runtimes) == 0  # taken by its Forward


def test_a_failing_producer_fails_its_backlogged_consumer_typed(tmp_path: Path) -> None:
    # Two producers whose consumers wait in the backlog: one raises, one answers. The
    # first's consumer fails with its typed error; the second's value goes replica to
    # replica (it came to the client and went out again).
    busy, gate = tmp_path / "busy-may-end", tmp_path / "producers-may-answer"
    with cluster(tmp_path, stages(), replicas=2) as c:
        s = c.session()
        now = str(tmp_path)
        try:
            for _ in c.runtimes:
                s.call("nap", (np.zeros(4), str(busy)), {})
            bad = s.call("slow_double", (None, str(gate)), {})  # None * 2 raises
            good = s.call("slow_double", (X, str(gate)), {})
            after_bad, after_good = s.call("nap", (bad, now), {}), s.call("nap", (good, now), {})
            assert s.dispatchers["nap"].backlogged == 2
            heard(c, s, bad, good)  # (their replicas have the Keeps)
            gate.touch()
            settled(bad)
            settled(good)
            assert backlogged(after_bad) and backlogged(after_good)  # (meanwhile)
        finally:
            gate.touch()
            busy.touch()  # (the consumers are placed now)
        producer = replica(c, bad)
        with pytest.raises(RemoteException) as err:
            polybus.wait(after_bad)
        text = str(err.value).splitlines()[0]
        assert err.value.remote_type == "TypeError" and "upstream" in text, text
        assert f"in slow_double on {producer.name}, upstream of nap" in text, text
        assert np.allclose(np.asarray(after_good), X * 2)
        sent, recv = client_bytes(c)
        assert sent < X.nbytes + SLACK and recv < X.nbytes + SLACK
        with pytest.raises(RemoteException) as err:
            polybus.wait(bad)
        assert err.value.remote_type == "TypeError"
        # Asked to keep its value, the failed producer's replica kept nothing and left
        # no request behind (the client's Cancel follows the Fail).
        deadline = time.monotonic() + 5
        while producer.forwarding.targets and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not producer.forwarding.targets
        assert c.sessions[-1].forwarder.keeps == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_producer_replica_dying_while_it_keeps_the_value(
        tmp_path: Path, idempotent: bool) -> None:
    busy = tmp_path / "busy-may-end"
    with cluster(tmp_path, stages(idempotent=idempotent), replicas=2) as c:
        try:
            p1, consumer = backlogged_consumer(c, busy)
            producer = replica(c, p1)
            assert type(p1._rec.value) is Ref  # type: ignore[attr-defined]  # (kept there)
            link = p1._rec.link  # type: ignore[attr-defined]
            kill(producer)  # (it still runs a nap: the client finds it gone)
            until("the producer's replica found gone", lambda: link.dead, c.sessions[-1])
            assert backlogged(consumer)  # (its value was lost while it waited)
        finally:
            busy.touch()  # (the consumer is placed now)
        if idempotent:  # run again on the other replica, which keeps it in turn
            assert np.allclose(np.asarray(consumer), X * 2)
            assert p1._rec.attempts == 2 and replica(c, p1) is not producer  # type: ignore[attr-defined]
            assert np.allclose(np.asarray(p1), X * 2)
        else:
            with pytest.raises(RemoteException) as err:
                polybus.wait(consumer)
            assert err.value.remote_type == "WorkerDiedError", err.value
            assert f"slow_double is gone ({producer.name})" in str(err.value)
            with pytest.raises(WorkerDiedError):
                polybus.wait(p1)


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_consumer_sent_a_value_from_a_store_that_dies_is_not_left_waiting(
        tmp_path: Path, idempotent: bool) -> None:
    # A consumer made after its producer answered Ref is sent the value from the
    # producer's store (a Forward). The producer's replica died before it read that
    # Forward: the consumer stayed held on its replica, and its promise waited for ever.
    text = stages(idempotent=idempotent).replace('"async-demand(1)"', '"async"')
    with cluster(tmp_path, text, replicas=2) as c:
        s = c.session()
        now, gate = str(tmp_path), tmp_path / "producer-may-answer"
        p1 = s.call("slow_double", (X, str(gate)), {})
        first = s.call("nap", (p1, now), {})
        heard(c, s, p1)  # (its replica has the Forward: p1 answers Ref)
        gate.touch()
        assert np.allclose(np.asarray(first), X * 2)
        assert type(p1._rec.value) is Ref  # type: ignore[attr-defined]
        producer = replica(c, p1)
        while True:  # (nap's replicas in turn: the consumer is to go to the other one)
            probe = s.call("nap", (X, now), {})
            polybus.wait(probe)
            if replica(c, probe) is producer:
                break
        producer.forwarding._forward = lambda ch, msg: None  # type: ignore[method-assign]
        consumer = s.call("nap", (p1, now), {})
        assert replica(c, consumer) is not producer
        kill(producer)  # (it never read the Forward)
        settled(consumer)
        if idempotent:  # run again on the consumer's replica, and sent on there
            assert np.allclose(np.asarray(consumer), X * 2)
        else:
            with pytest.raises(RemoteException) as err:
                polybus.wait(consumer)
            assert err.value.remote_type == "WorkerDiedError", err.value


def test_a_backlogged_consumer_that_ends_unplaced_releases_the_kept_value(
        tmp_path: Path) -> None:
    """The consumer fails at the client before it is placed (as when every replica of
    its interface is gone: Dispatcher.lost fails the backlog): its producer's replica
    lets go of the value it pinned for it. It stayed pinned until the client went,
    shrinking the store every other forwarded value is kept in."""
    from polybus.errors import ConnectionLostError

    busy = tmp_path / "busy-may-end"
    with cluster(tmp_path, stages(), replicas=2) as c:
        try:
            p1, consumer = backlogged_consumer(c, busy)
            producer = replica(c, p1)
            assert producer.forwarding.kept.pinned == 1
            s = c.sessions[-1]
            d = s.dispatchers["nap"]
            rec = consumer._rec
            d._backlog[:] = [x for x in d._backlog if x[2] is not rec]  # (what lost() does)
            rec.set_error(ConnectionLostError("every replica of nap is gone (a test)"))
            s.forwarder.answered(rec)  # type: ignore[attr-defined]
            deadline = time.monotonic() + 5
            while producer.forwarding.kept.pinned and time.monotonic() < deadline:
                time.sleep(0.01)
            assert producer.forwarding.kept.pinned == 0
            assert producer.forwarding.kept.pinned_bytes == 0
            assert np.allclose(np.asarray(p1), X * 2)  # the program can still fetch it
        finally:
            busy.touch()
        with pytest.raises(ConnectionLostError):
            polybus.wait(consumer)
