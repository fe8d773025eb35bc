"""Large bytes values are received straight into their own bytes objects (wire/placing.py)."""

from __future__ import annotations

import random
import socket
import struct
import threading
from typing import Any

import msgspec
import numpy as np
import pytest

from polybus.errors import ProtocolError
from polybus.transport.channel import Channel
from polybus.wire import placing
from polybus.wire.codec import Codec, OutOfBand
from polybus.wire.framing import FrameDecoder, encode_frame
from polybus.wire.messages import Call, Result

needs_ctypes = pytest.mark.skipif(placing.new_bytes is None, reason="no ctypes bytes here")


def wire(header: bytes, buffers: list[bytes]) -> bytes:
    return b"".join(bytes(p) for p in encode_frame(header, list(buffers)))


def naming(*idx: int) -> placing.BytesBuffers:
    return lambda header: list(idx)


def feed_in(dec: FrameDecoder, data: bytes, chunk: int) -> list[Any]:
    frames = []
    for i in range(0, len(data), chunk):
        dec.feed(data[i:i + chunk])
        while (f := dec.next_frame()) is not None:
            frames.append(f)
    return frames


@needs_ctypes
@pytest.mark.parametrize("chunk", [1000, 65536, 70_000, 1 << 21])
def test_named_buffer_arrives_as_its_own_bytes(chunk: int) -> None:
    big = bytes(range(256)) * 1200  # 300 KiB
    data = wire(b"hdr", [big]) + wire(b"next", [])
    got = feed_in(FrameDecoder(bytes_buffers=naming(0)), data, chunk)
    assert [bytes(f.header) for f in got] == [b"hdr", b"next"]
    assert type(got[0].buffers[0]) is bytes and got[0].buffers[0] == big
    assert got[0].size == len(data) - len(wire(b"next", []))


@needs_ctypes
def test_only_named_large_buffers_are_placed_the_others_stay_writable() -> None:
    a, b, c = b"a" * 200_000, b"b" * 300_000, b"c" * 100  # c: named, but small
    data = wire(b"h", [a, b, c])
    (f,) = feed_in(FrameDecoder(bytes_buffers=naming(1, 2)), data, 50_000)
    assert [bytes(x) for x in f.buffers] == [a, b, c]
    assert type(f.buffers[1]) is bytes
    assert type(f.buffers[0]) is memoryview and not f.buffers[0].readonly
    assert type(f.buffers[2]) is memoryview


def test_nothing_named_or_no_namer_is_received_as_before() -> None:
    big = b"z" * 300_000
    for dec in (FrameDecoder(), FrameDecoder(bytes_buffers=naming())):
        (f,) = feed_in(dec, wire(b"h", [big]), 65536)
        assert type(f.buffers[0]) is memoryview and bytes(f.buffers[0]) == big


def test_a_namer_that_names_nonsense_changes_nothing() -> None:
    big = b"z" * 300_000
    (f,) = feed_in(FrameDecoder(bytes_buffers=naming(7, -1)), wire(b"h", [big]), 65536)
    assert bytes(f.buffers[0]) == big


def test_codec_names_bytes_buffers_named_once_and_only_as_bytes() -> None:
    codec = Codec()
    blob, arr = b"x" * 100_000, np.arange(4000.0)  # (an array over INLINE_MAX: a buffer)
    header = bytes(codec.encode(Call(1, "f", [OutOfBand(blob), arr, OutOfBand(blob)]))[0])
    _, _, _, hlen = struct.unpack_from("<IHHI", header)
    start = 12 + 8 * 3
    assert sorted(codec.bytes_buffers(memoryview(header[start:start + hlen]))) == [0, 2]
    assert codec.bytes_buffers(memoryview(b"\xc1 not msgpack")) == []


@pytest.mark.timeout(20)
def test_large_bytes_and_arrays_cross_a_socket_intact() -> None:
    left_s, right_s = socket.socketpair()
    left, right = Channel(left_s, Codec(), "right"), Channel(right_s, Codec(), "left")
    blob = bytes(range(256)) * 4096  # 1 MiB
    arr = np.arange(1 << 16, dtype=np.float64)
    try:
        msgs: list[Any] = []

        def read() -> None:
            while len(msgs) < 3:
                msgs.extend(right.receive(wait=True))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        left.send(Result(1, OutOfBand(blob)), on_blocked=lambda: None)
        left.send(Call(2, "f", [OutOfBand(blob[:200_000]), arr, b"small"]), on_blocked=lambda: None)
        left.send(Call(3, "after", []), on_blocked=lambda: None)
        reader.join(10)
        assert [m.id for m in msgs] == [1, 2, 3]
        assert type(msgs[0].value) is bytes and msgs[0].value == blob
        got_blob, got_arr, small = msgs[1].args
        assert type(got_blob) is bytes and got_blob == blob[:200_000]
        assert np.array_equal(got_arr, arr) and got_arr.flags.writeable
        assert small == b"small"
        assert hash(msgs[0].value) == hash(blob)  # a bytes like any other
    finally:
        left.close()
        right.close()


def _decode_stream(data: bytes, place: bool, chunks: list[int]) -> list[Any]:
    codec = Codec(max_frame=1 << 22)
    dec = FrameDecoder(1 << 22, codec.bytes_buffers if place else None)
    out: list[Any] = []
    try:
        at = 0
        for c in [*chunks, len(data)]:
            dec.feed(data[at:at + c])
            at += c
            while (f := dec.next_frame()) is not None:
                out.append(codec.decode(f))
    except ProtocolError:
        out.append("error")
    return out


def _comparable(m: Any) -> bytes:
    return msgspec.msgpack.encode(m, enc_hook=lambda o: [o.dtype.str, o.shape, o.tobytes()]
                                  if isinstance(o, np.ndarray) else repr(o))


@needs_ctypes
def test_mutated_large_frames_decode_alike_placed_or_not() -> None:
    """The fuzz tests' frames are all small, so none is placed: here large frames, their
    heads corrupted and cut anywhere, must give what the unplaced decoder gives."""
    rng = random.Random(7)
    for _ in range(300):
        big = rng.randbytes(16) * rng.choice([4100, 9000])
        args: list[Any] = []
        for _ in range(rng.randint(1, 4)):
            k = rng.random()
            if k < .5:
                args.append(OutOfBand(big[:rng.randint(0, len(big))]))
            elif k < .8:
                args.append(np.frombuffer(big[:rng.randint(0, 1000) * 8], dtype=np.float64).copy())
            else:
                args.append(b"x" * rng.randint(0, 100))
        msg = Call(1, "f", args) if rng.random() < .5 else Result(2, args)
        stream = bytearray(b"".join(bytes(p) for p in Codec().encode(msg)))
        stream += b"".join(bytes(p) for p in Codec().encode(Result(3, "after")))
        for _ in range(rng.randint(0, 3)):
            at = rng.randrange(min(len(stream), 400))  # the prefix, table and header
            stream[at] ^= rng.randint(1, 255)
        chunks = [rng.choice([1, 7, 63, 4096, 65536, 131072]) for _ in range(rng.randint(0, 5))]
        plain = _decode_stream(bytes(stream), False, chunks)
        placed = _decode_stream(bytes(stream), True, chunks)
        assert [_comparable(m) for m in placed] == [_comparable(m) for m in plain]
