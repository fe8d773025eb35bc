"""A replica forwards the value of one call of an aggregated batch.

``Forward(id, pkey, key, to, index)`` (and ``Keep`` likewise) with ``index`` >= 0 names
call ``index`` of ``CallBatch`` ``id``: before the replica answers the batch it sends
that call's value to ``to`` (its failure, if it raised) and keeps it under ``pkey``,
and the ``BatchResult`` has ``Ref("fwd", [keys delivered])`` in that call's slot. Such
a request was a request for a call ``id`` that never came: kept until the client went,
and the batch answered every value to the client.
"""

from __future__ import annotations

import threading

import numpy as np

from conftest import FORWARD_TOKEN  # tests/conftest.py
from polybus.testing.reading import MessageReader
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec, Ref
from polybus.wire.messages import (
    BatchResult,
    Call,
    CallBatch,
    Cancel,
    Fail,
    Fetch,
    Fetched,
    Forward,
    Keep,
    Result,
    Undelivered,
)
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

_next = MessageReader(within=5.0).next  # (the next message a channel received)


def _ref(value: object, keys: list[str]) -> bool:
    return type(value) is Ref and value.kind == "fwd" and value.key == keys


def test_a_forwarded_call_of_a_batch_goes_on_and_answers_a_ref_in_its_slot(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    me = str(echo_worker.address)  # the next stage is this replica: no socket
    x = np.arange(10.0)
    echo_peer.send(Call(2, "echo", [Ref("fwd", "c.2.0")]))  # the consumer, held
    # (The client writes it with the batch, after it; before the batch here, so that the
    # batch cannot be answered before it is read.)
    echo_peer.send(Forward(1, "c.9", "c.2.0", me, 1))
    echo_peer.send(CallBatch(1, "echo", [[0], [x], [2]]))
    got = [_next(echo_peer), _next(echo_peer)]
    batch = next(m for m in got if isinstance(m, BatchResult))
    consumer = next(m for m in got if isinstance(m, Result))
    assert batch.id == 1 and batch.values[0] == [0] and batch.values[2] == [2], batch
    assert _ref(batch.values[1], ["c.2.0"]) and not batch.fails, batch
    assert consumer.id == 2 and np.array_equal(consumer.value[0][0], x), consumer
    echo_peer.send(Fetch("c.9", 5))  # kept there for the program, if it asks
    got1 = _next(echo_peer)
    assert isinstance(got1, Fetched) and got1.ok and np.array_equal(got1.value[0], x)
    assert not fwd.slots and not fwd.targets


def test_a_failing_call_of_a_batch_fails_its_consumer_alone(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    def boom(k: int) -> int:
        if k < 0:
            raise ValueError(f"negative {k}")
        return k

    echo_worker.functions["boom"] = boom
    me = str(echo_worker.address)
    echo_peer.send(Forward(1, "c.8", "c.3.0", me, 0))  # (before its batch: the usual order)
    echo_peer.send(Forward(1, "c.9", "c.4.0", me, 1))
    echo_peer.send(CallBatch(1, "boom", [[-1], [4]]))
    echo_peer.send(Call(3, "echo", [Ref("fwd", "c.3.0")]))
    echo_peer.send(Call(4, "echo", [Ref("fwd", "c.4.0")]))
    got = [_next(echo_peer) for _ in range(3)]
    batch = next(m for m in got if isinstance(m, BatchResult))
    assert batch.values[0] is None and _ref(batch.values[1], ["c.4.0"]), batch
    assert [(f.id, f.type) for f in batch.fails] == [(0, "ValueError")], batch
    failed = next(m for m in got if isinstance(m, Fail))
    assert failed.id == 3 and failed.type == "ValueError", failed
    assert failed.message.startswith("an upstream call failed: negative -1"), failed
    assert next(m for m in got if isinstance(m, Result)) == Result(4, [4])


def test_a_kept_call_of_a_batch_is_pinned_until_its_consumer_is_placed(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    me = str(echo_worker.address)
    echo_peer.send(Keep(1, "c.9", "c.2.0", False, 1))  # its consumer waits at the client
    echo_peer.send(CallBatch(1, "echo", [[0], [7]]))
    got = _next(echo_peer)
    assert isinstance(got, BatchResult) and got.values[0] == [0], got
    assert _ref(got.values[1], []) and not got.fails, got
    assert fwd.kept.pinned == 1 and not fwd.slots
    echo_peer.send(Forward(1, "c.9", "c.2.0", me, 1))  # placed: sent from the store
    echo_peer.send(Call(2, "echo", [Ref("fwd", "c.2.0")]))
    assert _next(echo_peer) == Result(2, [[7]])
    assert fwd.kept.pinned == 0


def test_a_cancel_of_an_answered_batch_forgets_what_came_after_it(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    echo_peer.send(CallBatch(1, "echo", [[0], [1]]))
    assert _next(echo_peer) == BatchResult(1, [[0], [1]])
    echo_peer.send(Forward(1, "c.9", "c.2.0", str(echo_worker.address), 1))  # too late
    echo_peer.send(Call(5, "echo", [5]))
    assert _next(echo_peer) == Result(5, [5])
    assert list(fwd.slots) and not fwd.targets  # kept: for all it knows, still to come
    echo_peer.send(Cancel([1]))  # the client had the value, and sent it on itself
    echo_peer.send(Call(6, "echo", [6]))
    assert _next(echo_peer) == Result(6, [6])
    assert not fwd.slots


def test_a_batch_of_small_values_is_not_looked_through_for_a_client_that_never_asked(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    # finished_batch runs for every batch: for a client that never sent a Forward or Keep,
    # a batch with no large value (an array or bytes of 64 KiB or more) is answered
    # without reading that client's messages first (heed).
    heeded: list[object] = []
    real = echo_worker.heed
    echo_worker.heed = lambda ch: (heeded.append(ch), real(ch))[1]  # type: ignore[method-assign]
    echo_worker.functions["same"] = lambda x: x
    echo_peer.send(CallBatch(1, "same", [[np.zeros(4)], [1], [b"x"]]))
    got = _next(echo_peer)
    assert isinstance(got, BatchResult) and got.values[1] == 1, got
    assert not heeded


class Gate:
    """A function that says it started, then waits until ``going`` is set (5 s at most)."""

    def __init__(self) -> None:
        self.running, self.going = threading.Event(), threading.Event()

    def gated(self, x: object) -> object:
        self.running.set()
        self.going.wait(5)
        return x


def test_the_first_request_of_a_client_made_while_its_batch_runs_is_heard() -> None:
    # The client writes a batch before its first Keep (or Forward) when the consumer is
    # made after the batch was written (full, or its linger out): a large value is
    # answered only once the replica has read what its client sent meanwhile, as a
    # single call's is, so the Keep is heard and the value kept, not sent to the client.
    gate = Gate()
    rt = WorkerRuntime("w1", {"gated": gate.gated}, FORWARD_TOKEN,
                       options=ServeOptions(pool=1)).start()
    heeded: list[object] = []
    real = rt.heed
    rt.heed = lambda ch: (heeded.append(ch), real(ch))[1]  # type: ignore[method-assign]
    try:
        ch = connect(rt.address, FORWARD_TOKEN, Codec())
        try:
            big = np.arange(1 << 14, dtype=np.float64)  # 128 KiB: worth keeping off the client
            ch.send(CallBatch(1, "gated", [[big], [1]]))
            assert gate.running.wait(5)  # (its replica reads nothing of this client now)
            ch.send(Keep(1, "c.9", "c.2.0", False, 0))
            gate.going.set()
            got = _next(ch)
            assert isinstance(got, BatchResult) and got.values[1] == 1, got
            assert _ref(got.values[0], []), got.values[0]  # (kept there)
            assert heeded
            ch.send(Fetch("c.9", 5))
            fetched = _next(ch)
            assert isinstance(fetched, Fetched) and np.array_equal(fetched.value, big)
        finally:
            ch.close()
    finally:
        rt.stop()


def test_an_unencodable_forwarded_value_fails_its_slot_alone(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    # A value no Deliver can carry (an int past 2**64) is said Undelivered to the client;
    # the batch's other calls are answered as usual.
    class Elsewhere:  # the consumer's replica: what is sent there is only encoded
        def send(self, msg: object) -> None:
            Codec().encode(msg)

    echo_worker.forwarding._peer = lambda to: Elsewhere()  # type: ignore[assignment,method-assign,return-value]
    echo_worker.functions["power"] = lambda k: 2**k
    echo_peer.send(Forward(1, "c.9", "c.2.0", "tcp://elsewhere:1", 1))
    echo_peer.send(CallBatch(1, "power", [[0], [70], [1]]))
    got = [_next(echo_peer)]
    while type(got[-1]) is Undelivered:  # (said before the batch's answer)
        got.append(_next(echo_peer))
    batch = got[-1]
    assert isinstance(batch, BatchResult), got  # (not a Fail of the whole batch)
    assert any(type(m) is Undelivered for m in got), got
    assert batch.values[0] == 1 and batch.values[2] == 2, batch
    assert all(f.id == 1 for f in batch.fails), batch
