"""Calls a replica released to a steal are sent on each by its own binding's rules: a
replica gives up any of the client's waiting calls, whichever interface (and so
whichever binding, with or without a cache) made them (no network: fakes)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from polybus.client.later import Later
from polybus.client.migrate import Migrator
from polybus.config.model import CallStyle


class FakeComm:
    """Names every call it is given (as a Comm names cached operands)."""

    def __init__(self) -> None:
        self.named: list[int] = []

    def messages(self, rec: Any, link: Any, inline: bool = False) -> list[Any]:
        self.named.append(rec.id)
        return [("named", rec.id)]

    def send_many(self, link: Any, recs: list[Any]) -> None:
        link.got.extend(m for r in recs for m in self.messages(r, link))


def _link(name: str) -> Any:
    return SimpleNamespace(name=name, dead=False, outstanding={}, abandoned={}, held=[], got=[], speed=1.0)


def test_each_released_call_goes_by_its_own_binding() -> None:
    src, dst = _link("r0"), _link("r1")
    reactor = SimpleNamespace(flush=lambda link: None, later=Later(),
                              send_many=lambda link, msgs: link.got.extend(msgs))
    style = CallStyle(kind="async")

    def dispatcher(comm: Any) -> Any:
        return SimpleNamespace(links=[src, dst], inflight=[0, 0], style=style, comm=comm,
                               reactor=reactor, _index={id(src): 0, id(dst): 1}, _auto=None,
                               _isolated={})

    cached = FakeComm()
    a, b = dispatcher(cached), dispatcher(None)  # two interfaces of one module
    recs = {}
    for cid, d in ((1, a), (2, b)):
        recs[cid] = rec = SimpleNamespace(id=cid, dispatcher=d, done=False, link=src, attempts=1,
                                          message=lambda cid=cid: ("inline", cid))
        src.outstanding[cid] = rec
        d.inflight[0] += 1
    m = Migrator(a, [], pool=1)  # a's migrator: its steal released b's call too
    m._pending[7] = (src, dst, 2)
    m.released(src, [1, 2], 7)
    assert sorted(dst.got) == [("inline", 2), ("named", 1)]
    assert cached.named == [1]  # b's call was not named by a's cache rules
    assert a.inflight == [0, 1] and b.inflight == [0, 1]
    assert dst.outstanding == {1: recs[1], 2: recs[2]}


def test_a_moved_call_of_an_auto_window_is_timed_from_its_move() -> None:
    """async-demand(auto) measures a call's round trip from its sending: a call moved to
    another replica is timed from its move, with the calls ahead of it there (its old
    stamp, with the queue it waited in at the replica it left, would take that wait for
    the new replica's round trip)."""
    import time

    src, dst = _link("r0"), _link("r1")
    reactor = SimpleNamespace(flush=lambda link: None, later=Later(),
                              send_many=lambda link, msgs: link.got.extend(msgs))
    d = SimpleNamespace(links=[src, dst], inflight=[6, 2], window=[8, 8],  # (room at dst)
                        style=CallStyle(kind="async-demand"),
                        comm=None, reactor=reactor, _index={id(src): 0, id(dst): 1},
                        _auto=[object(), object()], _isolated={})
    rec = SimpleNamespace(id=1, dispatcher=d, done=False, link=src, attempts=1, sent_at=1.0,
                          ahead=6, message=lambda: ("inline", 1))
    src.outstanding[1] = rec
    m = Migrator(d, [], pool=1)  # type: ignore[arg-type]
    m._pending[7] = (src, dst, 1)
    before = time.perf_counter()
    m.released(src, [1], 7)
    assert dst.got == [("inline", 1)] and d.inflight == [5, 3]
    assert before <= rec.sent_at <= time.perf_counter()
    assert rec.ahead == 3  # (itself and the two already on r1)


def test_a_replacement_link_takes_the_lost_ones_edges_and_gets_steals() -> None:
    from polybus.client.policies.migration import steal_edges

    r0, r1 = _link("r0"), _link("r1")
    sent: list[tuple[str, Any]] = []
    reactor = SimpleNamespace(send=lambda link, msg: sent.append((link.name, msg)))
    d = SimpleNamespace(links=[r0, r1], inflight=[0, 0], reactor=reactor,
                        style=CallStyle(kind="async"), _index={id(r0): 0, id(r1): 1})
    m = Migrator(d, steal_edges(["r0", "r1"]), pool=1)  # type: ignore[arg-type]
    r1.dead = True
    new = _link("r9")  # a replacement registered under another name
    d.links[1] = new  # (what Dispatcher.replace does)
    m.replace(r1, new)
    assert m.by_name == {"r0": r0, "r9": new}
    assert {(e.src, e.dst) for e in m.rules} == {("r0", "r9"), ("r9", "r0")}
    d.inflight[:] = [6, 0]  # r0 loaded, the new replica idle: it pulls from r0
    m.tick()
    assert [name for name, _ in sent] == ["r0"] and sent[0][1].n > 0
    assert m.snapshot()["r9"].alive and "r1" not in m.snapshot()
    m.replace(r1, _link("r1"))  # not a link of this migrator any more: nothing changes
    assert m.by_name == {"r0": r0, "r9": new}


def test_a_steal_under_async_demand_asks_no_more_than_the_receivers_window_takes() -> None:
    """A fast receiver with one place left in its binding's window (async-demand(4))
    steals one call, however many the loads alone would move (the rest would come
    back: client/giveback.py places a call given back with no room as a new call)."""
    from polybus.client.policies.migration import Edge, decide
    from polybus.config.model import Condition

    r0, r1 = _link("r0"), _link("r1")
    r1.speed = 10.0
    sent: list[tuple[str, Any]] = []
    reactor = SimpleNamespace(send=lambda link, msg: sent.append((link.name, msg)))
    d = SimpleNamespace(links=[r0, r1], inflight=[4, 3], window=[4, 4], reactor=reactor,
                        style=CallStyle(kind="async-demand", window=4),
                        _index={id(r0): 0, id(r1): 1})
    m = Migrator(d, [Edge("r0", "r1", 1.0, push=Condition(">=", 2))], pool=1)  # type: ignore[arg-type]
    assert [mv.n for mv in decide(m.snapshot(), m.rules)] == [3]  # (the loads alone)
    m.tick()
    assert [(name, msg.n) for name, msg in sent] == [("r0", 1)]
    d.inflight[1] = 4  # (its window full: no steal at all)
    m._pending.clear()
    sent.clear()
    m.tick()
    assert sent == []
