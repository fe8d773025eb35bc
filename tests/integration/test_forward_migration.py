"""Forwarding to and from calls that migration may move (client/fwdmove.py).

A consumer binding with a migration path (or ``balance = "steal"``) did not forward: a
promise passed to it was waited for when the call was made, so the program stopped at
the consuming call until the producer answered, and the value went through the client
twice. Now such a call is placed at once, naming the value, which goes replica to
replica; its producer's replica keeps it pinned until the consumer ends, so a consumer
that migration moves after its value came gets it again where it goes. A failing
producer still fails its consumer with the typed upstream error; a producer's replica
that dies makes the producer run again (idempotent) or fails the consumer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.client import migrate
from polybus.client.migrate import Migrator
from polybus.client.session import Session
from polybus.errors import RemoteException
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, CallBatch, Steal

from . import comm_harness
from .comm_harness import Cluster, cluster
from .test_forward_aggregated import written
from .test_forward_backlog import SLACK, client_bytes, kill, replica, settled

EXTRA = '''

def grow(i, gate=""):
    # a producer of 128 KiB from a small argument; it waits for ``gate`` to exist (20 s
    # at most: should a call wait where it was made for a gated producer, as it did
    # before, the test fails at its assertions and does not hang)
    if gate:
        _gate(gate, 20.0, every=0.002)
    if i < 0:
        raise ValueError(f"nothing grows from {i}")
    return np.arange(16384, dtype=np.float64) + i
'''

N = 16384 * 8  # bytes of grow's value

STEAL = """
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.grow = {{ callstyle = "async" }}
use.slow_double = {{ callstyle = "async", forward = {forward}{moves} }}
use.scale = {{ callstyle = "async", forward = {forward}{moves} }}

[bind]
"client.grow" = "server.grow"
"client.slow_double" = "server.slow_double"
"client.scale" = "server.scale"
"""

# Migration that never moves a call by itself (an overload no queue reaches): the tests
# below move calls by hand, with the Steal a migrator sends.
NEVER = "(oc=(load>=100000))"
BY_HAND = f"""
[modules.server]
source = "server.py"
replication = "server-0{NEVER}#server-1{NEVER}#server-2{NEVER}"
define.grow = {{{{ idempotent = {{idempotent}} }}}}
define.double = {{{{}}}}

[modules.client]
source = "client.py"
entrypoint = "main"
use.grow = {{{{ callstyle = "async", loadratio = "1:0:0" }}}}
use.busy1 = {{{{ callstyle = "async", loadratio = "0:1:0" }}}}
use.busy2 = {{{{ callstyle = "async", loadratio = "0:0:1" }}}}
use.double = {{{{ callstyle = "async", loadratio = "0:1:0" }}}}
use.double2 = {{{{ callstyle = "async", loadratio = "0:0:1" }}}}

