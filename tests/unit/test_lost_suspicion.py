"""Calls lost with a dead replica, counted as suspects (client/backlog.py `lost` and
`refill`; a real Dispatcher over fake links, no network): lost once, a call runs again
beside the others, as any call is placed; lost twice, alone on a replica that holds
nothing else of its interface; lost while alone, it fails with PoisonCallError. A call
that kills every replica that runs it costs 3 replicas, and no call beside it is blamed.

Before this rule every lost call was re-run alone: a replica's death left its calls to
run one after another on the survivors, however idle (a trial saw 10 calls of 2 s take
22 s on a replica with 20 handlers)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.config.model import CallStyle
from polybus.errors import ConnectionLostError, PoisonCallError


class _Reactor:
    """Records what is written; nothing is read (the test answers and kills by hand)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []  # (replica, call id)
        self.promises: list[Any] = []  # (kept: an error no promise is left for is warned of)
        self.gate = None

    def send(self, link: ReplicaLink, msg: Any) -> None:
        self.sent.append((link.name, msg.id))

    hold = send

    def send_many(self, link: ReplicaLink, msgs: list[Any]) -> None:
        for m in msgs:
            self.send(link, m)

    def work_left(self) -> None:
        pass

    def poll(self, batches: bool = True) -> None:
        pass

    def step(self) -> None:
        pass


def _dispatcher(n: int, style: CallStyle) -> tuple[Dispatcher, list[ReplicaLink], _Reactor]:
    links = [ReplicaLink(f"r{i}", "server", channel=None) for i in range(n)]  # type: ignore[arg-type]
    reactor = _Reactor()
    return Dispatcher("f", reactor, links, style), links, reactor  # type: ignore[arg-type]


def _call(d: Dispatcher, x: int) -> CallRecord:
    p = d.call_async((x,), {}) if d.plain_async else d((x,), {})
    d.reactor.promises.append(p)  # type: ignore[attr-defined]
    rec: CallRecord = p._rec
    return rec


def _answer(d: Dispatcher, link: ReplicaLink, rec: CallRecord) -> None:
    """``link`` answers ``rec`` (as Reactor._handle files a Result), then the backlog
    refills (as the session's after-step does)."""
    assert link.outstanding.pop(rec.id) is rec
    assert rec.set_value(rec.id)
    d.completed(rec, link)
    d.refill()


def _kill(d: Dispatcher, link: ReplicaLink) -> None:
    link.dead = True
    d.lost(link, ConnectionLostError(f"{link.name} is gone"))


def _poisoned(rec: CallRecord) -> bool:
    """``rec`` failed with PoisonCallError (looked at, as a program would)."""
    with pytest.raises(PoisonCallError):
        rec.outcome()
    return True


def _on(links: list[ReplicaLink], rec: CallRecord) -> str:
    (name,) = [lk.name for lk in links if rec.id in lk.outstanding]
    return name


@pytest.mark.parametrize("style", [CallStyle("async"), CallStyle("async-demand", 4)])
def test_calls_lost_once_run_again_at_once_beside_the_others(style: CallStyle) -> None:
    d, links, reactor = _dispatcher(3, style)
    recs = [_call(d, x) for x in range(6)]  # two on each replica
    r0 = links[0]
    lost = sorted(r0.outstanding)
    assert len(lost) == 2
    reactor.sent.clear()
    _kill(d, r0)
    # Both written at once, to replicas that hold other calls: none waits for another.
    assert sorted(i for _, i in reactor.sent) == lost
    assert all(name != "r0" for name, _ in reactor.sent)
    assert not d._isolated and not d.backlogged
    assert d._suspects == dict.fromkeys(lost, 1)
    for rec in recs:  # every call answers; no suspect is left behind
        _answer(d, next(lk for lk in links if rec.id in lk.outstanding), rec)
    assert [r.value for r in recs] == [r.id for r in recs]
    assert not d._suspects and not d._isolated


