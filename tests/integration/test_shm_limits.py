"""The shm transport's segments stay bounded per connection: a burst of large buffers
in flight (an async client's calls, each array still viewed at the other end) takes at
most ``max_segments`` segments and ``pool_bytes`` of memory; what does not fit travels
in the frame itself, as on ipc, and arrives all the same."""

from __future__ import annotations

import gc
import os
import socket
import threading

import numpy as np

from polybus.testing.conformance import memfd_mappings
from polybus.transport.shm import ShmChannel
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Message

BURST = 120
SIZE = 300_000  # bytes per array: above the shm threshold, so by segment if it can


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _pump(sender: ShmChannel, receiver: ShmChannel, msgs: list[Message]) -> list[Message]:
    """Send ``msgs`` while the receiver takes them all and keeps every one (so no
    segment comes back); the messages received."""
    got: list[Message] = []

    def take() -> None:
        while len(got) < len(msgs):
            got.extend(receiver.receive())

    t = threading.Thread(target=take)
    t.start()
    try:
        for m in msgs:
            sender.send(m)
    finally:
        t.join(30)
    assert not t.is_alive()
    return got


def _burst(sender: ShmChannel, receiver: ShmChannel) -> list[Message]:
    return _pump(sender, receiver,
                 [Call(i, "f", [np.full(SIZE // 8, float(i))]) for i in range(BURST)])


def test_a_burst_in_flight_takes_bounded_segments_and_descriptors() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    sender, receiver = ShmChannel(a, Codec(), "client"), ShmChannel(b, Codec(), "replica")
    fds = _open_fds()
    try:
        got = _burst(sender, receiver)
        # Every call arrived, right, while all of them were still held at the receiver.
        assert [m.id for m in got] == list(range(BURST))  # type: ignore[attr-defined]
        for i, m in enumerate(got):
            assert np.array_equal(m.args[0], np.full(SIZE // 8, float(i)))  # type: ignore[attr-defined]
        # Each segment costs descriptors at both ends (and a mapping): a burst must not
        # take one per message (120 here, 2,000 for an async client's 2,000 calls: past
        # the usual limit of 1,024 descriptors, the client died of EMFILE).
        assert sender.segments_held() <= sender.max_segments < BURST
        assert _open_fds() - fds <= 3 * sender.max_segments + 8
        del got, m
    finally:
        sender.close()
        receiver.close()
    gc.collect()
    assert memfd_mappings() == 0


def test_the_pool_bounds_segments_in_flight_too() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    # 8 MiB: room for eight 1 MiB segments, whatever the count allows
    sender = ShmChannel(a, Codec(), "client", pool_bytes=8 << 20)
    receiver = ShmChannel(b, Codec(), "replica")
    try:
        got = _burst(sender, receiver)
        assert len(got) == BURST and sender.segments_held() <= 8
        assert all(np.array_equal(m.args[0], np.full(SIZE // 8, float(i)))  # type: ignore[attr-defined]
                   for i, m in enumerate(got))
        del got
    finally:
        sender.close()
        receiver.close()
    gc.collect()
    assert memfd_mappings() == 0


def test_many_live_operands_take_bounded_shared_segments() -> None:
    # One shared segment per cached operand (shmshare.py), three descriptors each at the
    # sender: 120 distinct operands alive at once used to take 360 of them. Past the
    # bound an operand's Put carries its value in the frame, and arrives all the same.
    from polybus.transport.shmshare import shelf
    from polybus.wire.messages import Put

    a, b = socket.socketpair(socket.AF_UNIX)
    sender, receiver = ShmChannel(a, Codec(), "client"), ShmChannel(b, Codec(), "replica")
    fds = _open_fds()
    values = [np.full(SIZE // 8, float(i)) for i in range(BURST)]
    try:
        got = _pump(sender, receiver, [Put(f"limits-{i}", v) for i, v in enumerate(values)])
        assert [m.key for m in got] == [f"limits-{i}" for i in range(BURST)]  # type: ignore[attr-defined]
        assert all(np.array_equal(m.value, v) for m, v in zip(got, values, strict=True))  # type: ignore[attr-defined]
        assert shelf().held() <= shelf().max_segments < BURST
        assert _open_fds() - fds <= 3 * shelf().max_segments + 8  # 2 here, 1 there
        del got
    finally:
        sender.close()
        receiver.close()
    gc.collect()
    assert memfd_mappings() == 0
