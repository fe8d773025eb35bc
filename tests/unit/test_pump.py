"""The gate and the pump (client/pump.py): without sockets, a fake reactor counting
the pump's turns; then a real reactor with a replica that stops reading."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.pump import Gate, Pump, gated
from polybus.client.reactor import Reactor
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Result

GIVE_UP_S = 20.0  # the full replica reads again after this long, if never answered


class FakeReactor:
    def __init__(self) -> None:
        self._rings: list[object] = []
        self._lock = threading.Lock()
        self.links: list[object] = []
        self.gate: Gate | None = None
        self.taken = 0
        self.left = 3  # turns until nothing is pending

    def take_in(self) -> None:
        self.taken += 1
        self.left -= 1

    def read(self, x: int) -> int:
        assert self.gate is not None and self.gate.inside  # (inside while it runs)
        return x + 1


@pytest.fixture
def parts() -> Iterator[tuple[FakeReactor, Gate, Pump]]:
    r = FakeReactor()
    g = r.gate = Gate()
    r.read = gated(g, r.read)  # type: ignore[method-assign]  # (as Reactor.open_gate binds)
    p = Pump(r, g, lambda: r.left > 0)  # type: ignore[arg-type]
    yield r, g, p
    p.stop()


def _until(cond: object, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.002)
    return False


def test_a_gated_method_counts_the_thread_inside_and_leaves_after(
        parts: tuple[FakeReactor, Gate, Pump]) -> None:
    r, g, _ = parts
    assert r.read(1) == 2
    assert g.inside == [] and g.came


def test_work_left_by_a_program_that_goes_away_is_taken_in_until_none_is_left(
        parts: tuple[FakeReactor, Gate, Pump]) -> None:
    r, g, p = parts
    g.enter()
    g.dirty = True
    assert p.idle and r.taken == 0
    g.leave()  # the last thread out, work left: the pump wakes
    assert _until(lambda: r.taken == 3)
    assert _until(lambda: p.idle)  # nothing pending: asleep again
    time.sleep(0.05)
    assert r.taken == 3


def test_no_turn_while_a_program_thread_is_inside(parts: tuple[FakeReactor, Gate, Pump]) -> None:
    r, g, p = parts
    g.enter()
    with g.lock:
        p.wake()
    time.sleep(0.1)
    assert r.taken == 0  # the program is inside: it moves its own work
    g.leave()
    assert _until(lambda: r.taken >= 1)


def test_a_thread_entering_during_a_turn_waits_for_its_end() -> None:
    g = Gate()
    order: list[str] = []
    with g.lock:  # a turn: busy under the lock
        g.busy = True
        t = threading.Thread(target=lambda: (g.enter(), order.append("entered")))
        t.start()
        time.sleep(0.05)
        assert order == [] and g.inside == []  # stood back, out of the count
        order.append("turn over")
        g.busy = False
    t.join(5)
    assert order == ["turn over", "entered"] and g.inside == [None]


def test_work_left_from_outside_the_program_wakes_the_pump(
        parts: tuple[FakeReactor, Gate, Pump]) -> None:
    r, g, _ = parts
    g.poke()  # (the linger timer queued a batch)
    assert _until(lambda: r.taken >= 1)


def test_a_thread_entering_as_the_last_one_leaves_work_does_not_lose_the_wake_up(
        parts: tuple[FakeReactor, Gate, Pump]) -> None:
    """T1 leaves work and finds no one inside; T2 enters before T1 takes the lock. T1
    must leave `dirty` for T2, which wakes the pump on its way out."""
    r, g, p = parts
    r.left = 1
    g.enter()
    g.dirty = True       # T1 left work
    g.inside.pop()       # T1 out (Gate.leave written out) ...
    g.came = True
    g.enter()            # T2 in
    g.left_work()        # ... T1 goes on: T2 is inside, so no wake yet
    assert g.dirty and p.idle
    g.leave()            # T2 out: the pump wakes
    assert _until(lambda: r.taken == 1)


# -- a real reactor: a turn never waits for a replica that does not read ---------------

class _Dispatcher:
    interface = "x"
    comm = None
    timeout = None

    def completed(self, rec: CallRecord, link: ReplicaLink) -> None:
        pass


def test_a_thread_entering_is_not_held_behind_a_replica_that_does_not_read() -> None:
    """Under ``overflow = "block"`` a replica whose queue is full stops reading. The
    pump's turn wrote the calls held for it and waited for room, under the gate's lock:
    a program thread entering polybus meanwhile, here to wait for another replica's
    answer (already there), waited with it until that replica read again (here: never,
    until the answer is taken, so the full replica gives up after ``GIVE_UP_S``)."""
    reactor = Reactor()
    pairs = [socket.socketpair() for _ in range(2)]
    full, other = (ReplicaLink(name, "m", Channel(p[0], Codec(), name))
                   for name, p in zip(("full", "other"), pairs, strict=True))
    reactor.add(full)
    reactor.add(other)
    peer_full, peer_other = (Channel(p[1], Codec(), "peer") for p in pairs)
    gate = Gate()
    reactor.open_gate(gate)
    pump = Pump(reactor, gate, lambda: any(lk.held for lk in reactor.links)
                or reactor.unfinished)  # (Session._waiting, its part here)
    payloads = [bytes([i]) * (2 << 20) for i in range(4)]  # far more than a socket holds
    answered = threading.Event()
    seen: list[object] = []

    def replica_that_does_not_read() -> None:
        released = answered.wait(GIVE_UP_S)
        seen.append(released)
        while len(seen) < 1 + len(payloads):
            for m in peer_full.receive():
                seen.extend(m.items if isinstance(m, Batch) else [m])

    replica = threading.Thread(target=replica_that_does_not_read, daemon=True)
    replica.start()
    try:
        gate.enter()  # the program: calls held for the full replica, then it computes
        for i, data in enumerate(payloads):
            reactor.hold(full, Call(i, "x", [data]))
        gate.leave()  # (the last one out, work left: the pump's turn writes them)
        assert select.select([pairs[0][1]], [], [], 10)[0]  # the turn has begun writing
        rec = CallRecord(99, _Dispatcher(), [], None, 0.0)  # type: ignore[arg-type]
        rec.link = other
        other.outstanding[rec.id] = rec
        peer_other.send(Result(99, "other's answer"))
        assert reactor.wait(rec) == "other's answer"  # (entering the gate)
        answered.set()
        replica.join(30)
        assert seen[0] is True, "the program waited until the full replica read again"
        assert [(m.id, m.args) for m in seen[1:]] == [  # type: ignore[attr-defined]
            (i, [data]) for i, data in enumerate(payloads)]  # whole, in order
        assert _until(lambda: pump.idle and not reactor.unfinished)
    finally:
        answered.set()
        pump.stop()
        reactor.close()
        peer_full.close()
        peer_other.close()
