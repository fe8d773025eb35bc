"""Forwarded values that arrive before their calls wait for them, bounded.

A ``Deliver`` (a producer's value, sent replica to replica) usually comes before the
call that names it, and waits for it. Values for keys no call ever names were kept for
ever: a peer could make a replica hold any amount. Now at most ``arrived_max`` values
and ``arrived_bytes_max`` bytes wait; past that the oldest are dropped and their keys
remembered, and a call naming one is answered at once with a ``forward-dropped`` Fail
(it would have waited for ever for a value that will not come again).
"""

from __future__ import annotations

import time

import numpy as np

from polybus.client.calls import error_from
from polybus.errors import RemoteError
from polybus.transport.channel import Channel
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Deliver, Fail, Message, Result
from polybus.worker.cache import DEFAULT_CAPACITY
from polybus.worker.forwarding import ARRIVED_BOUND, TAKEN_BOUND
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"forward-unclaimed-token-0123456789"


def _next(ch: Channel) -> Message | None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        got = ch.receive()
        if got:
            assert len(got) == 1, got
            return got[0]
    return None


def _dropped_fail(msg: Message | None, cid: int, key: str) -> None:
    assert isinstance(msg, Fail) and msg.id == cid, msg
    assert msg.kind == "forward-dropped" and msg.type == "LookupError"
    assert f"the forwarded value {key} was dropped on w before this call came: too many " \
           "values arrived unclaimed" in msg.message
    err = error_from(msg, "echo", "w")  # what the program gets: a typed RemoteError
    assert type(err) is RemoteError and "was dropped on w" in str(err)


def test_the_default_bounds() -> None:
    rt = WorkerRuntime("d", {}, TOKEN)
    try:
        assert rt.forwarding.arrived_bytes_max == rt.forwarding.kept.capacity == DEFAULT_CAPACITY
        assert rt.forwarding.arrived_max == ARRIVED_BOUND <= TAKEN_BOUND
    finally:
        rt.stop()


def test_unclaimed_values_are_bounded_by_count_and_a_call_for_a_dropped_one_fails_at_once(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    fwd.arrived_max = 4
    for i in range(10):
        echo_peer.send(Deliver(f"k{i}", True, i))
    # (a channel's messages are handled in order: this call comes after every Deliver)
    echo_peer.send(Call(1, "echo", [Ref("fwd", "k9"), Ref("fwd", "k8")]))
    assert _next(echo_peer) == Result(1, [9, 8])
    assert len(fwd._arrived) == 2 and fwd.unclaimed_dropped == 6  # k6, k7 wait; k0-k5 went
    echo_peer.send(Call(2, "echo", [Ref("fwd", "k0")]))
    _dropped_fail(_next(echo_peer), 2, "k0")
    # Named with values that are here and one that has not come: answered at once all
    # the same, and nothing of it is queued when the rest comes.
    echo_peer.send(Call(3, "echo", [Ref("fwd", "k6"), Ref("fwd", "k1"), Ref("fwd", "later")]))
    _dropped_fail(_next(echo_peer), 3, "k1")
    echo_peer.send(Deliver("later", True, "x"))
    echo_peer.send(Call(4, "echo", [Ref("fwd", "k7")]))  # the one left: still served
    assert _next(echo_peer) == Result(4, [7])
    assert not fwd._arrived and fwd._arrived.nbytes == 0 and not fwd._held


def test_unclaimed_values_are_bounded_by_bytes(echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    fwd.arrived_bytes_max = 1 << 20
    block = np.ones(300_000 // 8)  # 300 kB: three fit under the bound
    for i in range(8):
        echo_peer.send(Deliver(f"b{i}", True, block * i))
    # Lists of bytes are counted by what they hold, not by their outer list.
    echo_peer.send(Deliver("nested", True, [[b"z" * 400_000]]))
    echo_peer.send(Call(1, "echo", [Ref("fwd", "b7")]))
    got = _next(echo_peer)
    assert isinstance(got, Result) and float(got.value[0].sum()) == 7 * block.size
    assert fwd._arrived.nbytes <= fwd.arrived_bytes_max
    # b7 taken; b0-b4 dropped for b5-b7, b5 for the nested 400 kB
    assert list(fwd._arrived) == ["b6", "nested"] and fwd.unclaimed_dropped == 6
    echo_peer.send(Call(2, "echo", [Ref("fwd", "b5")]))
    _dropped_fail(_next(echo_peer), 2, "b5")


def test_a_value_delivered_again_after_it_was_dropped_is_kept(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    fwd.arrived_max = 1
    echo_peer.send(Deliver("a", True, 1))
    echo_peer.send(Deliver("b", True, 2))  # a is dropped
    echo_peer.send(Deliver("a", True, 3))  # (a producer re-run): kept, b dropped
    echo_peer.send(Call(1, "echo", [Ref("fwd", "a")]))
    assert _next(echo_peer) == Result(1, [3])
    echo_peer.send(Call(2, "echo", [Ref("fwd", "b")]))
    _dropped_fail(_next(echo_peer), 2, "b")
