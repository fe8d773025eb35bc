"""Bad input: malformed, truncated, oversized and random bytes at the decoder and handshake.

The only exceptions allowed out are ProtocolError (and its AuthenticationError); a
decoder that has raised is dead (its connection is dropped), so each case stops at the
first error. The examples are shared out of POLYBUS_FUZZ_EXAMPLES (4,000 by default, to
keep the suite inside its 10 minutes on 2 cores;
`make fuzz` sets 1,000,000).
"""

from __future__ import annotations

import os
import struct
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polybus.errors import AuthenticationError, ProtocolError
from polybus.wire import handshake
from polybus.wire.codec import Codec, OutOfBand
from polybus.wire.framing import PREFIX, FrameDecoder, encode_frame
from polybus.wire.messages import Batch, Call, Cancel, Fail, Goodbye, Message, Ping, Result

TOTAL = int(os.environ.get("POLYBUS_FUZZ_EXAMPLES", "4000"))
# Shares of the total, one per test below (they add up to 1).
_SHARES = {"random": 0.2, "structured": 0.25, "mutated": 0.25, "chunked": 0.1,
           "server_hs": 0.1, "client_hs": 0.1}
MAX_FRAME = 1 << 20  # small, so a declared-large frame costs little memory per case


def _settings(share: str) -> settings:
    return settings(max_examples=max(1, int(TOTAL * _SHARES[share])), deadline=None,
                    database=None, suppress_health_check=list(HealthCheck))


def decode_all(data: bytes, *, chunks: list[int] | None = None, pickle: bool = False) -> list[Message]:
    """Feed ``data`` (in pieces if asked) and decode every whole frame; may raise ProtocolError."""
    dec = FrameDecoder(MAX_FRAME)
    codec = Codec(allow_pickle=pickle, max_frame=MAX_FRAME)
    out: list[Message] = []
    pieces = [data]
    if chunks:
        pieces, at = [], 0
        for n in chunks:
            pieces.append(data[at:at + n])
            at += n
        pieces.append(data[at:])
    for piece in pieces:
        view = memoryview(piece)
        while view.nbytes:  # the socket path: receive into memory the decoder lends
            buf = dec.get_buffer()
            assert buf.nbytes >= 1
            n = min(buf.nbytes, view.nbytes)
            buf[:n] = view[:n]
            dec.buffer_updated(n)
            view = view[n:]
            while (frame := dec.next_frame()) is not None:
                out.append(codec.decode(frame))
    return out


def only_protocol_errors(data: bytes, **kw: object) -> None:
    try:
        msgs = decode_all(data, **kw)  # type: ignore[arg-type]
    except ProtocolError as exc:
        assert str(exc)  # a clear reason, never an empty message
        return
    for m in msgs:
        assert isinstance(m, Message.__args__)  # type: ignore[attr-defined]


def _frame(header: bytes, bufs: list[bytes]) -> bytes:
    return b"".join(bytes(p) for p in encode_frame(header, list(bufs), MAX_FRAME))


values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats() | st.text(max_size=20)
    | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)

messages = st.one_of(
    st.builds(Call, st.integers(0, 2**63 - 1), st.text(max_size=10), st.lists(values, max_size=4)),
    st.builds(Result, st.integers(0, 2**63 - 1), values),
    st.builds(Fail, st.integers(0, 2**31), st.text(max_size=8), st.text(max_size=8), st.text(max_size=30)),
    st.builds(Cancel, st.lists(st.integers(0, 2**31), max_size=5)),
    st.builds(Ping, st.integers(0, 2**31)),
    st.builds(Goodbye, st.text(max_size=20)),
    st.builds(Batch, st.lists(st.builds(Call, st.integers(0, 99), st.just("f"), st.lists(values, max_size=2)),
                              max_size=3)),
)


def encoded(msg: Message, oob: bytes | None = None) -> bytes:
    if oob is not None and isinstance(msg, Call):
        msg = Call(msg.id, msg.iface, [*msg.args, OutOfBand(oob)])
    return b"".join(bytes(p) for p in Codec(max_frame=MAX_FRAME).encode(msg))


# -- the decoder ------------------------------------------------------------------------
@_settings("random")
@given(st.binary(max_size=600))
def test_random_bytes(data: bytes) -> None:
    only_protocol_errors(data)


def _small_array(meta: tuple[Any, ...], raw: bytes, skew: int) -> bytes:
    """An ext 5 payload (an array inside the header): its meta's length (off by
    ``skew``), the meta, then the bytes."""
    packed = msgspec.msgpack.encode(meta)
    return bytes(((len(packed) + skew) % 256,)) + packed + raw


