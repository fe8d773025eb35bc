"""FrameDecoder's large frames (128 KiB and more): received into memory of their own
rather than copied out of the scratch, 64-byte aligned, that memory reused once the
values over it are released (and a spare made ready while one is held), and large
frames fed with others, whole or in pieces, coming out in order."""

from __future__ import annotations

from test_wire_framing import frames, wire  # tests/unit

from polybus.wire.framing import FrameDecoder, encode_frame


def test_large_frame_gets_its_own_memory_without_copy() -> None:
    big = bytes(range(256)) * 1024  # 256 KiB, over the 128 KiB threshold
    data = wire(b"h", [big])
    dec = FrameDecoder()
    dec.feed(data[:1000])
    assert dec.next_frame() is None
    # The rest is received straight into the frame's own bytearray.
    view = dec.get_buffer()
    assert view.nbytes == len(data) - 1000
    view[:] = data[1000:]
    dec.buffer_updated(len(data) - 1000)
    f = dec.next_frame()
    assert f is not None and bytes(f.header) == b"h"
    assert isinstance(f.buffers[0], memoryview) and bytes(f.buffers[0]) == big
    assert f.size == len(data)
    dec.feed(wire(b"after"))
    assert frames(dec) == [(b"after", [])]


def test_large_frame_in_small_chunks() -> None:
    big = b"q" * (300 * 1024)
    data = wire(b"h", [big, b"tail"]) + wire(b"next")
    dec = FrameDecoder()
    got = []
    for i in range(0, len(data), 4093):
        dec.feed(data[i:i + 4093])
        got += frames(dec)
    assert got == [(b"h", [big, b"tail"]), (b"next", [])]


def test_one_large_frame_fed_whole_gets_its_own_memory() -> None:
    # Regression: feed() of a frame larger than the scratch area tried to grow the
    # scratch while a view of it was exported (BufferError).
    import numpy as np

    from polybus.wire.codec import Codec
    from polybus.wire.messages import Call

    codec, dec = Codec(), FrameDecoder()
    for piece in codec.encode(Call(1, "f", [np.arange(100_000, dtype=np.int64)])):
        dec.feed(piece)
    frame = dec.next_frame()
    assert frame is not None
    msg = codec.decode(frame)
    assert isinstance(msg, Call)
    assert (msg.args[0] == np.arange(100_000)).all()


def test_large_frame_memory_is_reused_only_when_released() -> None:
    import numpy as np

    from polybus.wire.codec import Codec
    from polybus.wire.messages import Call

    codec, dec = Codec(), FrameDecoder()

    def round_trip(fill: int) -> np.ndarray:
        for piece in codec.encode(Call(1, "f", [np.full(2_000_000, fill, np.uint8)])):
            dec.feed(piece)
        frame = dec.next_frame()
        assert frame is not None
        msg = codec.decode(frame)
        assert isinstance(msg, Call)
        return msg.args[0]  # type: ignore[no-any-return]

    a1, a2 = round_trip(1), round_trip(2)
    assert a1[0] == 1 and a2[0] == 2  # a live array's memory is never handed out again
    a1_base = a1.ctypes.data
    del a1
    a3 = round_trip(3)
    assert a2[0] == 2 and a3[0] == 3
    assert a3.ctypes.data == a1_base  # released memory was used again


def test_large_frame_bodies_are_64_byte_aligned_and_reused_from_128_kib() -> None:
    import numpy as np

    from polybus.wire.codec import Codec
    from polybus.wire.messages import Call

    codec, dec = Codec(), FrameDecoder()

    def round_trip(n: int) -> np.ndarray:
        for piece in codec.encode(Call(1, "f", [np.full(n, 5, np.uint8)])):
            dec.feed(piece)
        frame = dec.next_frame()
        assert frame is not None
        msg = codec.decode(frame)
        assert isinstance(msg, Call) and (msg.args[0] == 5).all()
        return msg.args[0]  # type: ignore[no-any-return]

    got = round_trip(200_000)
    assert got.ctypes.data % 64 == 0
    first = got.ctypes.data
    del got
    assert round_trip(200_000).ctypes.data == first  # reused below 1 MiB too
    # A small frame does not borrow a much larger spare (a kept array would pin it).
    big = round_trip(4_000_000)
    big_range = range(big.ctypes.data - 64, big.ctypes.data + big.nbytes)
    del big
    assert round_trip(150_000).ctypes.data not in big_range


def test_whole_large_frame_in_a_grown_scratch_with_more_behind_it() -> None:
    # Small frames left untaken grow the scratch; a large frame that then arrives whole,
    # with the start of the next frame behind it, is split from the scratch as it is
    # (the shm ring hands the decoder that much in one read).
    dec = FrameDecoder()
    small = b"".join(encode_frame(b"s", [b"x" * 1000]))
    dec.feed(small * 300)  # more than the scratch holds: it grows
    assert sum(1 for _ in iter(dec.next_frame, None)) == 300
    big = b"".join(encode_frame(b"big", [b"y" * 150_000]))
    tail = small * 400
    dec.feed(big + tail)
    frame = dec.next_frame()
    assert frame is not None and frame.header == b"big"
    assert bytes(frame.buffers[0]) == b"y" * 150_000
    assert sum(1 for _ in iter(dec.next_frame, None)) == 400


def test_large_frames_fed_before_any_is_taken_all_come_out_in_order() -> None:
    # The shm ring hands the decoder everything waiting in one drain: a large frame
    # completed and not yet taken must not be replaced by the next large one (before
    # the fix only the last of three came out; the others were silently lost).
    bigs = [wire(b"b%d" % i, [bytes([i]) * 200_000]) for i in range(3)]
    dec = FrameDecoder()
    dec.feed(b"".join(bigs))
    assert frames(dec) == [(b"b%d" % i, [bytes([i]) * 200_000]) for i in range(3)]
    dec = FrameDecoder()
    for b in bigs:
        dec.feed(b)
        dec.feed(wire(b"s", [b"x" * 10]))
    got = frames(dec)
    assert [h for h, _ in got] == [b"b0", b"s", b"b1", b"s", b"b2", b"s"]
    assert [bufs for h, bufs in got if h != b"s"] == [[bytes([i]) * 200_000] for i in range(3)]


def test_a_spare_is_made_ready_while_a_large_body_is_held() -> None:
    import numpy as np

    from polybus.wire.codec import Codec
    from polybus.wire.messages import Put

    codec, dec = Codec(), FrameDecoder()

    def receive(fill: int) -> np.ndarray:
        for piece in codec.encode(Put("k", np.full(2_000_000, fill, np.uint8))):
            dec.feed(piece)
        frame = dec.next_frame()
        assert frame is not None
        msg = codec.decode(frame)
        assert isinstance(msg, Put)
        return msg.value  # type: ignore[no-any-return]

    held = receive(1)  # kept alive, as a replica's operand cache keeps it
    assert dec.wants_spare
    dec.prepare_spare()
    assert not dec.wants_spare
    ready = dec._spares._spares[-1]
    start, end = ready.ctypes.data, ready.ctypes.data + ready.nbytes
    del ready  # (a reference of ours would make it look in use)
    second = receive(2)
    assert held[0] == 1 and second[0] == 2 and (second == 2).all()
    assert start <= second.ctypes.data < end  # received into the prepared memory
    assert dec.wants_spare  # that was the last free one: the next idle time makes another
