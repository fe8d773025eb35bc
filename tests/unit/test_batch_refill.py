"""An aggregating binding's Batcher takes a new link in a lost one's place
(client/batchrefill.py, called by client/revive.py's install; no network: fakes).

Its place's counts start afresh, and the lost link's batches run again once: a loss
left for the lock's next holder (Batcher.lost, the lock busy) is settled before the
place changes hands, not after, over the new link's counts."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from polybus.client import batchrefill
from polybus.client.batchcalls import Pending
from polybus.client.batching import Batcher
from polybus.client.counts import Counts
from polybus.config.model import CallStyle
from polybus.errors import ConnectionLostError
from polybus.wire.messages import CallBatch


class _Reactor:
    def __init__(self) -> None:
        self.flushers: list[Any] = []
        self.sent: list[tuple[Any, Any]] = []  # (link, message)
        self.gate = None

    def send(self, link: Any, msg: Any) -> None:
        self.sent.append((link, msg))

    def send_many(self, link: Any, msgs: list[Any]) -> None:
        self.sent.extend((link, m) for m in msgs)

    def work_left(self) -> None:
        pass

    def poll(self) -> None:
        pass


def _link(name: str) -> Any:
    return SimpleNamespace(name=name, unwritten=frozenset(), dead=False, outstanding={}, abandoned={}, held=[],
                           load=0, module="m")


def _batcher(links: list[Any]) -> tuple[Batcher, _Reactor]:
    reactor = _Reactor()
    d = SimpleNamespace(interface="f", timeout=None, links=links, comm=None, calls=0,
                        style=CallStyle("async-demand", 1), idempotent=True,
                        max_attempts=3, counts=Counts(), rejoins=False)
    return Batcher(d, reactor, 2, None, 3600.0), reactor  # type: ignore[arg-type]


def _batch(bt: Batcher, x: int) -> Pending:
    """A batch of two calls, closed: placed on a replica with room, or queued."""
    b = Pending(bt, time.monotonic())
    b.args += [(x,), (x + 1,)]
    bt._close(b)
    return b


def _sent_to(reactor: _Reactor, link: Any) -> list[int]:
    return [m.id for lk, m in reactor.sent if lk is link and type(m) is CallBatch]


def test_a_loss_left_for_the_locks_next_holder_is_settled_before_the_place_is_filled() -> None:
    r0, r1 = _link("r0"), _link("r1")
    bt, reactor = _batcher([r0, r1])
    b1, b2, b3 = _batch(bt, 1), _batch(bt, 3), _batch(bt, 5)
    assert r0.outstanding == {b1.id: b1} and r1.outstanding == {b2.id: b2}
    assert list(bt.backlog) == [b3] and bt.inflight == [1, 1]
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with bt.lock:
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        r1.dead = True
        bt.lost(r1, ConnectionLostError("r1 closed the connection"))
        assert len(bt._lost_later) == 1  # (the lock was busy: left for its next holder)
    finally:
        release.set()
        t.join(10)
    new = _link("r1")
    bt.links[1] = new  # (what Dispatcher.replace does to the list the Batcher shares)
    assert batchrefill.replace(bt, r1, new)
    assert not bt._lost_later and not r1.outstanding
    assert list(bt.backlog) == [b2, b3]  # the lost batch first in line, once
    assert bt._index == {id(r0): 0, id(new): 1}
    assert bt.inflight == [1, 0] and bt.held == [[], []]
    bt.pump()
    assert new.outstanding == {b2.id: b2} and list(bt.backlog) == [b3]
    assert _sent_to(reactor, new) == [b2.id] and bt.inflight == [1, 1]
    bt.completed(b2, new)  # (its answer: the place's count, not a KeyError)
    del new.outstanding[b2.id]
    bt.pump()
    assert new.outstanding == {b3.id: b3} and not bt.backlog
    assert _sent_to(reactor, new) == [b2.id, b3.id] and bt.inflight == [1, 1]
    assert _sent_to(reactor, r0) == [b1.id]  # nothing of r1's went twice


def test_a_place_filled_after_the_loss_was_settled_starts_afresh() -> None:
    r0, r1 = _link("r0"), _link("r1")
    bt, _ = _batcher([r0, r1])
    b1, b2 = _batch(bt, 1), _batch(bt, 3)
    r1.dead = True
    bt.lost(r1, ConnectionLostError("r1 closed the connection"))  # (settled at once)
    assert list(bt.backlog) == [b2] and not r1.outstanding
    bt.held[1].append(CallBatch(99, "f", [[0]]))  # (stale: never written to the new one)
    new = _link("r9")  # a replacement under another name
    bt.links[1] = new
    assert batchrefill.replace(bt, r1, new)
    assert bt.held == [[], []] and bt.inflight == [1, 0]
    assert not batchrefill.replace(bt, r1, _link("r1"))  # no longer one of its links
    assert bt.links == [r0, new] and bt._index == {id(r0): 0, id(new): 1}
    bt.pump()
    assert new.outstanding == {b2.id: b2} and r0.outstanding == {b1.id: b1}

