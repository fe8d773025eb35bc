"""`to_finish`: whether a replica's inline paths must hand an answer to
`Forwarding.finished` (worker/direct.py, worker/socketserve.py skip its call otherwise).

A large value (bytes, bytearray or an array of FORWARD_MIN or more) must go through it
(`WorkerRuntime.heed`: it waits for its client's requests); so must every answer while
requests wait or queued calls were taken. A small or plain value, nothing asked, need not:
`finished` would return it as it is, which the last test checks.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import numpy as np
import pytest

from polybus.transport.channel import Channel
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Fail, Result
from polybus.worker.forwarding import FORWARD_MIN, Forwarding, to_finish
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"t" * 32


@pytest.fixture
def fw() -> Iterator[Forwarding]:
    rt = WorkerRuntime("w", {"f": lambda x: x}, TOKEN)
    try:
        yield rt.forwarding
    finally:
        rt.stop()


@pytest.mark.parametrize("value", [
    b"x" * FORWARD_MIN, bytearray(FORWARD_MIN), np.zeros(FORWARD_MIN, dtype=np.uint8)])
def test_a_large_value_goes_through_finished(fw: Forwarding, value: object) -> None:
    assert to_finish(fw, Result(1, value))


@pytest.mark.parametrize("value", [
    b"", b"x" * (FORWARD_MIN - 1), bytearray(3), np.zeros(FORWARD_MIN // 8 - 1), 7, "s",
    [b"x" * FORWARD_MIN]])
def test_a_small_or_plain_value_with_nothing_asked_does_not(fw: Forwarding, value: object) -> None:
    assert not to_finish(fw, Result(1, value))


def test_a_failure_with_nothing_asked_does_not(fw: Forwarding) -> None:
    assert not to_finish(fw, Fail(1, "exception", "ValueError", "boom"))


def test_every_answer_goes_through_while_requests_wait_or_calls_were_taken(
        fw: Forwarding) -> None:
    fw.asks.counts[1] = 1  # a request waiting on one connection (`waiting` is this map)
    assert to_finish(fw, Result(1, 7))
    assert to_finish(fw, Fail(1, "exception", "ValueError", "boom"))
    fw.asks.counts.clear()
    fw._took[(1, 2)] = ["k"]
    assert to_finish(fw, Result(1, b""))


@pytest.mark.parametrize("value", [b"", 7, np.zeros(3)])
def test_finished_returns_what_to_finish_skips_unchanged(fw: Forwarding, value: object) -> None:
    a, b = socket.socketpair()
    try:
        reply = Result(1, value)
        assert not to_finish(fw, reply)
        assert fw.finished(Channel(a, Codec(), "c"), Call(1, "f", [value]), reply) is reply
    finally:
        a.close()
        b.close()
