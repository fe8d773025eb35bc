"""A value forwarded to a consumer that migration may move stays pinned (``Forward`` with
``hold``) until the client says the consumer has ended (``Keep(..., release=True)``).

Such a consumer, moved by a ``Steal`` after its value came, needs it again on its new
replica: the producer's replica sends it again from its store. Unpinned (as a plain
``Forward`` leaves it), the store's LRU could have evicted it by then, failing the moved
consumer with "evicted" (tests/integration/test_forward_migration.py shows that).
"""

from __future__ import annotations

import numpy as np

from polybus.testing.reading import MessageReader
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec, Ref
from polybus.wire.framing import FrameDecoder
from polybus.wire.messages import (
    BatchResult,
    Call,
    CallBatch,
    Cancel,
    Deliver,
    Forward,
    Keep,
    Result,
)
from polybus.worker.fwdstore import ForwardStore
from polybus.worker.runtime import WorkerRuntime

_next = MessageReader(within=5.0).next


def _answered(ch: Channel, cid: int) -> Result:
    got = _next(ch)
    assert isinstance(got, Result) and got.id == cid, got
    return got


def test_hold_is_a_trailing_field_an_old_sender_leaves_out() -> None:
    assert Forward(1, "p", "k", "tcp://h:1").hold is False
    d = FrameDecoder()
    d.feed(b"".join(bytes(memoryview(p).cast("B"))
                    for p in Codec().encode(Forward(1, "p", "k", "tcp://h:1", hold=True))))
    frame = d.next_frame()
    assert frame is not None
    msg = Codec().decode(frame)
    assert isinstance(msg, Forward) and msg.hold is True


