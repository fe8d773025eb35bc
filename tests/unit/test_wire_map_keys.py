"""A dict key the receiver cannot make a key (it went as a map: a dataclass, a Struct or
a dict as the key) fails its own message, not the connection (wire/undecodable.py
`salvage`). Before, the replica took the frame for malformed and closed the connection;
the client ran the call again on the next replica, which did the same: one argument cut
the client off from every replica of the module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from test_wire_undecodable import received as pickled_or_not  # tests/unit

from polybus.errors import ProtocolError
from polybus.wire.codec import Codec
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
from polybus.wire.undecodable import KEY_HINT, Refusal, RefusedRows


@dataclass(frozen=True)
class Key:
    x: int


BAD = {Key(1): "v"}  # (hashable here; a map, so no key, once decoded)


def received(msg: Message, *, small: bool = False) -> Any:
    """``msg`` through a plain codec and the frame decoder (test_wire_undecodable.py)."""
    return pickled_or_not(msg, small=small, pickle=False)


def _says(message: str, what: str) -> None:
    assert message.startswith(f"{what}: a dict key arrived as a map or a reference"), message
    assert message.endswith(KEY_HINT), message


@pytest.mark.parametrize("small", [False, True], ids=["frame", "header"])
def test_a_call_with_such_a_key_is_refused_with_its_answer(small: bool) -> None:
    out = received(Call(3, "f", [1], {"k": [BAD]}), small=small)
    assert isinstance(out, Refusal) and isinstance(out.answer, Fail)
    assert (out.answer.id, out.answer.kind, out.answer.type) == (3, "bad-call", "TypeError")
    _says(out.answer.message, "an argument of this call could not be decoded on the replica")


def test_an_answer_with_such_a_key_is_that_call_failing() -> None:
    out = received(Result(7, [1, BAD]))
    assert isinstance(out, Fail) and (out.id, out.kind) == (7, "undecodable")
    _says(out.message, "its answer could not be decoded in the client")


def test_batches_fail_only_the_calls_and_answers_that_carry_one() -> None:
    rows = received(CallBatch(9, "f", [[1], [BAD], [3]]))
    assert isinstance(rows, RefusedRows) and rows.args == [[1], [], [3]]
    assert list(rows.refused) == [1] and rows.refused[1].kind == "bad-call"
    answers = received(BatchResult(9, [1, BAD, 3], [Fail(0, "exception", "E", "its own")]))
    assert isinstance(answers, BatchResult) and answers.values == [1, None, 3]
    assert [(f.id, f.kind) for f in answers.fails] == [(0, "exception"), (1, "undecodable")]
    mixed = received(Batch([Call(1, "f", [1]), Call(2, "f", [BAD]), Result(3, 4)]))
    assert isinstance(mixed, Batch)
    good, refused, answer = mixed.items
    assert good == Call(1, "f", [1]) and answer == Result(3, 4)
    assert isinstance(refused, Refusal) and refused.answer is not None
    assert refused.answer.id == 2


def test_forwarded_values_and_operands_fail_with_the_reason() -> None:
    put = received(Put("k" * 32, BAD))
    assert isinstance(put, Refusal) and put.answer is None
    assert "could not be decoded on the replica (not cached)" in put.reason
    deliver = received(Deliver("k", True, BAD))
    assert isinstance(deliver, Deliver) and not deliver.ok and deliver.value[0] == "TypeError"
    fetched = received(Fetched(5, True, BAD))
    assert isinstance(fetched, Fetched) and not fetched.ok
    _says(fetched.value[1], "the forwarded value could not be decoded in the client")


def test_a_message_that_carries_no_program_value_is_still_a_protocol_error() -> None:
    # (a map key that is a map where only polybus's own fields go: broken, not the program's)
    enc = msgspec.msgpack.Encoder()
    raw = enc.encode([9, 1.0, 0, {Key(1): 1}])  # (a Stats, tag 9, shaped wrong)
    with pytest.raises(ProtocolError, match="malformed"):
        Codec().decode_header(raw)
    assert Stats.__struct_config__.tag == 9


def test_a_key_that_decodes_as_a_key_still_goes() -> None:
    value = {(1, 2): "tuple", b"ab": "bytes", 1.5: "float", None: "none", True: "bool"}
    assert received(Result(1, value)) == Result(1, value)