@_settings("structured")
@given(st.data())
def test_structured_frames_with_random_parts(data: st.DataObject) -> None:
    """Frames whose prefix is plausible but whose lengths, header and buffers are not."""
    kind = data.draw(st.sampled_from(["header", "lengths", "ext", "oversized", "truncated"]))
    if kind == "header":  # a well-framed but random msgpack header
        blob = _frame(data.draw(st.binary(max_size=200)),
                      data.draw(st.lists(st.binary(max_size=30), max_size=3)))
    elif kind == "lengths":  # any numbers in the prefix and buffer table
        nbufs = data.draw(st.integers(0, 6) | st.integers(0, 2**16 - 1))
        length = data.draw(st.integers(0, 2**32 - 1) | st.integers(0, 400))
        blob = PREFIX.pack(length, nbufs, data.draw(st.integers(0, 2**16 - 1)),
                           data.draw(st.integers(0, 2**32 - 1) | st.integers(0, 100)))
        blob += b"".join(struct.pack("<Q", data.draw(st.integers(0, 2**64 - 1) | st.integers(0, 50)))
                         for _ in range(min(nbufs, 6)))
        blob += data.draw(st.binary(max_size=300))
    elif kind == "ext":  # extension values with random payloads (arrays, bytes, pickle, refs)
        code = data.draw(st.integers(-128, 127) | st.sampled_from([1, 2, 3, 4, 5]))
        dtypes = st.text(max_size=6) | st.sampled_from(["<f8", "|O", "<i4", "V3", "O", "|S0", "V0"])
        shapes = st.lists(st.integers(-3, 2**40) | st.integers(0, 4) | st.floats()
                          | st.booleans(), max_size=3)
        payload = data.draw(st.binary(max_size=40) | st.builds(
            msgspec.msgpack.encode, st.tuples(dtypes, shapes, st.integers(-2, 5)))
            | st.builds(_small_array, st.tuples(dtypes, shapes), st.binary(max_size=40),
                        st.integers(-2, 2)))
        header = msgspec.msgpack.encode([2, 7, msgspec.msgpack.Ext(code, payload)])  # Result(7, ext)
        blob = _frame(header, data.draw(st.lists(st.binary(max_size=64), max_size=2)))
    elif kind == "oversized":
        blob = struct.pack("<I", data.draw(st.integers(MAX_FRAME + 1, 2**32 - 1))) + data.draw(st.binary(max_size=20))
    else:  # a valid frame cut short, then followed by junk or nothing
        whole = encoded(data.draw(messages))
        blob = whole[:data.draw(st.integers(0, len(whole)))] + data.draw(st.binary(max_size=20))
    only_protocol_errors(blob, pickle=data.draw(st.booleans()))


@_settings("mutated")
@given(st.lists(messages, min_size=1, max_size=2), st.data())
def test_mutated_valid_streams(msgs: list[Message], data: st.DataObject) -> None:
    """Real messages, then bytes flipped, cut, inserted or duplicated."""
    stream = bytearray(b"".join(encoded(m, data.draw(st.none() | st.binary(max_size=30))) for m in msgs))
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "dup", "set"]))
        at = data.draw(st.integers(0, len(stream)))
        if op == "flip" and at < len(stream):
            stream[at] ^= data.draw(st.integers(1, 255))
        elif op == "set" and at + 4 <= len(stream):
            stream[at:at + 4] = struct.pack("<I", data.draw(st.integers(0, 2**32 - 1)))
        elif op == "cut":
            del stream[at:at + data.draw(st.integers(1, 16))]
        elif op == "insert":
            stream[at:at] = data.draw(st.binary(min_size=1, max_size=16))
        elif op == "dup":
            stream += stream[at:]
    only_protocol_errors(bytes(stream))


@_settings("chunked")
@given(st.lists(messages, min_size=1, max_size=5), st.lists(st.integers(0, 50), max_size=10))
def test_valid_streams_in_any_pieces_decode_exactly(msgs: list[Message], chunks: list[int]) -> None:
    """The control: valid frames split anywhere decode to exactly what was sent."""
    stream = b"".join(encoded(m) for m in msgs)
    got = decode_all(stream, chunks=chunks)
    assert [encoded(m) for m in got] == [encoded(m) for m in msgs]  # NaN-safe equality


def test_declared_large_frame_waits_without_error() -> None:
    dec = FrameDecoder(MAX_FRAME)
    dec.feed(PREFIX.pack(MAX_FRAME, 0, 0, MAX_FRAME - 8))
    assert dec.next_frame() is None  # waits for the body, bounded by max_frame


# -- the handshake ---------------------------------------------------------------------
TOKEN = b"t" * 32


@_settings("server_hs")
@given(st.binary(max_size=100) | st.builds(
    lambda head, rest: head + rest,
    st.sampled_from([b"PBUS\x01\x00\x00\x00", b"PBUS\x02\x00\x00\x00", b"XBUS\x01\x00\x00\x00"]),
    st.binary(min_size=64, max_size=64)))
def test_server_handshake_refuses_anything_but_a_proof(proof: bytes) -> None:
    answer, error = handshake.ServerHandshake(TOKEN).check(proof)
    assert isinstance(error, AuthenticationError)
    assert str(error) in handshake._REASONS.values()  # the reason, as the refuser logs it
    assert len(answer) == handshake.ANSWER_SIZE and answer[0] != handshake.OK
    assert answer[1:] == bytes(32)  # nothing about the token leaks to a refused peer


@_settings("client_hs")
@given(st.binary(max_size=100), st.binary(max_size=100))
def test_client_handshake_raises_only_protocol_errors(hello: bytes, answer: bytes) -> None:
    client = handshake.ClientHandshake(TOKEN)
    try:
        client.proof(hello)
        client.verify(answer)
    except ProtocolError as exc:
        assert str(exc)
    else:
        raise AssertionError("a random answer was accepted")


def test_handshake_control_accepts_the_right_token_only() -> None:
    server, client = handshake.ServerHandshake(TOKEN), handshake.ClientHandshake(TOKEN)
    answer, error = server.check(client.proof(server.hello()))
    assert error is None
    client.verify(answer)
    wrong = handshake.ClientHandshake(b"w" * 32)
    server = handshake.ServerHandshake(TOKEN)
    answer, error = server.check(wrong.proof(server.hello()))
    assert isinstance(error, AuthenticationError) and answer[0] == handshake.BAD_TOKEN
    assert TOKEN.decode() not in str(error)