[bind]
"client.grow" = "server.grow"
"client.busy1" = "server.grow"
"client.busy2" = "server.grow"
"client.double" = "server.double"
"client.double2" = "server.double"
"""


@pytest.fixture(autouse=True)
def _grow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + EXTRA)
    yield


def steal_config(forward: bool = True, moves: str = ', balance = "steal"') -> str:
    return STEAL.format(forward=str(forward).lower(), moves=moves)


def grown(i: int) -> np.ndarray:
    return np.arange(16384, dtype=np.float64) + i


def wait_until(cond: Any, s: Session, within: float = 10.0, state: Any = None) -> None:
    """Until ``cond()``, the session reading meanwhile; ``state()`` says, if it never
    holds, what there was instead."""
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, f"never happened{': ' + state() if state else ''}"
        s.reactor.poll()
        time.sleep(0.002)


def test_a_consuming_call_returns_while_its_producer_runs(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with cluster(tmp_path, steal_config(), replicas=2) as c:
        s = c.session()
        p = s.call("grow", (1, str(gate)), {})
        try:
            q = s.call("slow_double", (p, 0), {})  # (it waited here for p's value)
            r = s.call("scale", (q, 3), {})
            # The producer cannot have answered: it waits for the gate, still shut.
            assert not p._rec.done and not q._rec.done  # type: ignore[attr-defined]
        finally:
            gate.touch()
        assert np.array_equal(np.asarray(r), grown(1) * 6)
        sent, recv = client_bytes(c)
        assert sent < SLACK and recv < N + SLACK  # only r's value came, none went
        assert c.sessions[-1].forwarder.forwarded == 2  # type: ignore[attr-defined]


def test_a_migrating_pipeline_keeps_its_values_off_the_client(tmp_path: Path) -> None:
    # Three stages, the last two with balance = "steal". Every stage-2 call is placed on
    # one replica (loadratio), so the other, idle, takes some: calls do move. The
    # results are those of the same program with forwarding off, and only they come to
    # the client (each stage's value went to the client and back before). The first
    # stage waits for a gate opened once every call is made: no producer answers before
    # the client asks it to forward (a short stage may: its value is then sent on from
    # the client, which has it anyway). The second stage waits for a second gate,
    # opened once a call of it has moved (its 20 ms calls may all have run before the
    # idle replica took one, on a client slow to look).
    n = 12
    moves = ', balance = "steal", loadratio = "1:0"'

    def pipeline(c: Cluster, gate: str) -> tuple[list[np.ndarray], Session]:
        s = c.session()
        second: object = str(c.tmp / "second") if gate else 0.02  # (slow_double's gate)
        outs = [s.call("scale", (s.call("slow_double", (s.call("grow", (i, gate), {}), second),
                                        {}), 3), {}) for i in range(n)]
        written(s, c)  # (each Forward read before its producer may answer)
        (c.tmp / "gate").touch()
        try:
            if gate:
                wait_until(lambda: moved(s) > 0, s)
        finally:
            (c.tmp / "second").touch()
        return [np.asarray(o) for o in outs], s

    def moved(s: Session) -> int:
        return sum(sum(m.moved_in.values()) for m in s.migrators)

    with cluster(_dir(tmp_path, "off"), steal_config(False, moves), replicas=2) as c:
        plain, _ = pipeline(c, "")  # (a gate would never open: each call waits here)
    with cluster(_dir(tmp_path, "on"), steal_config(True, moves), replicas=2) as c:
        got, s = pipeline(c, str(c.tmp / "gate"))
        sent, recv = client_bytes(c)
        f = s.forwarder  # type: ignore[attr-defined]
        pinned = lambda: sum(rt.forwarding.kept.pinned for rt in c.runtimes)  # noqa: E731
        wait_until(lambda: pinned() == 0, s)  # (each consumer's end lets its value go)
    for i in range(n):
        assert np.array_equal(got[i], plain[i]) and np.array_equal(got[i], grown(i) * 6)
    # (migration still moves calls: pipeline waited for one)
    assert sent < n * SLACK and recv < n * (N + SLACK), (sent, recv)
    assert f.forwarded == 2 * n and f.relayed == 0


def _dir(tmp: Path, name: str) -> Path:
    (tmp / name).mkdir()
    return tmp / name


def test_a_failing_producer_fails_its_migrating_consumer_typed(tmp_path: Path) -> None:
    with cluster(tmp_path, steal_config(), replicas=2) as c:
        s = c.session()
        bad = s.call("grow", (-1, ""), {})
        q = s.call("slow_double", (bad, 0), {})  # (it raised here, the call's own error)
        r = s.call("scale", (q, 3), {})
        with pytest.raises(RemoteException) as err:
            polybus.wait(r)
        text = str(err.value).splitlines()[0]
        assert err.value.remote_type == "ValueError" and "upstream" in text, text
        assert f"in grow on {replica(c, bad).name}, upstream of slow_double" in text, text
        with pytest.raises(RemoteException) as err:
            polybus.wait(bad)
        assert err.value.remote_type == "ValueError"


def by_hand(tmp: Path, idempotent: bool = True) -> Any:
    return cluster(tmp, BY_HAND.format(idempotent=str(idempotent).lower()), replicas=3)


def give_back(s: Session, m: Migrator, src: str, dst: str) -> None:
    """Ask ``src`` for one of the client's waiting calls, for ``dst``, as ``m`` does
    (a Steal); the move itself comes with a later read."""
    req = next(migrate._reqs)
    assert s.gate is not None
    s.gate.enter()
    try:
        m._pending[req] = (m.by_name[src], m.by_name[dst], 1)
        s.reactor.send(m.by_name[src], Steal(1, req))
    finally:
        s.gate.leave()


def steal(s: Session, src: str, dst: str) -> None:
    """Move one waiting call of ``src`` to ``dst``, as migration does (a Steal)."""
    m = next(m for m in s.migrators if m.d.interface == "double")
    give_back(s, m, src, dst)
    wait_until(lambda: m.moved_in[dst] >= 1, s)


def waiting_behind(rt: Any) -> tuple[int, list[tuple[str, str, int]]]:
    """How many calls ``rt`` runs, and what waits in its queue: (kind, interface, calls)
    each, read under its lock."""
    with rt._lock:
        msgs = [j.call for _, _, j in sorted(rt._queue._entries()) if not j.dead]
        return rt._running, [(type(m).__name__, m.iface, len(m.args) if type(m) is CallBatch
                              else 1) for m in msgs]


def queued_behind(c: Cluster, name: str, s: Session, iface: str = "double",
                  batch: int = 0, also: Any = lambda: True) -> None:
    """Until replica ``name`` runs one call (the gated one: it has one thread) and one
    waits behind it in its queue: a call to ``iface``, or a batch of ``batch`` calls (and
    ``also()``). Not a count of the queue alone: the gated call waits there too until the
    thread takes it, with what is to wait behind it not read yet (a count of 1), or read
    (2); and a batch written in two parts is two."""
    rt = next(rt for rt in c.runtimes if rt.name == name)
    want = (1, [(CallBatch.__name__, iface, batch) if batch else (Call.__name__, iface, 1)])
    wait_until(lambda: waiting_behind(rt) == want and also(), s,
               state=lambda: f"running, waiting: {waiting_behind(rt)}")


def queued_on(c: Cluster, name: str, s: Session) -> None:
    """Until the consumer (double) waits on ``name`` behind its gated call, with its
    value (held for it, a call is not in the queue, and does not move)."""
    fwd = next(rt for rt in c.runtimes if rt.name == name).forwarding
    queued_behind(c, name, s, also=lambda: not fwd.held_calls())


def gated_pair(s: Session, tmp: Path, i: int, *gates: Path) -> tuple[list[Any], Any, Any]:
    """Calls that hold server-1 (busy1) and server-2 (busy2) until ``gates`` are touched,
    then a producer grow(i) and its consumer double(p), the producer let go (it answers
    once asked to forward: it answers Ref)."""
    held = [s.call(f"busy{k + 1}", (0, str(g)), {}) for k, g in enumerate(gates)]
    p = s.call("grow", (i, str(tmp / "go")), {})
    q = s.call("double", (p,), {})
    (tmp / "go").touch()
    return held, p, q


def test_a_consumer_moved_after_its_value_came_gets_it_again(tmp_path: Path) -> None:
    # The consumer waits in server-1's queue (behind a gated call) with its value; it is
    # moved to server-2, then (server-2 busy in turn) back to server-1, which had taken
    # that value once. Each time the producer's replica sends the value again.
    gates = [tmp_path / "gate1", tmp_path / "gate2"]
    with by_hand(tmp_path) as c:
        s = c.session()
        (b1, b2), _p, q = gated_pair(s, tmp_path, 5, *gates)
        try:
            queued_on(c, "server-1", s)
            steal(s, "server-1", "server-2")
            queued_on(c, "server-2", s)
            gates[0].touch()
            settled(b1)
            steal(s, "server-2", "server-1")
        finally:
            for g in gates:
                g.touch()
        settled(q)  # (within 10 s: a value delivered again and dropped left it held)
        assert np.array_equal(np.asarray(q), grown(5) * 2)
        assert replica(c, q).name == "server-1"
        sent, recv = client_bytes(c)
        assert sent < SLACK and recv < 3 * N + SLACK  # q, b1, b2: p's value never came
        assert s.forwarder.relayed == 0  # type: ignore[attr-defined]
        polybus.wait(b2)


def test_a_pin_is_let_go_when_the_program_read_the_producer_first(tmp_path: Path) -> None:
    # A reviewer's case: the program reads a producer's promise (the value fetched from
    # its replica replaces its Ref) before the consumer that may move ends; the client
    # took it for answered by value, sent no release, and the value stayed pinned on the
    # producer's replica till the client went.
    gate = tmp_path / "gate1"
    with by_hand(tmp_path) as c:
        store = next(rt for rt in c.runtimes if rt.name == "server-0").forwarding.kept
        s = c.session()
        (b1,), p, q = gated_pair(s, tmp_path, 5, gate)
        try:
            queued_on(c, "server-1", s)  # (q waits there with its value)
            settled(p)
            assert store.pinned == 1  # (for q, which may move)
            assert np.array_equal(np.asarray(p), grown(5))  # (fetched from server-0)
        finally:
            gate.touch()
        settled(q)
        assert np.array_equal(np.asarray(q), grown(5) * 2)
        wait_until(lambda: store.pinned == 0, s)
        polybus.wait(b1)


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_consumer_moved_after_its_producer_replica_died(
        tmp_path: Path, idempotent: bool) -> None:
    gate = tmp_path / "gate"
    with by_hand(tmp_path, idempotent) as c:
        s = c.session()
        (b1,), p, q = gated_pair(s, tmp_path, 7, gate)
        try:
            queued_on(c, "server-1", s)  # (with its value: p answered Ref)
            settled(p)
            assert type(p._rec.value) is Ref  # type: ignore[attr-defined]
            producer = replica(c, p)
            kill(producer)
            wait_until(lambda: p._rec.link.dead, s)  # type: ignore[attr-defined]
            steal(s, "server-1", "server-2")
        finally:
            gate.touch()
        settled(q)
        if idempotent:  # run again, and its value sent on to the consumer's new replica
            assert np.array_equal(np.asarray(q), grown(7) * 2)
            assert replica(c, q).name == "server-2"
            assert p._rec.attempts == 2  # type: ignore[attr-defined]
            sent, recv = client_bytes(c)
            assert sent < SLACK and recv < 2 * N + SLACK  # q and b1 came; p never did
        else:
            with pytest.raises(RemoteException) as err:
                polybus.wait(q)
            assert err.value.remote_type == "WorkerDiedError", err.value
            assert f"grow is gone ({producer.name})" in str(err.value)
        polybus.wait(b1)


def test_a_value_stays_pinned_while_its_consumer_may_move(tmp_path: Path) -> None:
    # The producer's store has room for one value and a half. Once its consumer has it,
    # the producer's replica forwards another value, which would evict the first from
    # the store's LRU; pinned, the first stays, and the consumer moved after that gets it
    # (it failed with "evicted"). When the consumer ends, nothing stays pinned.
    gate = tmp_path / "gate1"
    with by_hand(tmp_path) as c:
        store = c.runtimes[0].forwarding.kept  # (server-0 runs every grow)
        store.capacity = N * 3 // 2
        store._fit()
        s = c.session()
        (b1,), _p, q = gated_pair(s, tmp_path, 5, gate)
        try:
            queued_on(c, "server-1", s)
            p2 = s.call("grow", (6, str(tmp_path / "go2")), {})
            q2 = s.call("double2", (p2,), {})
            (tmp_path / "go2").touch()
            assert np.array_equal(np.asarray(q2), grown(6) * 2)
            steal(s, "server-1", "server-2")
        finally:
            gate.touch()
        settled(q)
        assert np.array_equal(np.asarray(q), grown(5) * 2)
        wait_until(lambda: store.pinned == 0, s)
        polybus.wait(b1)
