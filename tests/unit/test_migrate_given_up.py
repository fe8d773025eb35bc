"""A call given up on (its timeout passed) by one thread while another reads the
``Released`` a steal got for it: whichever comes first, its place in its replica's
window is freed once (client/migrate.py `Migrator.released`, client/calls.py
`give_up`). The give-up fails the call, then lets it go (`abandon`); a reader that
filed the ``Released`` between the two took the call out of the link's calls and,
finding it failed, freed nothing, nor did the give-up, which no longer found it there:
under async-demand(1) that replica took no call of the binding again. (A real
Dispatcher over fake links, no network; the hook runs the reader's step inside the
window, as test_give_up_race.py does for an answer.)"""

from __future__ import annotations

from typing import Any

import pytest

from polybus.client import calls
from polybus.client.calls import CallRecord, ReplicaLink, give_up
from polybus.client.dispatch import Dispatcher
from polybus.client.migrate import Migrator
from polybus.client.policies.migration import steal_edges
from polybus.config.model import CallStyle
from polybus.errors import CallTimeoutError


class _Reactor:
    """Records what is written; nothing is read (the test files what comes by hand)."""

    gate = None

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def send(self, link: ReplicaLink, msg: Any) -> None:
        self.sent.append((link.name, msg))

    hold = send
    send_unwaited = send

    def send_many(self, link: ReplicaLink, msgs: list[Any]) -> None:
        for m in msgs:
            self.send(link, m)

    def flush(self, link: ReplicaLink) -> None:
        pass

    def work_left(self) -> None:
        pass

    def poll(self, batches: bool = True) -> None:
        pass


def test_a_released_call_given_up_on_meanwhile_frees_its_place_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    links = [ReplicaLink(f"r{i}", "server", channel=None) for i in range(2)]  # type: ignore[arg-type]
    d = Dispatcher("f", _Reactor(), links, CallStyle("async-demand", 1),  # type: ignore[arg-type]
                   timeout=0.1)
    m = Migrator(d, steal_edges(["r0", "r1"]))
    rec = CallRecord(1, d, [1], None, 0.0)
    d._send(rec, links[0])  # (on r0, the one place of its window there taken)
    assert d.inflight == [1, 0]
    m._pending[7] = (links[0], links[1], 1)  # a steal asked of r0 for r1
    # (r0 gave it back to the steal)
    given_up_reading_between(monkeypatch, rec, links[0], lambda: m.released(links[0], [1], 7))
    assert d.inflight == [0, 0]  # (r0's place free: the next call of f may go there)
    assert not links[0].outstanding and not links[0].abandoned
    assert not links[1].outstanding  # (not moved: it is over)


def given_up_reading_between(monkeypatch: pytest.MonkeyPatch, rec: CallRecord,
                             link: ReplicaLink, read: Any) -> None:
    """Give ``rec`` (on ``link``) up at its deadline, ``read()`` (the reader filing what
    came) run after the give-up failed it and before it lets it go."""
    abandon = calls.abandon

    def reader_between(r: CallRecord) -> None:
        assert r.done and link.outstanding.get(r.id) is r
        read()
        abandon(r)

    monkeypatch.setattr(calls, "abandon", reader_between)
    assert give_up(rec, 0.1)
    assert isinstance(rec.error, CallTimeoutError)


def test_a_released_call_given_up_on_before_frees_its_place_once() -> None:
    """The other order: the give-up done first (the call among r0's abandoned), its
    ``Released`` then frees its place, as its late answer would."""
    links = [ReplicaLink(f"r{i}", "server", channel=None) for i in range(2)]  # type: ignore[arg-type]
    d = Dispatcher("f", _Reactor(), links, CallStyle("async-demand", 1),  # type: ignore[arg-type]
                   timeout=0.1)
    m = Migrator(d, steal_edges(["r0", "r1"]))
    rec = CallRecord(1, d, [1], None, 0.0)
    d._send(rec, links[0])
    m._pending[7] = (links[0], links[1], 1)
    assert give_up(rec, 0.1)
    assert d.inflight == [1, 0] and rec.id in links[0].abandoned  # (kept till it is known)
    m.released(links[0], [rec.id], 7)
    assert d.inflight == [0, 0]
    assert not links[0].abandoned and not links[1].outstanding


