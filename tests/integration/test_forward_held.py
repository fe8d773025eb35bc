"""A consumer call held for a forwarded value that will never come is let go at once.

A call naming ``Ref("fwd", key)`` waits at its replica (C) for the producer's replica
(P) to send that value. When the value will never come, because P cannot reach C, P
died, or the client gave up the producer call (its ``timeout``), the consumer fails with
a typed error naming the producer, and C frees the held call (and its arguments) then,
not when the client disconnects. A consumer the client gives up is freed on C too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.client.forward import Forwarder
from polybus.client.promise import Promise
from polybus.errors import CallTimeoutError, RemoteException, TransportError, WorkerDiedError
from polybus.worker.runtime import WorkerRuntime

from .comm_harness import Cluster, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.double = {{}}
define.nap = {{}}
define.slow_double = {{ idempotent = {idempotent} }}

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = {{ callstyle = "async" }}
use.nap = {{ callstyle = "async"{consumer_timeout} }}
use.slow_double = {{ callstyle = "async"{producer_timeout} }}

[bind]
"client.double" = "server.double"
"client.nap" = "server.nap"
"client.slow_double" = "server.slow_double"
"""

X = np.arange(64.0)


def toml(idempotent: bool = True, producer_timeout: float = 0, consumer_timeout: float = 0) -> str:
    return TOML.format(
        idempotent=str(idempotent).lower(),
        producer_timeout=f", timeout = {producer_timeout}" if producer_timeout else "",
        consumer_timeout=f", timeout = {consumer_timeout}" if consumer_timeout else "")


def replica(c: Cluster, p: Any) -> WorkerRuntime:
    name = p._rec.link.name
    return next(rt for rt in c.runtimes if rt.name == name)


def gate(c: Cluster) -> str:
    """The path a gated producer (``slow_double`` given it) waits for, 10 s at most."""
    return str(c.tmp / "gate")


def opened(c: Cluster) -> None:
    """Let the gated producers answer (every test opens the gate before it ends: a
    producer left waiting would keep its pool thread for 10 s)."""
    Path(gate(c)).touch()


def started(c: Cluster, within: float = 10.0) -> None:
    """Once a gated producer has begun: it runs until the gate opens."""
    deadline = time.monotonic() + within
    while not Path(gate(c) + ".started").exists():
        assert time.monotonic() < deadline, "the producer never started"
        time.sleep(0.001)


def asked(c: Cluster, p: Any, within: float = 10.0) -> None:
    """Once ``p``'s replica holds the client's request to forward its answer (a
    Forward is written when the consuming call is made: flushed here all the same)."""
    s, rt = c.sessions[-1], replica(c, p)
    deadline = time.monotonic() + within
    while not any(where[1] == p._rec.id for where in rt.forwarding.targets):
        assert time.monotonic() < deadline, "the Forward never reached the producer"
        s.reactor.flush_all()
        time.sleep(0.001)


def apart(c: Cluster, consumer: str) -> tuple[Any, Callable[[Any], Any]]:
    """A producer on server-0, gated (`opened`), and a way to make ``consumer`` calls on
    server-1 (each interface picks replicas in turn: one call to it first)."""
    s = c.session()
    polybus.wait(s.call(consumer, (X, 0) if consumer == "nap" else (X,), {}))
    p1 = s.call("slow_double", (X, gate(c)), {})

    def consume(p: Any) -> Any:
        return s.call(consumer, (p, 0) if consumer == "nap" else (p,), {})

    return p1, consume


def outcome(p: Promise, within: float = 5.0) -> Any:
    """``wait(p)``, but a test that would wait for ever fails instead."""
    for _ in polybus.as_completed([p], timeout=within):
        pass
    return polybus.wait(p)


def wait_guarded(p: Any, c: Cluster, within: float = 5.0) -> Any:
    """``wait(p)`` as a program waits (its one-replica fast path included), for a
    consumer held on its replica: if nothing has answered it within ``within``, the
    test fails it there itself ("the test's watchdog") rather than wait for ever."""
    f = c.sessions[-1].forwarder  # type: ignore[attr-defined]
    keys = [e.key for e in f.deps.get(p._rec.id, ())]
    rt = replica(c, p)

    def watchdog() -> None:
        for key in keys:
            rt.forwarding.arrive(key, False, ["TimeoutError", "the test's watchdog", ""])

    timer = threading.Timer(within, watchdog)
    timer.start()
    try:
        return polybus.wait(p)
    finally:
        timer.cancel()
        timer.join()


