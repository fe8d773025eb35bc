"""Codec: messages <-> msgpack header + raw buffers, pickle only when allowed."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest

from polybus.errors import ProtocolError
from polybus.wire.arrays import INLINE_MAX
from polybus.wire.codec import (
    EXT_BYTES,
    EXT_NDARRAY,
    EXT_PICKLE,
    EXT_SMALL,
    Codec,
    OutOfBand,
    Ref,
)
from polybus.wire.framing import Frame, FrameDecoder
from polybus.wire.messages import Batch, Call, Fail, Message, Result


def roundtrip(msg: Message, enc: Codec | None = None, dec: Codec | None = None) -> Any:
    pieces = (enc or Codec()).encode(msg)
    d = FrameDecoder()
    d.feed(b"".join(bytes(memoryview(p).cast("B")) for p in pieces))
    frame = d.next_frame()
    assert frame is not None and d.next_frame() is None
    return (dec or Codec()).decode(frame)


def header_frame(value_header: bytes, buffers: list[bytes] | None = None) -> Frame:
    """A Result frame whose value is the given raw msgpack (for malformed input)."""
    # [tag=2, id=7, value] : build the array header by hand to splice a raw value in.
    head = b"\x93" + msgspec.msgpack.encode(2) + msgspec.msgpack.encode(7) + value_header
    return Frame(head, [bytearray(b) for b in buffers or []], 0)


@pytest.mark.parametrize("value", [
    None, True, False, 0, -1, 2**63 - 1, -(2**63), 1.5, "", "héllo", b"", b"\x00\xff",
    [], [1, "a", None], {"k": [1, {"n": 2.5}]}, {"": b"x"},
])
def test_msgpack_types_round_trip(value: Any) -> None:
    out = roundtrip(Result(1, value))
    assert isinstance(out, Result) and out.id == 1 and out.value == value


def test_call_fields_round_trip() -> None:
    msg = Call(42, "sort", [1, [2, 3]], {"reverse": True}, 3.5, 2.0, None)
    assert roundtrip(msg) == msg
    fail = Fail(3, "exception", "ValueError", "bad", "Traceback...")
    assert roundtrip(fail) == fail


def test_tuples_arrive_as_lists() -> None:
    assert roundtrip(Result(1, (1, (2, 3)))).value == [1, [2, 3]]


def test_sets_arrive_as_lists_as_documented() -> None:
    """msgpack has one kind of sequence: a set or frozenset arrives as a list of its
    members (configuration.md, protocol.md §4 say so), never pickled or refused."""
    got = roundtrip(Result(1, {"s": {3, 1, 2}, "f": frozenset({"a"})})).value
    assert sorted(got["s"]) == [1, 2, 3] and got["f"] == ["a"]


@pytest.mark.parametrize("arr", [
    np.arange(12, dtype=np.int64).reshape(3, 4),
    np.linspace(0, 1, 7, dtype=np.float32),
    np.array(3.25),                                  # 0-d
    np.zeros((0,), dtype=np.float64),                # empty
    np.zeros((2, 0, 3), dtype=np.int16),             # empty with shape
    np.array([[True, False]]),
    np.array([1 + 2j, 3 - 4j], dtype=np.complex128),
    np.arange(6, dtype=">u4").reshape(2, 3),         # big-endian
    np.frombuffer(b"abcdef", dtype="S3"),
    np.arange(24, dtype=np.uint8).reshape(2, 3, 4)[:, ::2],  # not contiguous
    np.arange(10).astype("m8[ms]"),                  # inside the header
    np.arange(1000).astype("M8[s]"),                 # a buffer (no datetime in the buffer protocol)
])
def test_numpy_arrays_round_trip(arr: np.ndarray) -> None:
    out = roundtrip(Result(1, arr)).value
    assert isinstance(out, np.ndarray)
    assert out.dtype == arr.dtype and out.shape == arr.shape
    np.testing.assert_array_equal(out, arr)


def test_large_arrays_travel_as_buffers_and_small_ones_in_the_header() -> None:
    a = np.ones((100, 100))
    b = np.arange(5, dtype=np.int32)
    pieces = Codec().encode(Call(1, "f", [[a, {"b": b}], "s"]))
    assert len(pieces) == 2  # prefix, header (with b's 20 bytes inside), then a's buffer
    assert memoryview(pieces[1]).nbytes == a.nbytes
    assert len(pieces[0]) < 200
    out = roundtrip(Call(1, "f", [[a, {"b": b}], "s"]))
    np.testing.assert_array_equal(out.args[0][0], a)
    np.testing.assert_array_equal(out.args[0][1]["b"], b)
    assert out.args[1] == "s"


@pytest.mark.parametrize("arr", [
    np.arange(10.0), np.arange(INLINE_MAX // 8, dtype=np.float64), np.array(2.5),
    np.zeros((0, 3)), np.arange(6, dtype=">u4").reshape(2, 3), np.ones((4, 4), order="F"),
    np.arange(20, dtype=np.int8).reshape(4, 5)[:, ::2],
])
def test_small_arrays_travel_inside_the_header(arr: np.ndarray) -> None:
    header, bufs = Codec().encode_parts(Result(1, arr))
    assert bufs == [] and len(header) < arr.nbytes + 40  # no buffers: every in-place path applies
    out = roundtrip(Result(1, arr)).value
    assert out.dtype == arr.dtype and out.shape == arr.shape
    np.testing.assert_array_equal(out, arr)
    assert out.flags.writeable  # its own memory, as an array received as a buffer
    assert len(Codec().encode_parts(Result(1, np.zeros(INLINE_MAX // 8 + 1)))[1]) == 1  # just over


def _small(dtype: Any, shape: Any, data: bytes) -> bytes:
    meta = msgspec.msgpack.encode([dtype, shape])
    return bytes((len(meta),)) + meta + data


def test_small_array_ext_that_lies_about_its_size_or_meta() -> None:
    good = _small("<f8", [3], bytes(24))
    Codec().decode(header_frame(_ext(EXT_SMALL, good)))  # (the well-formed one decodes)
    for bad, why in [
        (good[:-1], "shape"), (bytes((good[0] + 3,)) + good[1:], "malformed"), (b"", "malformed"),
        (_small("|O", [1], bytes(8)), "object"),
        (_small("<f8", [-1, -3], bytes(24)), "dimension -1"),
        (_small("<f8", [float("inf")], bytes(8)), "dimension inf"),  # (int(inf): OverflowError)
        (_small("<f8", [1.0], bytes(8)), "dimension 1.0"), (_small("<f8", [True], bytes(8)), "dimension"),
        (_small("<f8", "1", bytes(8)), "not a list"), (_small(None, [1], bytes(8)), "not a dtype"),
        (_small("|S0", [2**62], b""), "zero bytes"),  # (numpy takes it; iterating it never ends)
        (_small("f8," * 30, [1], bytes(240)), "not a dtype"),  # (long strings: large dtypes)
        (_small("<q9", [1], bytes(8)), "malformed"),  # (numpy cannot read it: TypeError)
    ]:
        with pytest.raises(ProtocolError, match=why):
            Codec().decode(header_frame(_ext(EXT_SMALL, bad)))


def test_buffered_array_meta_is_checked_as_strictly() -> None:
    for meta, buf, why in [(["<f8", [float("inf")], 0], b"", "dimension inf"),
                           (["|V0", [2**40], 0], b"", "zero bytes"),
                           (["f8," * 30, [1], 0], bytes(240), "not a dtype")]:
        with pytest.raises(ProtocolError, match=why):
            Codec().decode(header_frame(_ext(EXT_NDARRAY, msgspec.msgpack.encode(meta)), [buf]))


def test_large_array_is_not_copied_on_encode() -> None:
    a = np.arange(1 << 16, dtype=np.float64)
    pieces = Codec().encode(Result(1, a))
    assert np.shares_memory(np.frombuffer(pieces[1], dtype=np.float64), a)


def test_numpy_scalars_become_python_values() -> None:
    assert roundtrip(Result(1, [np.int32(4), np.float64(0.5)])).value == [4, 0.5]


def test_big_bytes_out_of_band() -> None:
    data = bytes(range(256)) * 1000
    pieces = Codec().encode(Result(1, OutOfBand(data)))
    assert len(pieces) == 2 and memoryview(pieces[1]).nbytes == len(data)
    assert roundtrip(Result(1, OutOfBand(data))).value == data


class Point:
    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and other.x == self.x

    __hash__ = None  # type: ignore[assignment]


def test_pickle_refused_on_encode_without_allow_pickle() -> None:
    with pytest.raises(TypeError, match="safe codec"):
        Codec().encode(Result(1, Point(1)))
    with pytest.raises(TypeError, match="safe codec"):
        Codec().encode(Result(1, np.array([Point(1)], dtype=object)))


def test_pickle_refused_on_decode_without_allow_pickle() -> None:
    pieces = Codec(allow_pickle=True).encode(Result(1, Point(2)))
    d = FrameDecoder()
    d.feed(b"".join(bytes(p) for p in pieces))
    frame = d.next_frame()
    assert frame is not None
    with pytest.raises(ProtocolError, match="pickle"):
        Codec().decode(frame)


def test_pickle_when_both_sides_allow() -> None:
    both = Codec(allow_pickle=True)
    assert roundtrip(Result(1, Point(3)), both, Codec(allow_pickle=True)).value == Point(3)


def test_ref_round_trip_and_hook() -> None:
    assert repr(roundtrip(Result(1, Ref("op", "abc"))).value) == "Ref('op', 'abc')"
    hooked = Codec(ref_hook=lambda r: f"resolved {r.kind}:{r.key}")
    assert roundtrip(Result(1, Ref("op", "k")), dec=hooked).value == "resolved op:k"


def _ext(code: int, data: bytes) -> bytes:
    return msgspec.msgpack.encode(msgspec.msgpack.Ext(code, data))


def test_unknown_ext() -> None:
    with pytest.raises(ProtocolError, match="unknown extension type 9"):
        Codec().decode(header_frame(_ext(9, b"x")))


def test_bad_buffer_index() -> None:
    meta = msgspec.msgpack.encode(["<f8", [1], 3])
    with pytest.raises(ProtocolError, match="buffer 3"):
        Codec().decode(header_frame(_ext(EXT_NDARRAY, meta), [bytes(8)]))
    with pytest.raises(ProtocolError, match="buffer"):
        Codec().decode(header_frame(_ext(EXT_BYTES, msgspec.msgpack.encode("0"))))


def test_array_shape_that_disagrees_with_buffer() -> None:
    meta = msgspec.msgpack.encode(["<f8", [3], 0])
    with pytest.raises(ProtocolError, match="shape"):
        Codec().decode(header_frame(_ext(EXT_NDARRAY, meta), [bytes(16)]))


@pytest.mark.parametrize("n", [3, 1000])  # (inside the header, and as a buffer)
def test_structured_arrays_are_refused_not_sent_without_their_field_names(n: int) -> None:
    arr = np.zeros(n, dtype=[("a", "<i4"), ("b", "<f8")])
    with pytest.raises(TypeError, match="structured numpy array \\(fields a, b\\)"):
        Codec().encode(Result(1, arr))
    out = roundtrip(Result(1, arr), Codec(allow_pickle=True), Codec(allow_pickle=True)).value
    assert out.dtype == arr.dtype and out.dtype.names == ("a", "b")


def test_object_dtype_array_refused_as_raw_buffer() -> None:
    meta = msgspec.msgpack.encode(["|O", [1], 0])
    with pytest.raises(ProtocolError, match="object"):
        Codec().decode(header_frame(_ext(EXT_NDARRAY, meta), [bytes(8)]))


def test_malformed_header() -> None:
    with pytest.raises(ProtocolError, match="malformed"):
        Codec().decode(Frame(b"\x93\x63", [], 0))  # tag 99 does not exist
    with pytest.raises(ProtocolError):
        Codec().decode(Frame(b"\xc1", [], 0))


@pytest.mark.parametrize("nest", [b"\x91", b"\x81\xa1k"], ids=["arrays", "maps"])
def test_nesting_too_deep_to_decode_is_a_protocol_error(nest: bytes) -> None:
    """A small frame of arrays (or maps) nested 200,000 deep: msgspec raises
    RecursionError, which is not a ProtocolError and escaped every reader's handling (a
    replica reading it from an shm ring retried it forever, serving no one)."""
    header = b"\x94\x01\x01\xa4echo\x91" + nest * 200_000 + b"\xc0"  # (in args)
    with pytest.raises(ProtocolError, match="nested too deeply"):
        Codec().decode(Frame(header, [], 0))
    with pytest.raises(ProtocolError, match="nested too deeply"):
        Codec().decode_header(memoryview(header))


def _called_from_deep(frames: int, fn: Any) -> Any:
    """``fn()`` called ``frames`` Python frames further down the stack."""
    return fn() if frames == 0 else _called_from_deep(frames - 1, fn)


@pytest.mark.parametrize("kind", [list, dict])
def test_a_value_the_sender_encoded_is_decoded_at_any_depth_of_the_reader(kind: type) -> None:
    """A message 900 containers deep, encoded near the bottom of a stack, read by a
    thread already 400 frames deep (a program's own calls, then polybus's): msgspec had
    no room left there, and the reader took it for a malformed message and dropped the
    replica. It is decoded again on a fresh stack; the codec stays usable."""
    codec = Codec()
    pieces = Codec().encode(Result(1, _nested(900, kind)))
    d = FrameDecoder()
    d.feed(b"".join(bytes(memoryview(p).cast("B")) for p in pieces))
    frame = d.next_frame()
    assert frame is not None
    got = _called_from_deep(400, lambda: codec.decode(frame))
    assert type(got) is Result and got.value == _nested(900, kind)
    header = memoryview(frame.header)
    assert _called_from_deep(400, lambda: codec.decode_header(header)) == got
    assert roundtrip(Call(2, "echo", [[1, [2]]]), dec=codec) == Call(2, "echo", [[1, [2]]])


def _nested(n: int, kind: type = list) -> Any:
    v: Any = []
    for _ in range(n):
        v = kind([v]) if kind is not dict else {"k": v}
    return v


@pytest.mark.parametrize("kind", [list, tuple, dict])
@pytest.mark.parametrize("msg", [lambda v: Call(1, "echo", [v]), lambda v: Result(1, v)],
                         ids=["call", "answer"])
def test_nesting_too_deep_to_encode_is_a_type_error(kind: type, msg: Any) -> None:
    """A value 1500 containers deep: msgspec's RecursionError (a RuntimeError) is the
    TypeError every send path takes for a value the codec cannot carry, saying why
    (it was a bare RecursionError naming nothing); the codec is left usable."""
    codec = Codec()
    for encode in (codec.encode, codec.encode_parts):
        with pytest.raises(TypeError, match=r"^a value nested too deeply: lists, tuples or "
                                            r"dicts inside one another more than about \d+ "
                                            r"deep") as info:
            encode(msg(_nested(1500, kind)))
        assert info.value.__suppress_context__  # (not msgspec's RecursionError with it)
    assert roundtrip(Call(2, "echo", [[1, [2]]]), codec) == Call(2, "echo", [[1, [2]]])


def test_pickled_ext_carries_pickle_bytes() -> None:
    pieces = Codec(allow_pickle=True).encode(Result(1, Point(5)))
    assert bytes([EXT_PICKLE]) in bytes(pieces[0])


def test_promise_like_values_are_forced_when_encoded() -> None:
    class Lazy:
        def __polybus_value__(self) -> Any:
            return [1, 2]

    assert roundtrip(Result(1, {"v": Lazy()})).value == {"v": [1, 2]}


def test_arrays_received_in_a_large_frame_are_aligned_for_their_dtype() -> None:
    # Regression: buffers followed the header at any byte offset; numpy falls off BLAS
    # for unaligned arrays (row @ B was 10x slower on a received B).
    import numpy as np

    from polybus.wire.framing import FrameDecoder
    from polybus.wire.messages import Call

    codec, dec = Codec(), FrameDecoder()
    small, big = np.arange(3, dtype=np.int16), np.random.default_rng(0).random((400, 400))
    for piece in codec.encode(Call(1, "f", [small, big, np.arange(5.0)])):
        dec.feed(piece)
    frame = dec.next_frame()
    assert frame is not None
    msg = codec.decode(frame)
    assert isinstance(msg, Call)
    for got, sent in zip(msg.args, (small, big, np.arange(5.0)), strict=True):
        assert got.flags.aligned
        assert got.ctypes.data % got.dtype.alignment == 0
        assert (got == sent).all()


@pytest.mark.parametrize("make", [
    lambda v: Result(1, v),
    lambda v: Batch([Result(1, 0), Result(2, v), Fail(3, "exception", "E", "m")]),
])
def test_large_bytes_values_travel_out_of_band_and_come_back_as_bytes(make: Any) -> None:
    from polybus.wire.codec import OOB_BYTES

    for n, out_of_band in [(OOB_BYTES - 1, False), (OOB_BYTES, True), (3 << 20, True)]:
        data = bytes(range(256)) * (n // 256) + b"x" * (n % 256)
        msg = make(data)
        pieces = Codec().encode(msg)
        assert (len(pieces) > 1) == out_of_band  # the bytes are a piece of their own
        if out_of_band:
            assert any(isinstance(p, memoryview) and p.obj is data for p in pieces)
        out = roundtrip(msg)
        value = out.value if isinstance(out, Result) else out.items[1].value
        assert type(value) is bytes and value == data
        assert (out.value if isinstance(out, Result) else out.items[1].value) == data


def test_decode_lone_takes_exactly_one_plain_frame() -> None:
    """What the socket lanes read in one piece: one whole frame with no buffers is its
    message; anything else is None, left to the frame decoder."""
    import struct



    codec = Codec()
    one = b"".join(bytes(p) for p in codec.encode(Call(7, "echo", [1, "x"])))
    assert codec.decode_lone(one) == Call(7, "echo", [1, "x"])
    assert codec.decode_lone(one + one) is None  # two frames
    assert codec.decode_lone(one[:-1]) is None  # part of one
    assert codec.decode_lone(one[:5]) is None  # not even a prefix
    arr = b"".join(bytes(p) for p in codec.encode(Result(1, np.arange(5000.0))))
    assert codec.decode_lone(arr) is None  # buffers beside the header
    junk = b"\xc1\xc1"
    assert codec.decode_lone(struct.pack("<IHHI", 8 + len(junk), 0, 0, len(junk)) + junk) is None
    assert Codec(max_frame=8).decode_lone(one) is None  # over this side's limit
