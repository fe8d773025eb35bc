"""An aggregated batch a steal gives back is placed again under its Batcher's lock.

A steal releases any of the client's calls queued on a connection, so a batch of an
aggregating binding can come back through another binding's steal. Its Batcher's
queue, counts in flight and placements are its lock's (client/batching.py): another
thread may hold it between placing the first queued batch and taking it off the queue,
and the thread placing it may itself read answers (a write waiting for room), so the
given-back batch must change nothing until the lock is let go, and the queue must
lose no batch and keep no placed one either way (no network: fakes).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import weakref
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from polybus.client import batchplace
from polybus.client.batchcalls import Pending
from polybus.client.batching import Batcher
from polybus.client.counts import Counts
from polybus.client.drain import under_way
from polybus.client.migrate import Migrator
from polybus.config.model import CallStyle
from polybus.errors import ConnectionLostError


def _link(name: str) -> Any:
    return SimpleNamespace(name=name, dead=False, outstanding={}, abandoned={}, held=[],
                           got=[], speed=1.0)


def _setup(window: int, inflight: list[int]) -> tuple[Any, Any, Batcher, Migrator]:
    """A Batcher of async-demand(``window``) over replicas r0 and r1 (its real methods,
    fake collaborators), and a Migrator of another binding of the same module."""
    src, dst = _link("r0"), _link("r1")
    reactor = SimpleNamespace(flush=lambda link: None, work_left=lambda: None,
                              send_many=lambda link, msgs: link.got.extend(msgs))
    bt: Any = object.__new__(Batcher)
    bt.interface, bt.reactor, bt.comm = "work", reactor, None
    bt.d = SimpleNamespace(counts=Counts())  # type: ignore[assignment]
    bt.links, bt.inflight = [src, dst], list(inflight)
    bt._index = {id(src): 0, id(dst): 1}
    bt.demand, bt.window = True, window
    bt.backlog, bt.held = collections.deque(), [[], []]
    bt.lock = threading.RLock()
    bt._lost_later, bt._back_later, bt._after = (collections.deque(), collections.deque(),
                                                 collections.deque())
    bt.unsettled, bt._writing, bt._timer = collections.deque(), False, None
    bt.failed = weakref.WeakSet()
    other = SimpleNamespace(links=[src, dst], inflight=[0, 0], reactor=reactor,
                            style=CallStyle(kind="async"), _index=bt._index)
    return src, dst, bt, Migrator(other, [], pool=1)  # type: ignore[arg-type]


def _batch(bt: Batcher, bid: int, link: Any) -> Pending:
    b = Pending(bt, 0.0)
    b.id, b.link, b.attempts = bid, link, 1
    if link is not None:
        link.outstanding[bid] = b
    return b


@contextlib.contextmanager
def _held_elsewhere(bt: Batcher) -> Iterator[None]:
    """Another thread inside the Batcher (placing, say) for the block; it settles what
    it owes as it lets go, as every holder does, before the block's end returns."""
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with bt.lock:
            holding.set()
            assert done.wait(10)
        bt._settle()

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert holding.wait(10)
        yield
    finally:
        done.set()
        t.join(10)
    assert not t.is_alive()


def test_a_given_back_batch_waits_for_the_thread_holding_the_lock() -> None:
    src, dst, bt, m = _setup(window=2, inflight=[1, 0])
    b = _batch(bt, 5, src)
    with _held_elsewhere(bt):
        m._pending[3] = (src, dst, 1)
        m.released(src, [5], 3)
        # Nothing of the Batcher's changed under another thread's lock
        assert bt.inflight == [1, 0] and dst.outstanding == {} and dst.got == []
        assert b.link is src and bt.owes
    assert dst.outstanding == {5: b} and b.link is dst and bt.inflight == [0, 1]
    assert [msg.id for msg in dst.got] == [5] and not bt.owes
    assert m.moved_out == {"r0": 1, "r1": 0} and m.moved_in == {"r0": 0, "r1": 1}


def test_a_batch_given_back_while_the_queue_is_placed_is_neither_lost_nor_placed_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pump places the first queued batch; the write reads answers, among them a
    steal's Released giving back another batch, which goes first in the queue (every
    replica's window is full); the pump then takes the batch it placed off the queue,
    not the one given back."""
    src, dst, bt, m = _setup(window=1, inflight=[2, 1])
    queued = _batch(bt, 1, None)
    back = _batch(bt, 2, src)
    bt.backlog.append(queued)
    placed: list[int] = []

    def place(_bt: Any, b: Pending) -> bool:
        placed.append(b.id)
        if len(placed) == 1:  # (the write read a Released: no room anywhere for it)
            m._pending[3] = (src, dst, 1)
            m.released(src, [2], 3)
            return True
        return False

    monkeypatch.setattr(batchplace, "place", place)
    bt.pump()
    assert placed[0] == 1 and list(bt.backlog) == [back]
    assert back.link is None and back.attempts == 0  # (a move is not a failed attempt)
    assert bt.inflight == [1, 1]  # (its place at r0 freed; none taken at r1)


def _given_back_with_none_live(rejoins: bool) -> tuple[Any, Any, Batcher, Pending]:
    """A batch r0 gave back to a steal for r1, both lost before its move ran."""
    src, dst, bt, m = _setup(window=2, inflight=[1, 0])
    bt.d = SimpleNamespace(rejoins=rejoins, counts=Counts())  # type: ignore[assignment]
    b = _batch(bt, 5, src)
    src.dead = dst.dead = True
    m._pending[3] = (src, dst, 1)
    m.released(src, [5], 3)
    return src, dst, bt, b


def test_a_batch_given_back_with_no_replica_live_waits_where_lost_replicas_come_back(
) -> None:
    """Its move deferred while another thread held the lock, the steal's replica (and
    the one planned) were lost meanwhile: in a session that takes lost replicas back
    (rejoin), it waits first in its Batcher's queue, as a lost replica's batches do
    (batchsend.py `requeue`), rather than failing. (It failed, "every replica is gone".)"""
    src, dst, bt, b = _given_back_with_none_live(rejoins=True)
    assert not b.done and b.error is None
    assert list(bt.backlog) == [b] and b.link is None and b.attempts == 0
    assert bt.inflight == [0, 0] and src.outstanding == {} and dst.outstanding == {}


def test_a_batch_given_back_with_no_replica_live_fails_where_none_comes_back() -> None:
    _, _, bt, b = _given_back_with_none_live(rejoins=False)
    assert b.done and isinstance(b.error, ConnectionLostError)
    assert "every replica of work is gone" in str(b.error)
    assert not bt.backlog and bt.inflight == [0, 0]


def test_a_deferred_move_is_a_call_under_way_for_the_run_s_end() -> None:
    """A run that ends well takes in the answers of every call under way (drain.py):
    a batch given back whose move waits for another thread's lock is one (it was
    counted nowhere: not on a replica, not queued, so the run could end without it)."""
    src, dst, bt, m = _setup(window=2, inflight=[1, 0])
    bt.open = None
    b = _batch(bt, 5, src)
    session = SimpleNamespace(reactor=SimpleNamespace(links=[src, dst]), dispatchers={},
                              awaiting=None, batchers=[bt])
    assert under_way(session) == 1  # type: ignore[arg-type]
    with _held_elsewhere(bt):
        m._pending[3] = (src, dst, 1)
        m.released(src, [5], 3)
        assert src.outstanding == {} and bt.owes
        assert under_way(session) == 1  # type: ignore[arg-type]
    assert dst.outstanding == {5: b} and under_way(session) == 1  # type: ignore[arg-type]
