"""What is asked of a call held to be written with the next ones (a Forward of its
value) goes right after the held calls, whenever they are written: asking wrote the
held calls at once, so a pipeline's middle stage (aggregated, its promises passed on)
had every call written alone (tests/integration/test_forward_aggregated_middle.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from polybus.client import fwdbatch
from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.forward import Forwarder
from polybus.client.fwdbatch import ask
from polybus.client.sending import Sending
from polybus.wire.messages import Batch, Call, Forward, Keep, Message


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


def test_a_release_asked_of_a_held_call_goes_after_its_keep() -> None:
    # A consumer waiting at the client had the held producer's replica asked to keep
    # the value (Keep, trailing the held calls); it ended unplaced, so the Keep is
    # released. A release written at once, before the Keep, released nothing there,
    # and the Keep then pinned the value for a consumer that never comes.
    wire, link, f, recs = _setup()
    keep = Keep(1, "p.1", "k.1")
    release = Keep(1, "p.1", "k.1", release=True)
    ask(f, cast(CallRecord, recs[0]), link, lambda: keep)
    ask(f, cast(CallRecord, recs[0]), link, lambda: release)  # (a release)
    wire.flush(link)
    assert wire.writes == [[Batch([Call(1, "smooth", [1]), Call(2, "smooth", [2])]),
                            keep, release]]


class _SpyLink(ReplicaLink):
    """A link whose lock (if it has one) says when a thread other than the asking one
    comes to take it."""

    asker: int = 0

    def spy(self, trying: threading.Event) -> None:
        inner = getattr(self, "lock", None)
        if inner is None:
            return
        link = self

        class Spy:
            def __enter__(self) -> None:
                if threading.get_ident() != link.asker:
                    trying.set()
                inner.__enter__()

            def __exit__(self, *exc: object) -> None:
                inner.__exit__(*exc)

        self.lock = Spy()  # type: ignore[assignment]


def test_a_flush_on_another_thread_while_asking_leaves_nothing_unwritten(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The held calls are written by another program thread (its wait, or a read filing
    # an answer that writes) just after the ask saw its call held: the request must go
    # with them or after them, not wait for a next flush that may never come (its
    # consumer, placed, would wait for ever).
    wire = Wire()
    link = _SpyLink("smoother-0", "smoother", cast(Any, None))
    rec = SimpleNamespace(id=1, done=False, link=link)
    link.held.append(Call(1, "smooth", [1]))
    trying = threading.Event()
    link.asker = threading.get_ident()
    link.spy(trying)
    flusher = threading.Thread(target=wire.flush, args=(link,), daemon=True)
    real = fwdbatch._held

    def looked_then_flushed(lk: ReplicaLink, cid: int) -> bool:
        out = real(lk, cid)
        flusher.start()  # (it ends, or comes to the link's lock and waits)
        while flusher.is_alive() and not trying.wait(0.01):
            pass
        return out

    monkeypatch.setattr(fwdbatch, "_held", looked_then_flushed)
    f = cast(Forwarder, SimpleNamespace(reactor=wire))
    try:
        ask(f, cast(CallRecord, rec), link, _forward(1))
    finally:
        flusher.join()
    assert [m for w in wire.writes for m in w] == [Call(1, "smooth", [1]), _forward(1)()]
    assert link.trail == [] and link.held == []
