"""The shm transport's small path: the shared byte ring (transport/ring.py) and the
channel that sends every frame through it, with doorbells only for a sleeping reader."""

from __future__ import annotations

import array
import fcntl
import gc
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from polybus.errors import ConnectionLostError, ProtocolError
from polybus.testing.conformance import memfd_mappings
from polybus.transport import ring as ring_mod
from polybus.transport.memfd import sealed_memfd
from polybus.transport.ring import Ring
from polybus.transport.shm import ShmChannel
from polybus.wire.arrays import INLINE_MAX
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Message, Result

pytestmark = pytest.mark.skipif(not ring_mod.supported(), reason="the ring needs x86-64")


def test_ring_wraps_and_fills() -> None:
    w = Ring.create(4096)
    fd = w.fd
    r = Ring.attach(fd)
    try:
        rng = np.random.default_rng(3)
        sent, got = bytearray(), bytearray()
        buf = memoryview(bytearray(5000))
        for _ in range(300):  # many passes round the ring, pieces of every length
            chunk = rng.integers(0, 256, int(rng.integers(1, 3000)), dtype=np.uint8).tobytes()
            n = w.write(memoryview(chunk))
            sent += chunk[:n]
            k = r.read_into(buf[:int(rng.integers(1, 5000))])
            got += buf[:k]
        while k := r.read_into(buf):
            got += buf[:k]
        assert got == sent and len(sent) > 20 * 4096
        # full: a write takes what fits and no more; reading frees room again
        assert w.write(memoryview(b"\1" * 5000)) == 4096 and w.free() == 0
        assert w.write(memoryview(b"\2")) == 0
        assert r.read_into(buf[:100]) == 100 and w.free() == 100
    finally:
        r.close()
        w.close()
    gc.collect()
    assert memfd_mappings() == 0


@pytest.fixture
def pair() -> Iterator[tuple[ShmChannel, ShmChannel]]:
    """Two channels on a socket pair with small rings (frames larger than the ring) and a
    low shared-memory threshold (so large buffers go by segment, interleaved)."""
    a, b = socket.socketpair(socket.AF_UNIX)
    x = ShmChannel(a, Codec(), "x", threshold=8192, ring_capacity=4096)
    y = ShmChannel(b, Codec(), "y", threshold=8192, ring_capacity=4096)
    try:
        yield x, y
    finally:
        x.close()
        y.close()
        gc.collect()
        assert memfd_mappings() == 0


def _echo(ch: ShmChannel) -> threading.Thread:
    def serve() -> None:
        try:
            while True:
                for msg in ch.receive():
                    if isinstance(msg, Call):
                        ch.send(Result(msg.id, msg.args), on_blocked=lambda: None)
        except ConnectionLostError:
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def _value(i: int) -> Any:
    if i % 7 == 0:
        return np.full(INLINE_MAX + 1 + i, i % 251, dtype=np.uint8)  # by segment (a buffer)
    if i % 11 == 0:
        return b"%d" % i * 3000  # a frame larger than the ring: streamed in pieces
    return i


def test_many_frames_in_order_with_large_buffers(pair: tuple[ShmChannel, ShmChannel]) -> None:
    x, y = pair
    server = _echo(y)
    got: dict[int, Any] = {}

    def drain() -> None:
        for msg in x.receive(wait=False):
            assert isinstance(msg, Result)
            got[msg.id] = msg.value[0]

    for i in range(300):  # one at a time
        x.send(Call(i, "e", [_value(i)]))
        while i not in got:
            for msg in x.receive():
                assert isinstance(msg, Result) and msg.id == i, "answers out of order"
                got[msg.id] = msg.value[0]
    batch: list[Message] = [Call(i, "e", [_value(i)]) for i in range(300, 3300)]
    x.send_many(batch, on_blocked=drain)  # far more than the ring holds
    while len(got) < 3300:
        drain() if got else None
        for msg in x.receive():
            assert isinstance(msg, Result)
            got[msg.id] = msg.value[0]
    for i in range(3300):
        want = _value(i)
        if isinstance(want, np.ndarray):
            assert np.array_equal(got[i], want), i
        else:
            assert got[i] == want, i
    assert x.shm_bytes_sent > 0 and x.bytes_sent > 20 * 4096
    got.clear()
    x.close()
    server.join(10)
    assert not server.is_alive()