def test_a_call_running_alone_given_back_to_a_steal_is_placed_alone_again() -> None:
    """A call lost with two replicas runs alone on a replica that holds nothing else of
    its binding (client/backlog.py), which leaves that replica closed to the binding's
    other calls until it ends there. Another binding's steal may take it while it still
    waits there (behind that binding's call): it then went to the steal's replica beside
    other calls, and the replica it had left stayed closed to its binding for the rest
    of the run (its end, filed at the other replica, never reopened it)."""
    links = [ReplicaLink(f"r{i}", "server", channel=None) for i in range(3)]  # type: ignore[arg-type]
    reactor = _Reactor()
    a = Dispatcher("f", reactor, links, CallStyle("async"))  # type: ignore[arg-type]
    b = Dispatcher("g", reactor, links, CallStyle("async"))  # type: ignore[arg-type]
    m = Migrator(b, steal_edges(["r0", "r1", "r2"]))  # b's steals take a's calls too
    other = CallRecord(1, a, [1], None, 0.0)
    a._send(other, links[1])  # (f's call on r1: r1 is not free of f)
    bad = CallRecord(2, a, [2], None, 0.0)
    a._suspects[bad.id] = 2  # lost twice: placed alone
    a._backlog.append((float("-inf"), 0, bad))
    a.refill()
    assert a._isolated == {0: bad.id} and bad.link is links[0]
    m._pending[7] = (links[0], links[1], 1)  # b's steal from r0 for r1
    m.released(links[0], [bad.id], 7)
    assert bad.link is not links[1], "moved beside another call of f"
    assert 0 not in a._isolated or (a._isolated[0] == bad.id and bad.link is links[0])
    where = bad.link
    assert where is not None and where.outstanding == {bad.id: bad}  # alone again
    assert where.outstanding.pop(bad.id) is bad and bad.set_value(5)
    a.completed(bad, where)
    assert not a._isolated  # every replica open to f's calls again
    assert a.inflight == [0, 1, 0]


class _Noting(dict[int, Any]):
    """A link's ``abandoned`` that runs ``step`` once, right after the give-up notes
    its call there and before it takes the call out of the link's calls."""

    def __init__(self, step: Any) -> None:
        super().__init__()
        self.step = step

    def __setitem__(self, key: int, value: Any) -> None:
        super().__setitem__(key, value)
        step, self.step = self.step, None
        if step is not None:
            step()


def test_a_released_call_given_up_on_as_it_is_read_frees_its_place_once() -> None:
    """The reader files the ``Released`` while the give-up is inside `forget`: the
    call noted among r0's abandoned and still among its calls. The reader freed its
    place twice (once as an abandoned call's, once as a failed call it took out), so
    r0 took a third call of a window of 2."""
    links = [ReplicaLink(f"r{i}", "server", channel=None) for i in range(2)]  # type: ignore[arg-type]
    d = Dispatcher("f", _Reactor(), links, CallStyle("async-demand", 2),  # type: ignore[arg-type]
                   timeout=0.1)
    m = Migrator(d, steal_edges(["r0", "r1"]))
    rec, other = CallRecord(1, d, [1], None, 0.0), CallRecord(2, d, [2], None, 0.0)
    d._send(rec, links[0])
    d._send(other, links[0])  # (r0's window of 2 full)
    m._pending[7] = (links[0], links[1], 1)
    links[0].abandoned = _Noting(lambda: m.released(links[0], [rec.id], 7))
    assert give_up(rec, 0.1)
    assert d.inflight == [1, 0]  # (other's place alone taken)
    assert not links[0].abandoned and links[0].outstanding == {other.id: other}
    assert not links[1].outstanding
