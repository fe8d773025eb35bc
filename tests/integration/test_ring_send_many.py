"""An shm channel's `send_many` (transport/ringchannel.py): small messages sent together
(a Drop, the Put of a small operand, the call naming it) go into the ring in one write,
each frame whole and in order, round the ring's end as anywhere; a message that cannot
be sent leaves nothing written; a writer that must not wait keeps the rest unsent."""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from polybus.errors import MessageTooLarge
from polybus.testing.conformance import memfd_mappings
from polybus.transport import ring as ring_mod
from polybus.transport.channel import LATER
from polybus.transport.shm import ShmChannel
from polybus.wire.codec import Codec, Ref
from polybus.wire.messages import Call, Drop, Message, Put

pytestmark = pytest.mark.skipif(not ring_mod.supported(), reason="the ring needs x86-64")

RING = 4096


@pytest.fixture
def pair() -> Iterator[tuple[ShmChannel, ShmChannel]]:
    a, b = socket.socketpair(socket.AF_UNIX)
    x = ShmChannel(a, Codec(max_frame=1 << 16), "x", threshold=8192, ring_capacity=RING)
    y = ShmChannel(b, Codec(max_frame=1 << 16), "y", threshold=8192, ring_capacity=RING)
    try:
        yield x, y
    finally:
        x.close()
        y.close()
        gc.collect()
        assert memfd_mappings() == 0


def _round(i: int, n: int = 40) -> list[Message]:
    key = f"k{i}"
    return [Drop([f"k{i - 1}"]), Put(key, np.arange(n, dtype=np.float64) + i),
            Call(i, "f", [Ref("op", key), i], None, 0.0)]


def _seen(msgs: list[Message]) -> list[Any]:
    out: list[Any] = []
    for m in msgs:
        if type(m) is Drop:
            out.append(("drop", m.keys))
        elif type(m) is Put:
            out.append(("put", m.key, np.asarray(m.value).tobytes()))
        else:
            assert type(m) is Call
            a = m.args
            out.append(("call", m.id, a[0].key if type(a[0]) is Ref else a[0], a[1]))
    return out


def _take(y: ShmChannel, n: int) -> list[Message]:
    got: list[Message] = []
    while len(got) < n:
        got.extend(y.receive())
    return got


def test_rounds_arrive_whole_and_in_order_round_the_ring(
        pair: tuple[ShmChannel, ShmChannel]) -> None:
    x, y = pair
    for i in range(200):  # ~440 bytes a round: the writes go round the 4 KiB ring
        sent = _round(i, n=20 + i % 30)
        x.send_many(sent)
        assert _seen(_take(y, 3)) == _seen(sent), i
    assert x.bytes_sent > 10 * RING


def test_more_than_the_ring_holds_is_written_as_room_frees(
        pair: tuple[ShmChannel, ShmChannel]) -> None:
    x, y = pair
    sent = [m for i in range(12) for m in _round(i, n=100)]  # ~10 KB: over the ring
    got: list[Message] = []
    x.send_many(sent, on_blocked=lambda: got.extend(y.receive(wait=False)))
    got += _take(y, len(sent) - len(got))
    assert _seen(got) == _seen(sent)


def test_a_message_too_large_leaves_nothing_written(
        pair: tuple[ShmChannel, ShmChannel]) -> None:
    x, y = pair
    big = Put("big", list(range(40000)))  # past max_frame, no buffer: the ring's own way
    written = x.bytes_sent
    with pytest.raises(MessageTooLarge):
        x.send_many([Drop(["k0"]), big, Call(1, "f", [1], None, 0.0)])
    assert x.bytes_sent == written and not x.unsent
    after = _round(5)
    x.send_many(after)  # the channel as it was: the next messages come whole
    assert _seen(_take(y, 3)) == _seen(after)


def test_a_writer_that_must_not_wait_keeps_the_rest_unsent(
        pair: tuple[ShmChannel, ShmChannel]) -> None:
    x, y = pair
    first = [m for i in range(12) for m in _round(i, n=100)]
    x.send_many(first, on_blocked=LATER)  # the ring fills: the rest is kept
    assert x.unsent
    later = _round(99)
    x.send_many(later, on_blocked=LATER)  # behind what is unsent, never ahead of it
    got: list[Message] = []
    while x.unsent:
        got.extend(y.receive(wait=False))
        x.send_unsent()
    got += _take(y, len(first) + 3 - len(got))
    assert _seen(got) == _seen(first + later)