def test_sleeping_reader_is_woken_and_sees_the_peer_go(
        pair: tuple[ShmChannel, ShmChannel]) -> None:
    x, y = pair
    x.send(Call(0, "e", []))  # y learns x's ring
    assert [m.id for m in y.receive() if isinstance(m, Call)] == [0]
    seen: list[Message] = []
    ended: list[BaseException] = []

    def reader() -> None:
        try:
            while True:
                seen.extend(y.receive())  # spins briefly, then sleeps on the socket
        except ConnectionLostError as exc:
            ended.append(exc)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    for i in range(1, 6):
        time.sleep(0.05)  # long past the spin: the reader is asleep, a doorbell wakes it
        assert x._tx is not None and not x._tx.reader_awake()
        x.send(Call(i, "e", []))
        deadline = time.monotonic() + 5
        while len(seen) < i and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(seen) == i, "a sleeping reader was not woken"
    x.close()
    t.join(10)
    assert not t.is_alive() and ended


def test_full_ring_never_deadlocks(pair: tuple[ShmChannel, ShmChannel]) -> None:
    """Both sides write more than their rings hold before reading: reading while blocked
    gets both through; a writer blocked on a reader that dies gets ConnectionLostError."""
    x, y = pair
    msgs: list[Message] = [Call(i, "e", [b"z" * 500]) for i in range(200)]
    got_x: list[Message] = []
    got_y: list[Message] = []

    def other_side() -> None:
        y.send_many(msgs, on_blocked=lambda: got_y.extend(y.receive(wait=False)))
        while len(got_y) < 200:
            got_y.extend(y.receive())

    ty = threading.Thread(target=other_side, daemon=True)
    ty.start()
    x.send_many(msgs, on_blocked=lambda: got_x.extend(x.receive(wait=False)))
    while len(got_x) < 200:
        got_x.extend(x.receive())
    ty.join(10)
    assert not ty.is_alive()
    assert [m.id for m in got_x] == [m.id for m in got_y] == list(range(200))  # type: ignore[attr-defined]
    errors: list[BaseException] = []

    def stuck() -> None:
        try:
            x.send_many(msgs)  # y never reads
        except ConnectionLostError as exc:
            errors.append(exc)

    t = threading.Thread(target=stuck, daemon=True)
    t.start()
    time.sleep(0.1)
    assert t.is_alive()
    y.close()
    t.join(10)
    assert not t.is_alive() and errors


def test_a_backlog_larger_than_the_receive_scratch_is_taken_whole_in_order() -> None:
    """Small frames piled up past the decoder's scratch: after one fill they all come
    out, in order (each decoded where it lies in the ring; none is left for a fill
    that would wait for more)."""
    a, b = socket.socketpair(socket.AF_UNIX)
    x = ShmChannel(a, Codec(), "x")
    y = ShmChannel(b, Codec(), "y")
    try:
        n = 10_000  # ~600 KB of frames: more than the 256 KiB scratch, less than the ring
        for i in range(n):
            x.send(Call(i, "e", [b"v" * 20]))
        assert y.fill(wait=True) > 0
        assert [m.id for m in y.pending() if isinstance(m, Call)] == list(range(n))
        assert y.fill(wait=False) == 0 and y.bytes_received == x.bytes_sent
    finally:
        x.close()
        y.close()
        gc.collect()
    assert memfd_mappings() == 0


def test_large_frames_queued_in_the_ring_all_arrive() -> None:
    # Arrays of 200 KB go in the frame (below the segment threshold): three queued
    # before the reader looks are drained at once. Only the last used to arrive.
    a, b = socket.socketpair(socket.AF_UNIX)
    x, y = ShmChannel(a, Codec(), "x"), ShmChannel(b, Codec(), "y")
    try:
        for i in range(3):
            x.send(Call(i, "f", [np.full(25_000, float(i))]))
        got: list[Message] = []
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            got += y.receive(wait=False)
        assert [m.id for m in got] == [0, 1, 2]  # type: ignore[attr-defined]
        for i, m in enumerate(got):
            assert np.array_equal(m.args[0], np.full(25_000, float(i)))  # type: ignore[attr-defined]
        del got, m
    finally:
        x.close()
        y.close()
    gc.collect()
    assert memfd_mappings() == 0


def test_frames_left_in_the_ring_count_as_buffered() -> None:
    """A fill decodes the first small frame where it lies and leaves the rest in the
    ring: the channel says it still holds something (a worker must not sleep on it,
    since frames written while its flag was up rang no doorbell), until all are taken."""
    a, b = socket.socketpair(socket.AF_UNIX)
    x = ShmChannel(a, Codec(), "x")
    y = ShmChannel(b, Codec(), "y")
    try:
        assert not y.buffered()
        x.send(Call(1, "e", [b"one"]))
        x.send(Call(2, "e", [b"two"]))
        assert y.fill(wait=True) > 0
        first = y.next_message()
        assert isinstance(first, Call) and first.args == [b"one"]
        assert y.buffered()
        second = y.next_message()
        assert isinstance(second, Call) and second.args == [b"two"]
        assert not y.buffered() and y.next_message() is None
        assert y.bytes_received == x.bytes_sent
    finally:
        x.close()
        y.close()


