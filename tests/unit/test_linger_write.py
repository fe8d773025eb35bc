"""The linger timer's write (client/linger.py) never waits for a replica that does not
read. Under ``overflow = "block"`` a replica whose queue is full reads no more; the
timer wrote the batch it closed with a send that waited for room, holding the
connection's send lock, so every other writer on that connection waited behind it:
another aggregating binding's timer, and the pump's turn (which writes without waiting,
but took the lock first) and, behind the turn, every program thread entering polybus,
whatever it came for. Here the peer of the "full"
replica does not read until the program's other business is done (or, if that never
comes, until ``GIVE_UP_S``), over a socket and through a small shm ring.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pytest

from polybus.client.batching import Batcher
from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.linger import timer_flush
from polybus.client.promise import wait
from polybus.client.pump import Gate, Pump
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.transport import ring as ring_mod
from polybus.transport.channel import Channel
from polybus.transport.shm import ShmChannel
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, BatchResult, Call, CallBatch, Message, Result

GIVE_UP_S = 20.0  # the full replica reads again after this long, if the test never lets it
BOUND_S = 30.0    # a step that does not come within this has failed (said, not hung)
LINGER_S = 3600.0  # (see _call)
MiB = 1 << 20


class _Dispatcher:
    interface = "y"
    comm = None
    timeout = None

    def completed(self, rec: CallRecord, link: ReplicaLink) -> None:
        pass


@dataclass
class Rig:
    reactor: Reactor
    gate: Gate
    pump: Pump
    bt: Batcher
    bt2: Batcher
    full: ReplicaLink
    other: ReplicaLink
    peer_full: Channel
    peer_other: Channel
    kind: str
    released: threading.Event = field(default_factory=threading.Event)
    seen: list[object] = field(default_factory=list)  # [released?, messages read...]


def _channels(kind: str) -> tuple[Channel, Channel]:
    a, b = socket.socketpair()
    if kind == "socket":
        return Channel(a, Codec(), "replica"), Channel(b, Codec(), "client")
    # a small ring, buffers in the frame (not by segment): a large batch fills it
    w = ShmChannel(a, Codec(), "replica", threshold=1 << 30, ring_capacity=1 << 16)
    r = ShmChannel(b, Codec(), "client", threshold=1 << 30, ring_capacity=1 << 16)
    w.fill(wait=False)
    r.fill(wait=False)  # each takes the other's ring descriptor
    return w, r


def _until(cond: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + BOUND_S
    while not cond():
        assert time.monotonic() < end, f"{what} did not happen within {BOUND_S} s"
        time.sleep(0.001)


@contextmanager
def _rig(kind: str) -> Iterator[Rig]:
    if kind == "ring" and not ring_mod.supported():
        pytest.skip("the ring needs x86-64")
    reactor = Reactor()
    (c_full, p_full), (c_other, p_other) = _channels(kind), _channels(kind)
    full, other = ReplicaLink("full", "m", c_full), ReplicaLink("other", "m", c_other)
    reactor.add(full)
    reactor.add(other)
    gate = Gate()
    reactor.open_gate(gate)
    bts = []
    for name in ("x", "x2"):  # two aggregating bindings to the full replica
        d = Dispatcher(name, reactor, [full], CallStyle("async"))
        bt = Batcher(d, reactor, count=64, nbytes=None, linger=LINGER_S)
        bt._timer = threading.Thread(target=lambda: None)  # (never started: the test flushes)
        bts.append(bt)
    pump = Pump(reactor, gate, lambda: reactor.unfinished or any(bt.backlog for bt in bts)
                or any(lk.held for lk in reactor.links))  # (Session._waiting, its part here)
    rig = Rig(reactor, gate, pump, bts[0], bts[1], full, other, p_full, p_other, kind)
    try:
        yield rig
    finally:
        rig.released.set()
        for bt in bts:
            bt.close()
        pump.stop()
        reactor.close()
        p_full.close()
        p_other.close()


def _replica_that_does_not_read(rig: Rig, want: int) -> threading.Thread:
    """The full replica: reads nothing until released (or GIVE_UP_S), then ``want``
    messages (a Batch frame's calls counted one by one)."""
    def run() -> None:
        rig.seen.append(rig.released.wait(GIVE_UP_S))
        while len(rig.seen) < 1 + want:
            for m in rig.peer_full.receive():
                rig.seen.extend(m.items if isinstance(m, Batch) else [m])

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _call(rig: Rig, bt: Batcher, arg: object) -> tuple[object, threading.Thread, list[bool]]:
    """One aggregated call left open, then the linger timer's flush, which closes its
    batch and writes it, on a thread of its own. (The linger is long, so neither the
    call itself nor the timer's thread closes it first: the flush the timer makes when
    the linger runs out is made here.)"""
    rig.gate.enter()
    p = bt((arg,), {})
    rig.gate.leave()
    b = bt.open
    assert b is not None and b.args, "the call closed its batch itself"
    flushed: list[bool] = []
    timer = threading.Thread(target=lambda: flushed.append(timer_flush(bt, b)), daemon=True)
    timer.start()
    return p, timer, flushed


def _a_batch_the_timer_writes(rig: Rig) -> tuple[object, np.ndarray]:
    """A batch the linger timer writes to the full replica: 8 MiB over a socket, 1 MiB
    through the 64 KiB ring, far more than the connection takes (the ring's room comes
    with no bell: the rest goes one look of the pump's, 8 ms, at a time, once the
    replica reads). Returned once the timer is writing it (the send lock held), or has
    written what the connection took and left the rest in the channel."""
    arr = np.arange(MiB if rig.kind == "socket" else MiB // 8, dtype=np.float64)
    p, _, flushed = _call(rig, rig.bt, arr)
    ch = rig.full.channel
    _until(lambda: flushed == [True] or (rig.bt.open is None and ch.send_lock.locked()),
           "the linger timer's flush")
    return p, arr


@pytest.mark.parametrize("kind", ["socket", "ring"])
def test_another_writer_on_the_connection_is_not_held_behind_the_timers_write(kind: str) -> None:
    """Another aggregating binding's linger timer, flushing its own batch to the same
    replica, could not even begin: the first timer held the connection's send lock for
    as long as the replica read nothing."""
    with _rig(kind) as rig:
        replica = _replica_that_does_not_read(rig, want=2)
        p, arr = _a_batch_the_timer_writes(rig)
        p2, timer2, flushed2 = _call(rig, rig.bt2, b"after")
        timer2.join(GIVE_UP_S + BOUND_S)
        rig.released.set()  # (too late if the full replica gave up first: seen[0] False)
        replica.join(BOUND_S + GIVE_UP_S)
        released_by_the_test = rig.seen[0] if rig.seen else None
        assert released_by_the_test is True, (
            "the other binding's linger timer waited for the connection's send lock "
            "until the full replica read again")
        assert flushed2 == [True]
        batch, after = rig.seen[1:]
        assert isinstance(batch, CallBatch) and isinstance(after, CallBatch)  # whole, in order
        assert np.array_equal(batch.args[0][0], arr) and after.args == [[b"after"]]
        rig.peer_full.send(BatchResult(after.id, [5]))
        rig.peer_full.send(BatchResult(batch.id, [float(arr.sum())]))
        assert wait(p) == float(arr.sum()) and wait(p2) == 5  # (the waits read)


@pytest.mark.parametrize("kind", ["socket", "ring"])
def test_a_program_thread_is_not_held_behind_the_timers_write_by_a_pump_turn(kind: str) -> None:
    """The program holds a call for the full replica and computes: the pump's turn
    writes it and waited for the send lock under the gate's lock, so the program's wait
    for another replica's answer (already there) waited until the full replica read."""
    with _rig(kind) as rig:
        replica = _replica_that_does_not_read(rig, want=2)
        p, arr = _a_batch_the_timer_writes(rig)
        rig.gate.enter()
        rig.reactor.hold(rig.full, Call(10**6, "x", [b"held"]))
        rig.gate.leave()  # (the last one out, work left: the pump's turn writes it)
        rec = CallRecord(99, _Dispatcher(), [], None, 0.0)  # type: ignore[arg-type]
        rec.link = rig.other
        rig.other.outstanding[rec.id] = rec
        _until(lambda: rig.gate.busy or not rig.full.held, "the pump's turn")
        rig.peer_other.send(Result(99, "other's answer"))
        assert rig.reactor.wait(rec) == "other's answer"  # (entering the gate)
        rig.released.set()
        replica.join(BOUND_S + GIVE_UP_S)
        released_by_the_test = rig.seen[0] if rig.seen else None
        assert released_by_the_test is True, (
            "the program waited behind the pump's turn until the full replica read again")
        msgs: list[Message] = rig.seen[1:]  # type: ignore[assignment]
        assert [type(m) for m in msgs] == [CallBatch, Call]  # whole, in order
        rig.peer_full.send(BatchResult(msgs[0].id, [float(arr.sum())]))  # type: ignore[union-attr]
        assert wait(p) == float(arr.sum())
        _until(lambda: rig.pump.idle and not rig.reactor.unfinished, "the pump's rest")