def held_soon(rt: WorkerRuntime, within: float = 1.0) -> int:
    """The calls ``rt`` still holds for forwarded values, once none do or ``within`` passed."""
    deadline = time.monotonic() + within
    while rt.forwarding.held_calls() and time.monotonic() < deadline:
        time.sleep(0.01)
    return rt.forwarding.held_calls()


def upstream_named(err: RemoteException, producer: str, consumer: str,
                   verdict: bool = True) -> str:
    """``verdict``: the producer failed by the client's verdict on it (a timeout's "sent
    to server-0", a loss's "server-0 died"), which names its replica: named once, not
    again as where it failed. Else it failed on its replica ("in f on server-0")."""
    text = str(err).splitlines()[0]
    assert "upstream" in text, text
    if verdict:
        assert text.count(producer) == 1 + (producer == consumer), text
        assert f"in slow_double, upstream of double on {consumer}" in text, text
    else:
        assert f"in slow_double on {producer}, upstream of double on {consumer}" in text, text
    assert err.interface == "double" and err.replica == consumer
    return text



def kill(c: Cluster, producer: Any) -> None:
    """Stop the producer's replica mid-call as a kill would: it sends nothing more. The
    gated producer has begun; the gate opens after the stop (a call run again runs)."""
    started(c)

    def dead(to: str) -> Any:
        raise TransportError("killed")

    producer.forwarding._peer = dead
    producer.stop(grace=0.05)
    opened(c)

def test_a_consumer_replica_the_producer_cannot_reach_fails_the_consumer_and_frees_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # It waited for ever (the client too): the producer's replica logged "cannot forward
    # to ...", answered Ref("fwd", []), the client asked it to forward again, and it
    # failed again, silently.
    with cluster(tmp_path, toml(), replicas=2) as c:
        p1, consume = apart(c, "double")
        producer = replica(c, p1)

        def unreachable(to: str) -> Any:
            raise TransportError(f"cannot connect to {to}: no route to host")

        monkeypatch.setattr(producer.forwarding, "_peer", unreachable)
        p2 = consume(p1)
        consumer = replica(c, p2)
        assert producer is not consumer
        assert consumer.forwarding.held_calls() <= 1
        asked(c, p1)  # (p1 unanswered: its value is to go replica to replica)
        opened(c)
        with pytest.raises(RemoteException) as err:
            outcome(p2)
        text = upstream_named(err.value, producer.name, consumer.name, verdict=False)
        assert err.value.remote_type == "TransportError"
        assert f"{producer.name} could not send the value to {consumer.address}" in text, text
        assert held_soon(consumer) == 0
        # A consumer made once the producer has answered: its value is sent on from the
        # producer's store, and the client, waiting on the consumer alone, hears that
        # it could not be.
        polybus.wait(consume(X))  # (on the producer's replica: the next goes to the other)
        p3 = consume(p1)
        assert replica(c, p3) is consumer
        with pytest.raises(RemoteException) as err:
            wait_guarded(p3, c)
        upstream_named(err.value, producer.name, consumer.name, verdict=False)
        assert err.value.remote_type == "TransportError"
        assert held_soon(consumer) == 0
        assert producer.forwarding.kept  # (served from there)
        assert np.allclose(np.asarray(p1), X * 2)  # the producer's own value is still good


def test_a_producer_given_up_fails_its_consumer_and_frees_it(tmp_path: Path) -> None:
    # The consumer stayed held until the producer finished (for ever, if it never did),
    # and then ran: its value came though its upstream promise had failed.
    with cluster(tmp_path, toml(producer_timeout=0.3), replicas=2) as c:
        p1, consume = apart(c, "double")  # (it runs on until the gate opens, below)
        p2 = consume(p1)
        producer, consumer = replica(c, p1), replica(c, p2)
        assert producer is not consumer
        with pytest.raises(CallTimeoutError):
            polybus.wait(p1)
        assert held_soon(consumer, within=5.0) == 0  # (the producer still running)
        opened(c)
        with pytest.raises(RemoteException) as err:
            outcome(p2)
        upstream_named(err.value, producer.name, consumer.name)
        assert err.value.remote_type == "CallTimeoutError"