def test_a_call_lost_twice_runs_alone_and_is_poison_if_lost_there() -> None:
    d, links, _ = _dispatcher(4, CallStyle("async"))
    recs = [_call(d, x) for x in range(8)]  # two on each replica
    bad = next(iter(links[0].outstanding.values()))
    _kill(d, links[0])
    second = next(lk for lk in links if bad.id in lk.outstanding)
    assert len(second.outstanding) == 3  # (beside that replica's own two)
    _kill(d, second)
    # Lost twice: it waits for a replica that holds nothing else of f; the calls lost
    # with it for the first time were written at once.
    assert d._suspects[bad.id] == 2 and bad.link is second
    assert [rec for _, _, rec in d._backlog] == [bad]
    for rec in [r for r in recs if r is not bad and not r.done]:
        if _on(links, rec) == links[3].name:
            continue  # r3 keeps its calls: only the other replica drains
        _answer(d, next(lk for lk in links if rec.id in lk.outstanding), rec)
    alone = next(lk for lk in links if bad.id in lk.outstanding)
    assert alone.outstanding == {bad.id: bad}
    assert d._isolated == {links.index(alone): bad.id}
    fresh = _call(d, 99)  # a new call goes elsewhere while it runs alone
    assert bad.id not in [r.id for r in links[3].outstanding.values()]
    assert fresh.id in links[3].outstanding
    _kill(d, alone)
    assert _poisoned(bad)
    text = str(bad.error)
    assert "lost with 3 replicas of f in a row" in text, text
    assert f"(last: {alone.name}); it was running there alone" in text, text
    assert not d._isolated and bad.id not in d._suspects
    for rec in list(links[3].outstanding.values()):
        _answer(d, links[3], rec)
    assert all(r.value == r.id for r in [*recs, fresh] if r is not bad)
    assert not d._suspects


def test_a_bystander_lost_twice_with_the_poison_runs_alone_and_answers() -> None:
    # async-demand(2) over 4 replicas: two calls each, the most a replica takes.
    d, links, _ = _dispatcher(4, CallStyle("async-demand", 2))
    recs = [_call(d, x) for x in range(8)]
    r0, r1, r2, r3 = links
    bad, bystander = sorted(r0.outstanding.values(), key=lambda r: r.id)
    _kill(d, r0)  # both lost once: first in line for the next room
    assert not d._isolated and d.backlogged == 2
    for rec in list(r1.outstanding.values()):
        _answer(d, r1, rec)
    assert r1.outstanding == {bad.id: bad, bystander.id: bystander}  # together again
    _kill(d, r1)  # lost twice, both: each runs alone
    assert d._suspects == {bad.id: 2, bystander.id: 2}
    for rec in list(r2.outstanding.values()):
        _answer(d, r2, rec)
    assert r2.outstanding == {bad.id: bad} and d._isolated == {2: bad.id}
    for rec in list(r3.outstanding.values()):
        _answer(d, r3, rec)
    assert r3.outstanding == {bystander.id: bystander} and d._isolated == {2: bad.id, 3: bystander.id}
    _kill(d, r2)  # the poison, alone
    assert _poisoned(bad)
    _answer(d, r3, bystander)  # the bystander, alone: never blamed
    assert bystander.value == bystander.id
    assert [r for r in recs if isinstance(r.error, PoisonCallError)] == [bad]
    assert all(r.value == r.id for r in recs if r is not bad)
    assert not d._suspects and not d._isolated


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("kind", ["async", "async-demand"])
def test_a_poison_call_costs_three_replicas_and_blames_no_other(seed: int, kind: str) -> None:
    """Random answers and deaths: whichever replica runs the poison dies, sooner or
    later; the others answer in any order. The poison is lost 3 times, the last alone
    (nothing else of f on that replica), and fails; every other call answers."""
    rng = random.Random(seed)
    style = CallStyle("async-demand", rng.choice([1, 2, 4])) if kind == "async-demand" \
        else CallStyle("async")
    d, links, _ = _dispatcher(4, style)
    recs = [_call(d, x) for x in range(rng.randint(4, 30))]
    bad = rng.choice(recs)
    deaths = 0
    while not all(r.done for r in recs):
        live = [lk for lk in links if not lk.dead]
        holder = next((lk for lk in live if bad.id in lk.outstanding), None)
        others = [(lk, r) for lk in live for r in lk.outstanding.values() if r is not bad]
        if holder is not None and (not others or rng.random() < 0.3):
            if deaths == 2:  # its third run: alone
                assert holder.outstanding == {bad.id: bad}
            _kill(d, holder)
            deaths += 1
            continue
        assert others, "a call waits and nothing runs"
        _answer(d, *rng.choice(others))
    assert deaths == 3 and _poisoned(bad)
    assert all(r.value == r.id for r in recs if r is not bad)
    assert not d._suspects and not d._isolated
