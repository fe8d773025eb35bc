"""FrameDecoder / encode_frame: bytes in, frames out, every length checked (large frames
and the memory they are received into: test_wire_framing_large.py)."""

from __future__ import annotations

import struct

import pytest

from polybus.errors import ProtocolError
from polybus.wire.framing import JOIN_MAX, MAX_BUFFERS, FrameDecoder, encode_frame


def wire(header: bytes, buffers: list[bytes] | None = None) -> bytes:
    return b"".join(bytes(p) for p in encode_frame(header, list(buffers or [])))


def frames(dec: FrameDecoder) -> list[tuple[bytes, list[bytes]]]:
    out = []
    while (f := dec.next_frame()) is not None:
        out.append((bytes(f.header), [bytes(b) for b in f.buffers]))
    return out


def test_layout_is_little_endian_prefix_table_header_buffers() -> None:
    data = wire(b"HDR", [b"ab", b"cde"])
    length, nbufs, flags, hlen = struct.unpack_from("<IHHI", data)
    assert (nbufs, flags, hlen) == (2, 0, 3)
    assert length == len(data) - 4
    assert struct.unpack_from("<QQ", data, 12) == (2, 3)
    assert data[28:31] == b"HDR"
    # Each buffer starts at a multiple of 64 bytes from the nbufs field (byte 4), the
    # gaps zero: "ab" at body offset 64, "cde" at 128.
    assert data[31:68] == bytes(37)
    assert data[68:70] == b"ab"
    assert data[70:132] == bytes(62)
    assert data[132:] == b"cde"
    assert length == 131


def test_split_frame_fed_byte_by_byte() -> None:
    data = wire(b"header", [b"x" * 10, b"y" * 3])
    dec = FrameDecoder()
    got = []
    for i in range(len(data)):
        dec.feed(data[i:i + 1])
        got += frames(dec)
        if i < len(data) - 1:
            assert got == []
    assert got == [(b"header", [b"x" * 10, b"y" * 3])]


def test_several_frames_in_one_feed() -> None:
    data = wire(b"one") + wire(b"two", [b"buf"]) + wire(b"three")
    dec = FrameDecoder()
    dec.feed(data)
    assert frames(dec) == [(b"one", []), (b"two", [b"buf"]), (b"three", [])]


def test_frame_and_a_half_then_the_rest() -> None:
    a, b = wire(b"first"), wire(b"second", [b"z" * 100])
    dec = FrameDecoder()
    dec.feed(a + b[:7])
    assert frames(dec) == [(b"first", [])]
    dec.feed(b[7:])
    assert frames(dec) == [(b"second", [b"z" * 100])]


def test_oversize_length_is_refused_before_reading_the_body() -> None:
    dec = FrameDecoder(max_frame=1000)
    dec.feed(struct.pack("<I", 1001))
    with pytest.raises(ProtocolError, match="over the limit"):
        dec.next_frame()


def test_encoder_refuses_oversize_message() -> None:
    # the message names the key that raises the limit
    with pytest.raises(ProtocolError, match=r"frame limit of 50 bytes \(\[cluster\] max_frame"):
        encode_frame(b"h", [b"x" * 100], max_frame=50)
    with pytest.raises(ProtocolError, match=r"\[cluster\] max_frame"):
        encode_frame(b"h" * 100, max_frame=50)


def test_length_shorter_than_header_is_refused() -> None:
    dec = FrameDecoder()
    dec.feed(struct.pack("<I", 3) + b"abc")
    with pytest.raises(ProtocolError, match="shorter"):
        dec.next_frame()


@pytest.mark.parametrize("nbufs", [0, 1])
def test_lengths_that_disagree(nbufs: int) -> None:
    good = bytearray(wire(b"header", [b"b"] * nbufs))
    # Declare a header longer than the frame carries (past any alignment padding; a
    # header claiming padding bytes is caught by the msgpack decoder instead).
    struct.pack_into("<I", good, 8, 6 + 200)
    dec = FrameDecoder()
    dec.feed(good)
    with pytest.raises(ProtocolError, match="disagree"):
        dec.next_frame()


def test_buffer_table_longer_than_frame() -> None:
    body = struct.pack("<HHI", 5, 0, 0)  # 5 buffers declared, no table
    dec = FrameDecoder()
    dec.feed(struct.pack("<I", len(body)) + body)
    with pytest.raises(ProtocolError, match="buffer table"):
        dec.next_frame()


def test_too_many_buffers() -> None:
    body = struct.pack("<HHI", MAX_BUFFERS + 1, 0, 0) + bytes(8 * (MAX_BUFFERS + 1))
    dec = FrameDecoder()
    dec.feed(struct.pack("<I", len(body)) + body)
    with pytest.raises(ProtocolError, match="buffers"):
        dec.next_frame()
    with pytest.raises(ProtocolError, match="at most"):
        encode_frame(b"h", [b""] * (MAX_BUFFERS + 1))


def test_small_frame_buffers_stay_valid_after_more_input() -> None:
    dec = FrameDecoder()
    dec.feed(wire(b"a", [b"first"]))
    f = dec.next_frame()
    assert f is not None
    dec.feed(wire(b"b", [b"XXXXX"]))
    assert bytes(f.buffers[0]) == b"first"