def test_small_array_frames_are_decoded_in_the_ring_and_their_arrays_keep_their_values() -> None:
    """A frame with buffers under 128 KiB is decoded where it lies in the ring (nothing
    copied into the frame decoder); its arrays have memory of their own, so frames
    written later over the same room (the ring wraps many times) change nothing."""
    a, b = socket.socketpair(socket.AF_UNIX)
    x, y = ShmChannel(a, Codec(), "x", ring_capacity=64 * 1024), ShmChannel(b, Codec(), "y")
    try:
        fed = []  # reads into the frame decoder (only a frame split by the ring's end)
        updated = y.decoder.buffer_updated
        y.decoder.buffer_updated = lambda n: (fed.append(n), updated(n))[1]  # type: ignore[method-assign]
        kept: list[Any] = []
        for i in range(200):  # 200 x ~4 KB: the 64 KiB ring wraps ~12 times
            x.send(Call(i, "f", [np.full(500, float(i)), "tag"]))
            deadline = time.monotonic() + 10
            while (msg := y.take_soon(0.01)) is None and time.monotonic() < deadline:
                pass
            assert isinstance(msg, Call) and msg.id == i
            kept.append(msg.args[0])
        assert 0 < len(fed) <= 20  # the ~12 frames the ring's end split, not the 200
        for i, arr in enumerate(kept):
            assert arr.flags.writeable and (arr == float(i)).all()
        assert y.bytes_received == x.bytes_sent
    finally:
        x.close()
        y.close()
    gc.collect()
    assert memfd_mappings() == 0


def test_a_ring_over_the_limit_is_refused_before_it_is_mapped() -> None:
    """A peer's first descriptor is its ring, which is mapped with its pages faulted
    in: a 16 GiB memfd (sparse, free to make) took 16 GiB of this process's memory, the
    replica's poller stuck in the mapping meanwhile. A ring over ATTACH_MAX is now a
    protocol error, found from the descriptor's size before anything is mapped."""
    a, b = socket.socketpair(socket.AF_UNIX)
    fd = sealed_memfd("too-big-ring", 4096 + (256 << 20))  # over ATTACH_MAX (64 MiB)
    try:
        with pytest.raises(ValueError, match="over the limit"):
            Ring.attach(fd)
        ch = ShmChannel(b, Codec(), "peer")
        try:
            a.sendmsg([b"R"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
            with pytest.raises(ProtocolError, match="cannot map the peer's ring: ring of "
                                                    r"\d+ bytes is over the limit"):
                ch.fill(wait=True)
            assert ch._rx is None
        finally:
            ch.close()
    finally:
        os.close(fd)
        a.close()
    gc.collect()
    assert memfd_mappings() == 0


def test_a_ring_that_could_still_grow_is_refused() -> None:
    """The peer holds its ring's memfd too: one it could grow between attach's size
    check and the mapping was mapped whole, pages faulted in, past the limit (and one it
    could shrink was a SIGBUS here). A ring not sealed against both is refused."""
    a, b = socket.socketpair(socket.AF_UNIX)
    fd = os.memfd_create("growing-ring", os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, 4096 + (1 << 20))
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)  # (it may still grow)
        with pytest.raises(ValueError, match="not sealed"):
            Ring.attach(fd)
        ch = ShmChannel(b, Codec(), "peer")
        try:
            a.sendmsg([b"R"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
            with pytest.raises(ProtocolError, match=r"cannot map the peer's ring: .*not sealed"):
                ch.fill(wait=True)
            assert ch._rx is None
        finally:
            ch.close()
    finally:
        os.close(fd)
        a.close()
    gc.collect()
    assert memfd_mappings() == 0


def test_a_frame_rung_for_after_the_reader_closed_is_sent_and_what_it_said_is_read(
        pair: tuple[ShmChannel, ShmChannel]) -> None:
    """The reader answers and closes its end; the frame written after it is in the ring
    and its doorbell finds the socket closed (EPIPE). That failed the send (a replica
    dropping a connection for its frame, over shm: the client's send raised before it
    read the replica's Goodbye); now the send is done, and the reading side reads what
    the peer said, then finds it gone."""
    x, y = pair
    x.send(Call(0, "e", []))  # y learns x's ring
    assert [m.id for m in y.receive() if isinstance(m, Call)] == [0]
    y.send(Result(0, "said before closing"))
    y.close()
    assert x._tx is not None and not x._tx.reader_awake()  # (so the send rings)
    x.send(Call(1, "e", []))  # the bell finds the socket closed
    heard: list[Message] = []
    with pytest.raises(ConnectionLostError):
        for _ in range(100):
            heard.extend(x.receive())
    assert heard == [Result(0, "said before closing")]
    x.close()
