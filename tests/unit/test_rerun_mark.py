"""A call sent again after a replica that held it was lost carries ``again`` on the
wire (wire/messages.py `Call`): its replica then writes every answer it holds before
running it, and writes its answer at once (worker/runtime.py). A first send never
carries it, nor does a move (a call given back or migrated is not counted as lost).
A real Dispatcher over fake links, no network."""

from __future__ import annotations

from typing import Any

import pytest
from test_lost_suspicion import _Reactor as _Recording  # tests/unit

from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.giveback import place_again
from polybus.config.model import CallStyle
from polybus.errors import ConnectionLostError
from polybus.wire.codec import Codec
from polybus.wire.messages import Call


class _Reactor(_Recording):
    """Records the messages written (test_lost_suspicion's records their ids)."""

    def send(self, link: ReplicaLink, msg: Any) -> None:
        self.sent.append((link.name, msg))  # type: ignore[arg-type]

    hold = send


STYLES = [CallStyle("async"), CallStyle("async-demand", 4), CallStyle("async-demand", 1)]


@pytest.mark.parametrize("style", STYLES)
def test_a_call_sent_again_after_a_loss_is_marked_and_a_first_send_is_not(
        style: CallStyle) -> None:
    links = [ReplicaLink(f"r{i}", "server", channel=None) for i in range(3)]  # type: ignore[arg-type]
    reactor = _Reactor()
    d = Dispatcher("f", reactor, links, style)  # type: ignore[arg-type]
    recs: list[CallRecord] = []
    for x in range(6):
        p = d.call_async((x,), {}) if d.plain_async else d((x,), {})
        reactor.promises.append(p)
        recs.append(p._rec)
    first = [m for _, m in reactor.sent]
    assert first and all(type(m) is Call and m.again is False for m in first), first
    held = {r.id for r in recs if r.link is links[0]}
    assert held
    links[0].dead = True
    d.lost(links[0], ConnectionLostError("r0 is gone"))
    # Every call answers (the backlog refilling as the session's after-step does):
    # those lost with r0 are written again marked, every other call's first send not.
    while live := [(lk, r) for lk in links[1:] for r in list(lk.outstanding.values())]:
        link, rec = live[0]
        del link.outstanding[rec.id]
        assert rec.set_value(rec.id)
        d.completed(rec, link)
        d.refill()
    assert [r.value for r in recs] == [r.id for r in recs]
    sent = [m for _, m in reactor.sent]
    assert all(type(m) is Call for m in sent), sent
    assert sorted(m.id for m in sent) == sorted([r.id for r in recs] + list(held))
    assert {m.id for m in sent if m.again} == held, sent
    assert len([m for m in sent if m.again]) == len(held)  # (each once, marked)


# Call(7, "f", [1]) as a peer that knows no ``again`` sends it (eight elements).
OLDER = (b"\x98\x01\x07\xa1f\x91\x01\xc0\xcb" + bytes(8) + b"\xcb" + bytes(8) + b"\xc0")


def test_the_mark_is_one_trailing_field_an_older_peer_can_leave_out() -> None:
    codec = Codec()
    plain = b"".join(bytes(p) for p in codec.encode(Call(7, "f", [1])))
    marked = b"".join(bytes(p) for p in codec.encode(Call(7, "f", [1], again=True)))
    # One byte more than before the field came (msgpack false, the array still a
    # fixarray), the same either way: false or true.
    assert plain[12:] == b"\x99" + OLDER[1:] + b"\xc2"
    assert marked[12:] == b"\x99" + OLDER[1:] + b"\xc3"
    assert codec.decode_lone(marked) == Call(7, "f", [1], again=True)
    assert codec.decode_lone(plain) == Call(7, "f", [1])
    # From an older peer: not marked.
    older = Codec().encode(Call(7, "f", [1]))  # (its frame head, the older header in it)
    head = bytearray(b"".join(bytes(p) for p in older)[:12])
    head[0:4] = (len(OLDER) + 8).to_bytes(4, "little")
    head[8:12] = len(OLDER).to_bytes(4, "little")
    assert codec.decode_lone(bytes(head) + OLDER) == Call(7, "f", [1], again=False)


@pytest.mark.parametrize("style", STYLES)
def test_a_call_given_back_unrun_is_placed_again_unmarked(style: CallStyle) -> None:
    # (a Steal's or a Revoke's: client/giveback.py; a move is not a lost attempt)
    links = [ReplicaLink(f"r{i}", "server", channel=None) for i in range(2)]  # type: ignore[arg-type]
    reactor = _Reactor()
    d = Dispatcher("f", reactor, links, style)  # type: ignore[arg-type]
    p = d.call_async((1,), {}) if d.plain_async else d((1,), {})
    reactor.promises.append(p)
    rec: CallRecord = p._rec
    link = rec.link
    assert link is not None and d.uncount(rec, link)  # (given back: the caller's part)
    reactor.sent.clear()
    place_again(link, [rec])
    d.refill()
    assert [(m.id, m.again) for _, m in reactor.sent] == [(rec.id, False)]
    assert rec.attempts == 1


class _Interrupted(_Reactor):
    """Its first write of a call sent again raises KeyboardInterrupt (nothing written)."""

    armed = False

    def send(self, link: ReplicaLink, msg: Any) -> None:
        if self.armed and type(msg) is Call and msg.again:
            self.armed = False
            raise KeyboardInterrupt
        super().send(link, msg)

    hold = send


def _one_call_lost(reactor: _Reactor, replicas: int) -> tuple[Dispatcher, CallRecord, ReplicaLink]:
    """An async-demand(1) binding over ``replicas`` fake links, one call made on it, and
    the replica that held it dead (not yet told to the binding: the caller's `lost`)."""
    links = [ReplicaLink(f"r{i}", "server", channel=None) for i in range(replicas)]  # type: ignore[arg-type]
    d = Dispatcher("f", reactor, links, CallStyle("async-demand", 1))  # type: ignore[arg-type]
    p = d((1,), {})
    reactor.promises.append(p)
    rec: CallRecord = p._rec
    assert rec.link is not None
    rec.link.dead = True
    return d, rec, rec.link


def test_each_call_sent_again_is_counted_once_even_if_a_write_was_cut_short() -> None:
    # (backlog.refill takes back a placement whose write a BaseException cut short: its
    # attempt, and the run-again count with it, else counted twice)
    reactor = _Interrupted()
    d, rec, lost = _one_call_lost(reactor, 2)
    reactor.armed = True
    with pytest.raises(KeyboardInterrupt):
        d.lost(lost, ConnectionLostError(f"{lost.name} is gone"))
        d.refill()
    d.refill()
    assert [(m.id, m.again) for _, m in reactor.sent][-1] == (rec.id, True)
    assert d.counts.run_again == 1 and rec.attempts == 2


def test_a_call_sent_again_then_given_back_is_counted_as_sent_again_once() -> None:
    # (a give-back takes its attempt back, as the next placement counts one: the
    # run-again count with it, or a call lost once and then moved counted twice)
    d, rec, first = _one_call_lost(_Reactor(), 3)
    d.lost(first, ConnectionLostError(f"{first.name} is gone"))
    d.refill()
    again = rec.link
    assert again is not None and again is not first and d.counts.run_again == 1
    assert d.uncount(rec, again)  # (given back unrun by a Steal or a Revoke)
    place_again(again, [rec])
    d.refill()
    assert rec.link is not None and d.counts.run_again == 1 and rec.attempts == 2
