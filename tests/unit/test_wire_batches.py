"""CallBatch and BatchResult: the bytes docs/protocol.md shows, and a round trip."""

from __future__ import annotations

import msgspec

from polybus.wire.messages import BatchResult, CallBatch, Fail, Message

_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(Message)


def test_call_batch_bytes_as_documented() -> None:
    got = _enc.encode(CallBatch(7, "noop", [[b"ab"], [3]]))
    assert got == bytes.fromhex("95 11 07 a4 6e6f6f70 92 91 c4 02 6162 91 03 cb 0000000000000000")


def test_batch_result_bytes_as_documented() -> None:
    got = _enc.encode(BatchResult(7, [b"ab", None], [Fail(1, "exception", "ValueError", "bad", "tb")]))
    assert got == (bytes.fromhex("94 12 07 92 c4 02 6162 c0 91 96 03 01")
                   + b"\xa9exception\xaaValueError\xa3bad\xa2tb")


def test_round_trip_and_defaults() -> None:
    msg = _dec.decode(_enc.encode(CallBatch(9, "f", [[1, "x"], []], 2.5)))
    assert msg == CallBatch(9, "f", [[1, "x"], []], 2.5)
    # A sender may leave out trailing defaults: prio 0, no failures.
    assert _dec.decode(bytes.fromhex("94 11 01 a1 66 90")) == CallBatch(1, "f", [])
    assert _dec.decode(bytes.fromhex("93 12 01 90")) == BatchResult(1, [], [])
