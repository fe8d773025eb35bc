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
import pytest

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


def _pair() -> tuple[ShmChannel, ShmChannel]:
    a, b = socket.socketpair(socket.AF_UNIX)
    return ShmChannel(a, Codec(), "client"), ShmChannel(b, Codec(), "replica")


def _busy(ch: ShmChannel) -> int:
    return sum(1 for s in ch._segments.values() if s.busy)


def test_a_message_that_cannot_be_encoded_leaves_the_channel_as_it_was() -> None:
    """Calls sent together (send_many: a held batch, an async-demand refill) whose last
    holds a value the codec refuses: nothing is taken for the first ones either. Before,
    the first call's segment was taken and its descriptor left to ride on the next send
    (a descriptor for a frame never sent), and pending release notes were spent on a
    frame that never left (the peer held those segments until the connection closed)."""
    sender, receiver = _pair()
    try:
        x = np.full(SIZE // 8, 3.0)
        got = _pump(sender, receiver, [Call(1, "f", [x])])
        del got
        gc.collect()  # the receiver lets the array go: a release note for the sender
        assert receiver._released
        with pytest.raises(TypeError):
            receiver.send_many([Call(2, "f", [np.full(SIZE // 8, 4.0)]), Call(3, "f", [object()])])
        assert receiver._released and not receiver._fds_out and _busy(receiver) == 0
        with pytest.raises(TypeError):
            receiver.send(Call(4, "f", [object()]))
        assert receiver._released  # still to be told
        back = _pump(receiver, sender, [Call(5, "f", [np.full(SIZE // 8, 5.0)])])
        assert np.array_equal(back[0].args[0], np.full(SIZE // 8, 5.0))  # type: ignore[attr-defined]
        assert not receiver._released  # told with that frame
        assert _busy(sender) == 0  # and the sender has its segment back
    finally:
        sender.close()
        receiver.close()
