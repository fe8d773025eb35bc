"""What is asked of a call held to be written with the next ones (a Forward of its
value) goes right after the held calls, whenever they are written: asking wrote the
held calls at once, so a pipeline's middle stage (aggregated, its promises passed on)
had every call written alone (tests/integration/test_forward_aggregated_middle.py)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.forward import Forwarder
from polybus.client.fwdbatch import ask
from polybus.client.sending import Sending
from polybus.wire.messages import Batch, Call, Forward, Message


class Wire(Sending):
    """A reactor's sending half that records what it writes, one list per write."""

    def __init__(self) -> None:
        self.writes: list[list[Message]] = []

    def send(self, link: ReplicaLink, msg: Message) -> None:
        self.writes.append([msg])

    def send_many(self, link: ReplicaLink, msgs: list[Message]) -> None:
        self.writes.append(list(msgs))


def _setup() -> tuple[Wire, ReplicaLink, Forwarder, list[Any]]:
    wire = Wire()
    link = ReplicaLink("smoother-0", "smoother", cast(Any, None))
    recs = []
    for cid in (1, 2):
        rec = SimpleNamespace(id=cid, done=False, link=link)
        link.held.append(Call(cid, "smooth", [cid]))
        recs.append(rec)
    return wire, link, cast(Forwarder, SimpleNamespace(reactor=wire)), recs


def _forward(cid: int) -> Callable[[], Message]:
    return lambda: Forward(cid, f"p.{cid}", f"k.{cid}", "tcp://127.0.0.1:1")


def test_a_held_calls_forward_waits_for_them_and_follows_them() -> None:
    wire, link, f, recs = _setup()
    ask(f, cast(CallRecord, recs[0]), link, _forward(1))
    assert wire.writes == [] and len(link.held) == 2  # (it wrote the held call alone)
    link.held.append(Call(3, "smooth", [3]))  # (the next call of the stage joins them)
    wire.flush(link)
    assert len(wire.writes) == 1
    batch, fwd = wire.writes[0]
    assert type(batch) is Batch and [c.id for c in batch.items] == [1, 2, 3]
    assert fwd == _forward(1)()
    assert link.trail == [] and link.held == []


def test_a_call_not_held_is_asked_at_once() -> None:
    wire, link, f, recs = _setup()
    link.held = [m for m in link.held if m.id != 2]  # (call 2 was written already)
    ask(f, cast(CallRecord, recs[1]), link, _forward(2))
    assert wire.writes == [[_forward(2)()]] and link.held == [Call(1, "smooth", [1])]


def test_nothing_is_asked_of_a_held_call_that_ended_before_it_was_written() -> None:
    wire, link, f, recs = _setup()
    ask(f, cast(CallRecord, recs[0]), link, _forward(1))
    ask(f, cast(CallRecord, recs[1]), link, _forward(2))
    recs[0].done = True  # (cancelled, say)
    link.held = link.held[1:]
    wire.flush(link)
    assert wire.writes == [[Call(2, "smooth", [2]), _forward(2)()]]