def test_a_held_value_is_sent_pinned_and_sent_again_till_released(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    me = str(echo_worker.address)  # (the next stage is this replica: no socket)
    x = np.arange(10.0)
    echo_peer.send(Forward(1, "c.1", "c.2.0", me, hold=True))  # before the answer
    echo_peer.send(Call(1, "echo", [x]))
    answer = _answered(echo_peer, 1)
    assert type(answer.value) is Ref and answer.value.key == ["c.2.0"]
    echo_peer.send(Call(2, "echo", [Ref("fwd", "c.2.0")]))
    assert np.array_equal(_answered(echo_peer, 2).value[0][0], x)
    assert fwd.kept.pinned == 1  # a plain Forward leaves it in the LRU
    fwd._taken.pop("c.2.0")  # (as a Steal giving call 2 back would: Forwarding.released)
    echo_peer.send(Forward(1, "c.1", "c.2.0", me, hold=True))  # moved: sent again, from the store
    echo_peer.send(Call(3, "echo", [Ref("fwd", "c.2.0")]))
    assert np.array_equal(_answered(echo_peer, 3).value[0][0], x)
    assert fwd.kept.pinned == 1
    echo_peer.send(Keep(1, "c.1", "c.2.0", release=True))  # the consumer ended
    echo_peer.send(Keep(9, "c.9", "c.9.0", release=True))  # (a sync point: nothing kept)
    echo_peer.send(Call(4, "echo", [1]))
    _answered(echo_peer, 4)
    assert fwd.kept.pinned == 0 and "c.1" in fwd.kept and not fwd.targets


def test_a_held_forward_after_the_answer_pins_the_stored_value(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    me = str(echo_worker.address)
    echo_peer.send(Forward(1, "c.1", "c.2.0", me))  # a consumer that does not move
    echo_peer.send(Call(1, "echo", [np.arange(4.0)]))
    _answered(echo_peer, 1)
    assert fwd.kept.pinned == 0
    echo_peer.send(Forward(1, "c.1", "c.3.0", me, hold=True))  # one that may: placed later
    echo_peer.send(Call(3, "echo", [Ref("fwd", "c.3.0")]))
    assert np.array_equal(_answered(echo_peer, 3).value[0][0], np.arange(4.0))
    assert fwd.kept.pinned == 1
    echo_peer.send(Keep(1, "c.1", "c.3.0", release=True))
    echo_peer.send(Call(4, "echo", [1]))
    _answered(echo_peer, 4)
    assert fwd.kept.pinned == 0


def test_a_held_call_of_a_batch_is_pinned_and_sent_again_till_released(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    # Forward with an index and hold: call 1 of batch 1 feeds a consumer that may move.
    fwd = echo_worker.forwarding
    me = str(echo_worker.address)
    forward = Forward(1, "c.9", "c.2.0", me, 1, hold=True)
    assert (forward.index, forward.hold) == (1, True)
    echo_peer.send(forward)  # (before its batch: the usual order)
    echo_peer.send(CallBatch(1, "echo", [[0], [7]]))
    got = _next(echo_peer)
    assert isinstance(got, BatchResult) and got.values[0] == [0], got
    assert type(got.values[1]) is Ref and got.values[1].key == ["c.2.0"], got
    assert fwd.kept.pinned == 1 and not fwd.slots
    echo_peer.send(Call(2, "echo", [Ref("fwd", "c.2.0")]))
    assert _answered(echo_peer, 2).value == [[7]]
    fwd._taken.pop("c.2.0")  # (as a Steal giving call 2 back would: Forwarding.released)
    echo_peer.send(Forward(1, "c.9", "c.2.0", me, 1, hold=True))  # moved: from the store
    echo_peer.send(Call(3, "echo", [Ref("fwd", "c.2.0")]))
    assert _answered(echo_peer, 3).value == [[7]]
    assert fwd.kept.pinned == 1
    echo_peer.send(Keep(1, "c.9", "c.2.0", release=True, index=1))  # the consumer ended
    echo_peer.send(Call(4, "echo", [1]))
    _answered(echo_peer, 4)
    assert fwd.kept.pinned == 0 and "c.9" in fwd.kept and not fwd.slots


def test_a_held_forward_after_the_answer_with_no_room_to_pin_still_sends_the_value(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    # The value is in the store's LRU (a consumer that does not move took it) and there
    # is no room to pin it for one that may: it is sent all the same, from the LRU, and
    # left there, not pinned (a consumer moved later gets it again only while the LRU
    # keeps it: docs/protocol.md, "Forwarding").
    fwd = echo_worker.forwarding
    fwd.kept = ForwardStore(capacity=1000)
    me = str(echo_worker.address)
    x = np.arange(1000.0)  # 8 kB: no room to pin
    echo_peer.send(Forward(1, "c.1", "c.2.0", me))
    echo_peer.send(Call(1, "echo", [x]))
    answer = _answered(echo_peer, 1)
    assert type(answer.value) is Ref and answer.value.key == ["c.2.0"]
    echo_peer.send(Forward(1, "c.1", "c.3.0", me, hold=True))  # placed after the answer
    echo_peer.send(Call(3, "echo", [Ref("fwd", "c.3.0")]))
    assert np.array_equal(_answered(echo_peer, 3).value[0][0], x)
    assert fwd.kept.pinned == 0 and "c.1" in fwd.kept and not fwd.targets


def test_a_held_forward_after_an_answer_by_value_waits_for_the_clients_cancel(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    # No room to pin it for the consumer that may move: the answer went by value (and
    # to that consumer). A Forward with hold for it, moved meanwhile (the client sent
    # it before it read the answer), finds nothing kept: it waits, and the client, which
    # has the value, sends it on itself and Cancels the request. The consumer gets its
    # value from the client; nothing waits or is pinned after.
    fwd = echo_worker.forwarding
    fwd.kept = ForwardStore(capacity=1000)
    me = str(echo_worker.address)
    x = np.arange(1000.0)
    echo_peer.send(Forward(1, "c.1", "c.2.0", me, hold=True))
    echo_peer.send(Call(1, "echo", [x]))
    value = _answered(echo_peer, 1).value
    assert np.array_equal(value[0], x)  # by value
    assert fwd.kept.pinned == 0 and "c.1" not in fwd.kept
    echo_peer.send(Forward(1, "c.1", "c.3.0", me, hold=True))  # (read after the answer)
    echo_peer.send(Call(3, "echo", [Ref("fwd", "c.3.0")]))  # held for it
    echo_peer.send(Call(4, "echo", [4]))
    assert _answered(echo_peer, 4).value == [4]
    assert fwd.held_calls() == 1 and len(fwd.targets) == 1
    echo_peer.send(Cancel([1]))  # what the client does on an answer by value it asked of
    echo_peer.send(Deliver("c.3.0", True, value))  # and the value, sent on from the client
    assert np.array_equal(_answered(echo_peer, 3).value[0][0], x)
    assert not fwd.targets and not fwd.held_calls() and fwd.kept.pinned == 0
