"""Forwarding messages from a broken peer, at a live replica over loopback TCP: each
fails what it names alone, and the connection serves on.

A failed `Deliver` whose value is not the [type, message, traceback] texts every sender
writes: the call held for it fails with a message saying what came. The replica made a
text of the value with `str()`: a numpy str array holding a code point past U+10FFFF
(bytes any peer can send) raised SystemError there, the connection was dropped with
"the replica failed reading this connection" and a traceback of polybus's own steps in
the log; other values (an int, a list of numbers) failed the call under a type such as
`1`. A `Keep` release naming the empty key: below.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from polybus.testing.peers import next_message
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec, Ref
from polybus.wire.messages import Call, Deliver, Fail, Keep, Result
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"fwd-bad-failure-token-0123456789"
# A str array whose one element is the code point 0xFFFFFFFF: its str() raises SystemError.
NOT_UNICODE = np.frombuffer(b"\xff\xff\xff\xff", dtype="<U1")


@pytest.fixture
def worker() -> Iterator[WorkerRuntime]:
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN).start()
    try:
        yield rt
    finally:
        rt.stop()


@pytest.mark.parametrize("value", [NOT_UNICODE, [NOT_UNICODE, "m", "t"], 5, [1, 2, 3], ["T"]],
                         ids=["array", "array-in-list", "int", "numbers", "short"])
def test_a_failure_in_another_form_fails_the_held_call_and_the_connection_serves_on(
        worker: WorkerRuntime, caplog: pytest.LogCaptureFixture, value: Any) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    ch = connect(str(worker.address), TOKEN, Codec())
    try:
        ch.send(Deliver("k1", False, value))
        ch.send(Call(1, "echo", [Ref("fwd", "k1")]))
        got = next_message(ch, 5, closed="closed")
        assert isinstance(got, Fail), got
        assert got.message.startswith("an upstream call failed: "), got
        if type(value) is list and value == ["T"]:  # (a shorter list of texts is taken, its missing parts empty)
            assert (got.type, got.message, got.traceback) == (
                "T", "an upstream call failed: ", "")
        else:
            assert got.type == "ProtocolError", got
            assert "not [type, message, traceback]" in got.message, got
        ch.send(Call(2, "echo", [3]))  # the same connection
        assert next_message(ch, 5, closed="closed") == Result(2, 3)
    finally:
        ch.close()
    assert "failed reading this connection" not in caplog.text
    assert "Traceback" not in caplog.text


def test_a_release_naming_the_empty_key_for_a_call_never_seen_is_taken_quietly(
        worker: WorkerRuntime, caplog: pytest.LogCaptureFixture) -> None:
    """`Keep(id, pkey, "", release=True)` for a call id the replica never saw: the
    look-up of that call's sized Keep defaulted to a key of "", matched the empty key
    and deleted an entry that was not there (KeyError): the connection was dropped
    with a traceback of polybus's own steps in the log."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    ch = connect(str(worker.address), TOKEN, Codec())
    try:
        ch.send(Keep(5, "p", "", release=True))
        ch.send(Call(2, "echo", [3]))
        assert next_message(ch, 5, closed="closed") == Result(2, 3)
    finally:
        ch.close()
    assert "failed reading this connection" not in caplog.text
    assert "Traceback" not in caplog.text
