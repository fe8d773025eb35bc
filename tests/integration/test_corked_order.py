"""Answers corked (worker/replies.py): small ones only, and in the order their calls ran.

A replica writes the answers of tiny calls together while more calls wait. The answer of
the call that emptied the queue was written at once, before the corked answers of the
calls that ran ahead of it, and a thread that wrote corked answers could be overtaken by
another writing those corked after them: a pool-1 replica's answers then came out of
the order its calls ran in (found by a stress run: answer 23 before answers 1 to 22).
And a tiny call's answer was corked whatever its size: 1 MiB answers went 22 to a frame,
which the client had to take whole before any of them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from polybus.testing.peers import next_message
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"corked-order-token-0123456789abcd"


BIG = bytes(1 << 20)


class Ran:
    """Tiny functions that record the order their calls ran in."""

    def __init__(self) -> None:
        self.order: list[int] = []
        self.lock = threading.Lock()

    def echo(self, i: int) -> int:
        with self.lock:
            self.order.append(i)
        return i

    def big(self, i: int) -> bytes:
        self.echo(i)
        return BIG  # (made once: the call is as tiny as echo's)


@pytest.fixture
def served() -> Iterator[tuple[WorkerRuntime, Ran]]:
    ran = Ran()
    rt = WorkerRuntime("w", {"echo": ran.echo, "big": ran.big}, TOKEN, options=ServeOptions(pool=1)).start()
    try:
        yield rt, ran
    finally:
        rt.stop(grace=0.5)


def test_a_pool_of_one_answers_in_the_order_its_calls_ran(
        served: tuple[WorkerRuntime, Ran]) -> None:
    rt, ran = served
    ch = connect(rt.address, TOKEN, Codec())
    try:
        for burst in range(5):  # (each burst queues, its answers cork)
            ids = range(burst * 100, burst * 100 + 100)
            ch.send_many([Call(i, "echo", [i]) for i in ids])
            wire: list[int] = []
            while len(wire) < len(ids):
                msg = next_message(ch, limit=10)
                assert msg is not None, f"burst {burst}: answers {wire} only"
                for m in msg.items if isinstance(msg, Batch) else [msg]:
                    assert isinstance(m, Result) and m.value == m.id, m
                    wire.append(m.id)
            assert ran.order[-len(ids):] == list(ids)  # (one thread: run as they came)
            assert wire == list(ids), f"burst {burst}: answers came in the order {wire}"
    finally:
        ch.close()


def test_large_answers_of_tiny_calls_are_not_corked(served: tuple[WorkerRuntime, Ran]) -> None:
    rt, ran = served
    ch = connect(rt.address, TOKEN, Codec())
    n = 24
    try:
        ch.send_many([Call(i, "echo", [i]) for i in range(50)])  # (tiny: corked)
        ch.send_many([Call(i, "big", [i]) for i in range(50, 50 + n)])
        frames: list[list[int]] = []  # the answers' ids, frame by frame
        while sum(map(len, frames)) < 50 + n:
            msg = next_message(ch, limit=10)
            assert msg is not None, f"answers {frames} only"
            items = msg.items if isinstance(msg, Batch) else [msg]
            for m in items:
                assert isinstance(m, Result), m
                assert m.value == (BIG if m.id >= 50 else m.id), m.id
            frames.append([m.id for m in items])  # type: ignore[attr-defined]
        assert ran.order == [i for f in frames for i in f] == list(range(50 + n)), frames
        # No frame carries two large answers (the first may go with the tiny ones corked
        # before it, in one write).
        assert all(len([i for i in f if i >= 50]) == 1 for f in frames if max(f) >= 50), frames
    finally:
        ch.close()