def test_a_consumer_given_up_is_freed_on_its_replica(tmp_path: Path) -> None:
    # It stayed held until the producer's value came (for ever, if it never did).
    with cluster(tmp_path, toml(consumer_timeout=0.3), replicas=2) as c:
        p1, consume = apart(c, "nap")  # (it runs on until the gate opens, below)
        p2 = consume(p1)
        consumer = replica(c, p2)
        assert replica(c, p1) is not consumer
        (edge,) = c.sessions[-1].forwarder.deps[p2._rec.id]  # type: ignore[attr-defined]
        came: list[bool] = []  # (the values for p2 its replica was given: ok or not)
        real_arrive = consumer.forwarding.arrive

        def arrive(key: str, ok: bool, value: Any) -> None:
            real_arrive(key, ok, value)
            if key == edge.key:
                came.append(ok)

        consumer.forwarding.arrive = arrive  # type: ignore[method-assign]
        asked(c, p1)  # (so its value goes to p2's replica, not to the client)
        with pytest.raises(CallTimeoutError):
            polybus.wait(p2)
        assert held_soon(consumer, within=5.0) == 0
        # The producer's value, when it comes, is not kept there for a call that is gone.
        opened(c)
        assert np.allclose(np.asarray(p1), X * 2)
        deadline = time.monotonic() + 10
        while True not in came:  # (sent before p1's answer; read by now, or soon)
            assert time.monotonic() < deadline, f"p1's value never came there: {came}"
            time.sleep(0.001)
        assert not consumer.forwarding._arrived
        assert not c.sessions[-1].forwarder.deps  # type: ignore[attr-defined]


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_producer_replica_dying_mid_call_frees_the_consumer(
        tmp_path: Path, idempotent: bool) -> None:
    # (This worked before: the client re-runs the producer, or sends its failure on.)
    with cluster(tmp_path, toml(idempotent=idempotent), replicas=2) as c:
        p1, consume = apart(c, "double")
        p2 = consume(p1)
        producer, consumer = replica(c, p1), replica(c, p2)
        assert producer is not consumer
        kill(c, producer)
        if idempotent:  # run again on the consumer's replica, delivered there
            assert np.allclose(outcome(p2), X * 4)
        else:
            with pytest.raises(RemoteException) as err:
                outcome(p2)
            upstream_named(err.value, producer.name, consumer.name)
            assert err.value.remote_type == "WorkerDiedError"
        assert held_soon(consumer) == 0


def test_the_client_heeds_undelivered_only_for_its_own_edges(tmp_path: Path) -> None:
    """An ``Undelivered`` names a key of this session and the consumer's replica it was
    for; any other (a stranger's key, a replica the consumer is no longer on, sent by a
    replica that does not hold the producer) changes nothing."""
    from polybus.wire.messages import Undelivered

    with cluster(tmp_path, toml(), replicas=2) as c:
        p1, consume = apart(c, "double")
        p2 = consume(p1)
        f = c.sessions[-1].forwarder  # type: ignore[attr-defined]
        assert isinstance(f, Forwarder)
        (edge,) = f.deps[p2._rec.id]
        to = edge.to.channel.peer  # type: ignore[union-attr]
        plink, clink = p1._rec.link, p2._rec.link
        stranger = "0" * len(f.nonce) + edge.key[len(f.nonce):]
        for link, msg in [(plink, Undelivered(stranger, to, "OSError", "x")),
                          (plink, Undelivered(edge.key, "tcp://127.0.0.1:1", "OSError", "x")),
                          (clink, Undelivered(edge.key, to, "OSError", "x")),
                          (plink, Undelivered("no.such.key.here", to, "OSError", "x")),
                          (plink, Undelivered("", to, "OSError", "x"))]:
            f.undelivered(link, msg)
        assert not edge.failed
        opened(c)
        assert np.allclose(outcome(p2), X * 4)


