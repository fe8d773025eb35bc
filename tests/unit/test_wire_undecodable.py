"""A pickled value the receiver cannot unpickle fails its own message, not the link.

Each value here is a pickle of ``ghost_module.Ghost``, a class no process has (as a
class the sender defined in its ``__main__`` is to the receiver)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from polybus.errors import ProtocolError
from polybus.wire.codec import EXT_PICKLE, Codec
from polybus.wire.framing import FrameDecoder
from polybus.wire.messages import (
    Batch,
    BatchResult,
    Call,
    CallBatch,
    Deliver,
    Fail,
    Fetched,
    Message,
    Put,
    Result,
    Stats,
)
from polybus.wire.undecodable import HINT, Refusal, RefusedRows

GHOST = msgspec.msgpack.Ext(EXT_PICKLE, b"cghost_module\nGhost\n)R.")


def received(msg: Message, *, small: bool = False, pickle: bool = True) -> Any:
    """``msg`` sent by a codec (a pickling one unless ``pickle`` is false) and decoded by
    another, through the frame decoder (``small``: by decode_header, the no-buffer path
    the channels take). test_wire_map_keys.py uses it too."""
    pieces = Codec(allow_pickle=pickle).encode(msg)
    d = FrameDecoder()
    d.feed(b"".join(bytes(memoryview(p).cast("B")) for p in pieces))
    dec = Codec(allow_pickle=pickle)
    if small:
        header = d.next_small()
        assert header is not None
        return dec.decode_header(header)
    frame = d.next_frame()
    assert frame is not None
    return dec.decode(frame)


@pytest.mark.parametrize("small", [False, True], ids=["frame", "header"])
def test_an_answer_that_does_not_unpickle_is_that_call_failing(small: bool) -> None:
    out = received(Result(7, {"x": [1, GHOST]}), small=small)
    assert isinstance(out, Fail) and out.id == 7 and out.kind == "undecodable"
    assert out.type == "ModuleNotFoundError"
    assert out.message == ("its answer could not be unpickled in the client: No module "
                           f"named 'ghost_module'; {HINT}")


def test_a_batch_of_answers_fails_only_the_slot_that_did_not_unpickle() -> None:
    ok = Fail(0, "exception", "ValueError", "its own")
    out = received(BatchResult(3, [None, 2, GHOST, 4], [ok]))
    assert isinstance(out, BatchResult) and out.id == 3
    assert out.values == [None, 2, None, 4]
    assert out.fails[0] == ok and len(out.fails) == 2
    assert out.fails[1].id == 2 and out.fails[1].kind == "undecodable"


def test_a_call_with_an_argument_that_does_not_unpickle_is_refused_with_its_answer() -> None:
    out = received(Call(5, "f", [1, GHOST]))
    assert isinstance(out, Refusal) and out.answer is not None
    assert out.answer.id == 5 and out.answer.kind == "bad-call"
    assert out.answer.message.startswith("an argument of this call could not be unpickled "
                                         "on the replica: No module named 'ghost_module'")
    assert out.reason == out.answer.message


def test_an_aggregated_batch_runs_but_for_the_calls_that_did_not_unpickle() -> None:
    out = received(CallBatch(6, "f", [[1], [GHOST], [3, {"k": GHOST}]], 2.0))
    assert isinstance(out, RefusedRows) and isinstance(out, CallBatch)
    assert (out.id, out.iface, out.prio) == (6, "f", 2.0)
    assert out.args == [[1], [], []] and sorted(out.refused) == [1, 2]
    assert all(f.id == i and f.kind == "bad-call" for i, f in out.refused.items())


def test_a_batch_keeps_its_good_items() -> None:
    out = received(Batch([Call(1, "f", [1]), Call(2, "f", [GHOST]), Result(3, 3)]))
    assert isinstance(out, Batch) and len(out.items) == 3
    assert out.items[0] == Call(1, "f", [1]) and out.items[2] == Result(3, 3)
    refused = out.items[1]
    assert isinstance(refused, Refusal) and refused.answer is not None
    assert refused.answer.id == 2


def test_forwarded_values_and_operands_fail_with_the_reason() -> None:
    out = received(Deliver("k", True, GHOST))
    assert isinstance(out, Deliver) and out.key == "k" and out.ok is False
    kind, message, _ = out.value
    assert kind == "ModuleNotFoundError"
    assert message.startswith("the forwarded value could not be unpickled on the consumer's")
    out = received(Fetched(9, True, [GHOST]))
    assert isinstance(out, Fetched) and out.req == 9 and out.ok is False
    assert "ghost_module" in out.value[1]
    out = received(Put("abcdef0123456789", GHOST))
    assert isinstance(out, Refusal) and out.answer is None
    assert "operand abcdef012345 could not be unpickled" in out.reason


def test_a_broken_pickle_fails_its_message_alike() -> None:
    broken = msgspec.msgpack.Ext(EXT_PICKLE, b"\x80\x05not a pickle")
    out = received(Result(1, broken))
    assert isinstance(out, Fail) and out.kind == "undecodable"


def test_a_pickle_where_no_program_value_goes_is_still_a_protocol_error() -> None:
    # Stats carries no program values: a pickle in place of its name is malformed.
    msg = Stats("w", 1, 0.0, 0.0, 0, 0)
    raw = msgspec.msgpack.encode(msg)
    spliced = raw.replace(msgspec.msgpack.encode("w"), msgspec.msgpack.encode(GHOST), 1)
    with pytest.raises(ProtocolError, match="malformed message: Expected `str`, got `ext`"):
        Codec(allow_pickle=True).decode_header(spliced)


def test_without_pickle_enabled_a_pickle_is_refused_as_before() -> None:
    with pytest.raises(ProtocolError, match="pickle is not enabled"):
        Codec().decode_header(Codec(allow_pickle=True).encode(Result(1, GHOST))[0][12:])
