"""A priority reading a container of unanswered promises says it waited only if it did
(client/fwdprio.py).

Whether it waited was read from the promises' state, looked at before the priority
and again after: a promise answered meanwhile by another thread (the pump, another
program thread), which the priority did not wait for (``len(xs)`` reads no value),
made it say, once, that the priority waited for a value among them. Here the stub's
priority has "another thread" answer the promise while it runs, at the very point
between the two looks.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from polybus.client import fwdprio
from polybus.client.batchcalls import BatchPromise
from polybus.client.calls import _PENDING
from polybus.client.promise import CallPromise


class Binding:
    """What fwdprio reads of a Dispatcher: its interface and its priority (with the
    parameters the priority reads), and, as a promise's, whether it forwards."""

    def __init__(self, priority: Any) -> None:
        self.interface = "inner"
        self.priority = priority
        self.forwards_answers = True
        self.timeout = None


class Record:
    """A call's record, unanswered."""

    def __init__(self, d: Binding) -> None:
        self.dispatcher = d
        self.value: Any = _PENDING
        self.error = None

    @property
    def done(self) -> bool:
        return self.value is not _PENDING or self.error is not None


class Reactor:
    """A wait answers the record with 2.0 (its value came to the client)."""

    def wait(self, rec: Record, timeout: Any) -> Any:
        rec.value = 2.0
        return rec.value


def priority(expr: Any) -> Any:
    def prio(args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
        return float(expr(args[0]))

    prio.reads = lambda args, kwargs: [("xs", args[0])]  # type: ignore[attr-defined]
    prio.source = "the test's"  # type: ignore[attr-defined]
    return prio


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "priority" in r.getMessage()]


class Batch:
    """An aggregated call's batch (what a BatchPromise reads of its Pending),
    unanswered; its run ended, so a wait goes straight to the reactor."""

    __polybus_promise_inside__ = True  # (as Pending: what a probe of the list meets)

    def __init__(self) -> None:
        self.batcher = self
        self.d = Binding(None)  # (its binding: answers may be forwarded)
        self.reactor = BatchReactor()
        self.reactor.closed = True
        self.timeout = None
        self.done = self.clean = False
        self.late = self.error = self.fails = None
        self.values: list[Any] = []

    def answer(self) -> None:
        self.values, self.done, self.clean = [2.0], True, True


class BatchReactor:
    def wait(self, slot: Any, timeout: Any) -> Any:
        slot.batch.answer()
        return 2.0


def promise(kind: str) -> tuple[Any, Any]:
    """An unanswered promise of a binding whose answers may be forwarded, and a function
    that answers it by value (as a thread that reads the answer does)."""
    if kind == "call":
        rec = Record(Binding(None))
        return CallPromise(rec, Reactor()), lambda: setattr(rec, "value", 2.0)  # type: ignore[arg-type]
    b = Batch()
    return BatchPromise(b, 0), b.answer  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["call", "batch"])
def test_a_promise_answered_by_another_thread_meanwhile_is_not_said_waited_for(
        caplog: pytest.LogCaptureFixture, kind: str) -> None:
    p, answer = promise(kind)

    def length(xs: list[Any]) -> int:  # len(xs): no value read; meanwhile the answer
        answer()  # came, by value, read by another thread
        return len(xs)

    d = Binding(priority(length))
    with caplog.at_level(logging.WARNING, logger="polybus.client"):
        assert fwdprio.priority_of(d, ([p, 3],), {}, forwards=True) == 2.0  # type: ignore[arg-type]
    assert p.done  # (answered between the looks: the race)
    assert said(caplog) == []


@pytest.mark.parametrize("kind", ["call", "batch"])
def test_a_priority_that_waits_for_a_promise_in_a_list_says_so(
        caplog: pytest.LogCaptureFixture, kind: str) -> None:
    d = Binding(priority(lambda xs: xs[0] + 1))  # reads the first promise's value
    p, _ = promise(kind)
    with caplog.at_level(logging.WARNING, logger="polybus.client"):
        assert fwdprio.priority_of(d, ([p, 3],), {}, forwards=True) == 3.0  # type: ignore[arg-type]
    (text,) = said(caplog)
    assert "the client waited for a value among them to compute the priority" in text, text