def test_a_producer_rerun_is_not_kept_from_a_replica_by_its_own_held_consumer(
        tmp_path: Path) -> None:
    # Producer and consumer of one interface: the producer, lost with its replica, runs
    # again alone (dispatch.py's isolation) on a replica with no other call of its
    # interface, and the only one left held the consumer, waiting for that very value:
    # both waited for ever. Calls held for its value do not count against it now.
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p1 = s.call("slow_double", (X, gate(c)), {})
        p2 = s.call("slow_double", (p1, 0), {})
        producer, consumer = replica(c, p1), replica(c, p2)
        assert producer is not consumer
        kill(c, producer)
        assert np.allclose(outcome(p2), X * 4)
        assert held_soon(consumer) == 0


def test_a_consumer_lost_with_its_replica_lets_go_of_its_edges(tmp_path: Path) -> None:
    # A consumer failed with its replica (not idempotent: not re-run) kept its edges at
    # the client for the session's life; the producer's value, sent nowhere, stays good.
    with cluster(tmp_path, toml(idempotent=False), replicas=2) as c:
        s = c.session()
        p1 = s.call("slow_double", (X, gate(c)), {})
        p2 = s.call("slow_double", (p1, 0), {})
        producer, consumer = replica(c, p1), replica(c, p2)
        assert producer is not consumer
        deadline = time.monotonic() + 10
        while consumer.forwarding.held_calls() != 1:  # (held there for p1's value)
            assert time.monotonic() < deadline, "the consumer was never held"
            s.reactor.flush_all()
            time.sleep(0.001)
        consumer.stop(grace=0.05)
        opened(c)
        with pytest.raises(WorkerDiedError):
            outcome(p2)
        assert np.allclose(outcome(p1), X * 2)
        f = s.forwarder  # type: ignore[attr-defined]
        assert not f.deps and not f.edges
        assert not any(lk.watch for lk in s.reactor.links)


@pytest.mark.parametrize("apart_", [True, False], ids=["two-replicas", "one-replica"])
def test_a_consumer_that_could_not_be_sent_leaves_no_value_waiting_for_it(
        tmp_path: Path, apart_: bool) -> None:
    # A consumer call whose message could not be encoded (an argument the codec cannot
    # carry, one over the frame limit) raises at the call, never written; but its
    # producer had been asked to forward (Forwards go before the call), so the value came
    # to the consumer's replica and waited there, unclaimed, for as long as the replica
    # lived (up to the bound of 512 MiB). That replica is now told its key is done with.
    with cluster(tmp_path, toml(), replicas=2) as c:
        if apart_:
            p1, _ = apart(c, "nap")  # (the consumer goes to the other replica)
            s = c.sessions[-1]
        else:
            s = c.session()
            polybus.wait(s.call("nap", (X, 0), {}))
            p1 = s.call("slow_double", (X, gate(c)), {})  # (server-0, as the next nap: below)
            polybus.wait(s.call("nap", (X, 0), {}))
        with pytest.raises(TypeError, match="cannot be sent"):
            s.call("nap", (p1, object()), {})
        opened(c)  # (p1 unanswered until now: it was asked to forward)
        assert np.allclose(outcome(p1), X * 2)
        nonce = s.forwarder.nonce  # type: ignore[attr-defined]

        def let_go() -> bool:  # (its key taken: the value, come or to come, is not kept)
            return (not any(rt.forwarding._arrived for rt in c.runtimes)
                    and any(k.startswith(nonce) for rt in c.runtimes
                            for k in rt.forwarding._taken))

        deadline = time.monotonic() + 5.0
        while not let_go() and time.monotonic() < deadline:
            time.sleep(0.01)
        waiting = {rt.name: list(rt.forwarding._arrived) for rt in c.runtimes}
        assert let_go(), f"a forwarded value waits for a call never sent: {waiting}"
        f = s.forwarder  # type: ignore[attr-defined]
        assert not f.deps and not f.edges