# -- next_small: the header-only fast path --------------------------------------------

def test_next_small_takes_whole_header_only_frames_in_order() -> None:
    dec = FrameDecoder()
    dec.feed(wire(b"one") + wire(b"two") + wire(b"thr")[:5])
    assert dec.next_small() == bytearray(b"one")
    assert dec.next_small() == bytearray(b"two")
    assert dec.next_small() is None  # the third is not whole yet
    dec.feed(wire(b"thr")[5:])
    assert dec.next_small() == bytearray(b"thr")
    assert dec.next_small() is None and dec.next_frame() is None


def test_next_small_leaves_frames_with_buffers_or_flags_to_next_frame() -> None:
    dec = FrameDecoder()
    dec.feed(wire(b"H", [b"buf"]) + b"".join(bytes(p) for p in encode_frame(b"F", [], flags=2))
             + wire(b"plain"))
    assert dec.next_small() is None
    assert frames_one(dec) == (b"H", [b"buf"], 0)
    assert dec.next_small() is None
    assert frames_one(dec) == (b"F", [], 2)
    assert dec.next_small() == bytearray(b"plain")


def frames_one(dec: FrameDecoder) -> tuple[bytes, list[bytes], int]:
    f = dec.next_frame()
    assert f is not None
    return bytes(f.header), [bytes(b) for b in f.buffers], f.flags


def test_next_small_does_not_take_malformed_frames_next_frame_refuses_them() -> None:
    dec = FrameDecoder(max_frame=64)
    dec.feed(struct.pack("<IHHI", 100, 0, 0, 92) + bytes(100 - 8))
    assert dec.next_small() is None
    with pytest.raises(ProtocolError, match="over the limit"):
        dec.next_frame()
    dec = FrameDecoder()
    dec.feed(struct.pack("<IHHI", 12, 0, 0, 3) + b"abcd")  # 8 + 3 != 12
    assert dec.next_small() is None
    with pytest.raises(ProtocolError, match="disagree"):
        dec.next_frame()


def test_next_small_header_is_a_copy_that_outlives_more_input() -> None:
    dec = FrameDecoder()
    dec.feed(wire(b"keep"))
    header = dec.next_small()
    dec.feed(wire(b"x" * 1000) * 300)  # reuses and grows the scratch
    assert header == bytearray(b"keep")


def test_large_header_without_buffers_is_not_copied_into_the_prefix() -> None:
    header = b"h" * 300_000
    pieces = encode_frame(header)
    assert len(pieces) == 2 and pieces[1] is header
    assert len(encode_frame(b"small")) == 1  # one plain send for the common message
    dec = FrameDecoder()
    for p in pieces:
        dec.feed(p)
    assert frames(dec) == [(header, [])]


def test_a_small_frame_with_buffers_is_one_piece_and_a_larger_one_is_not_copied() -> None:
    small = encode_frame(b"hdr", [b"x" * 100, memoryview(b"y" * 30)])
    assert len(small) == 1  # joined: one write, one iovec
    big_buf = b"z" * (JOIN_MAX + 1)
    big = encode_frame(b"hdr", [big_buf])
    assert len(big) == 2 and big[1] is big_buf
    dec = FrameDecoder()
    for p in small + big:
        dec.feed(p)
    assert frames(dec) == [(b"hdr", [b"x" * 100, b"y" * 30]), (b"hdr", [big_buf])]


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_empty_says_whether_any_byte_is_waiting(chunk: int) -> None:
    """``empty`` (a waiting reader's cheap look) is true exactly when nothing received
    is left to take: small frames, frames with buffers, a large frame, in any chunks."""
    data = (wire(b"a") + wire(b"bb", [b"x" * 100]) + wire(b"c" * 10, [bytes(300_000)])
            + wire(b"d"))
    dec = FrameDecoder()
    assert dec.empty
    got = []
    for i in range(0, len(data), chunk):
        dec.feed(data[i:i + chunk])
        assert not dec.empty
        while True:
            h = dec.next_small()
            f = dec.next_frame() if h is None else None
            if h is None and f is None:
                break
            got.append(bytes(h if h is not None else f.header))  # type: ignore[union-attr]
    assert got == [b"a", b"bb", b"c" * 10, b"d"]
    assert dec.empty


def test_partial_reports_only_a_frame_cut_off_not_whole_frames_held() -> None:
    """What a peer that went lost, for the log: whole frames not yet taken are not a
    frame cut off (two whole 15-byte frames were reported as "30 of its 15 bytes")."""
    one = wire(b"x" * 7)
    assert len(one) == 19
    dec = FrameDecoder()
    assert dec.partial() == ""
    dec.feed(one + one)
    assert dec.partial() == ""
    dec.feed(one[:3])
    assert dec.partial() == "3 of the 4 bytes of its length"
    dec.feed(one[3:10])
    assert dec.partial() == "10 of its 19 bytes"
    dec.feed(one[10:])
    assert dec.partial() == ""
    assert len(frames(dec)) == 3
    big = wire(b"h", [bytes(300_000)])
    dec.feed(big[:1000])
    assert dec.partial() == f"1000 of its {len(big)} bytes"
