"""A call of another binding waits for the batches the linger timer took from a
Batcher's ``held`` (client/order.py `_write`, client/linger.py `timer_flush`). It looks
without the Batcher's lock: while the timer empties ``held``, the batches must be seen
either still there or as taken (``Batcher.taken``), never neither; else the other
binding's call is written before them and overtakes them on their replica."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pytest

from polybus.client import linger


class _Gate:
    def poke(self) -> None:
        pass


class _Wake:
    def ring(self) -> None:
        pass


class _Reactor:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = _Wake()
        self.gate = _Gate()
        self.unfinished = False

    def unsent_left(self) -> bool:
        return False


class _Batcher:
    """What `timer_flush` reads of a Batcher, with ``held`` watched."""

    def __init__(self, seen: list[bool]) -> None:
        self.reactor = _Reactor()
        self.lock = threading.RLock()
        self.open = None
        self.links = ["link0", "link1"]
        self.backlog: deque[Any] = deque()
        self.unsettled: deque[Any] = deque()
        self._after: deque[Any] = deque()
        self._writing = False
        self.taken = 0
        bt = self

        class Held(list[list[str]]):
            def __setitem__(self, i: Any, v: Any) -> None:
                super().__setitem__(i, v)
                # What another binding's switch sees now, looking without the lock.
                seen.append(any(bt.held) or bool(bt.taken))

        self.held = Held([["batch0"], ["batch1"]])


def test_taken_batches_are_never_out_of_sight(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    written: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(linger, "write",
                        lambda bt, link, msgs, direct: written.append((link, msgs)))
    bt = _Batcher(seen)
    assert linger.timer_flush(bt, None)  # type: ignore[arg-type]
    assert written == [("link0", ["batch0"]), ("link1", ["batch1"])]
    assert seen == [True, True], "a batch taken from held was neither held nor taken"
    assert bt.taken == 0 and not any(bt.held)


class _SyncReactor:
    """A reactor whose batches are all written (flush_all) but for one the linger
    timer took and still writes; `call_alone` says what it found."""

    refills = True

    def __init__(self, bt: Any) -> None:
        self.bt = bt
        self.taken_at_write: list[int] = []

    def flush_all(self) -> None:
        pass

    def call_alone(self, rec: Any, link: Any) -> str:
        self.taken_at_write.append(self.bt.taken)
        return "answer"


class _Link:
    dead = False

    def __init__(self) -> None:
        self.outstanding: dict[int, Any] = {}


def test_sync_call_waits_for_the_timer_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync call writes everything held back at the client first, so it runs after
    it: the batches the linger timer took and writes outside the locks too."""
    from polybus.client import order as order_mod
    from polybus.client.dispatch import Dispatcher

    class _Bt:
        taken = 1

    bt = _Bt()
    order = order_mod.Order(None)  # type: ignore[arg-type]
    order.batchers.append(bt)  # type: ignore[arg-type]
    reactor = _SyncReactor(bt)

    def timer_ends(_s: float) -> None:  # the timer's write ends while the call waits
        bt.taken = 0

    monkeypatch.setattr(order_mod.time, "sleep", timer_ends)
    link = _Link()
    d = Dispatcher.__new__(Dispatcher)
    d.__dict__.update(reactor=reactor, _lane=None, pickle=None, calls=0, links=[link],
                      _isolated=False, inflight=[0], _index={id(link): 0}, order=order,
                      timeout=None)
    assert d.call_sync((1,), {}) == "answer"
    assert reactor.taken_at_write == [0], "the sync call was written before the batches"


def test_a_batch_the_timer_closes_is_never_out_of_sight(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Between sealing the open batch and placing it in ``held``, the batch is neither
    open nor held: it must be counted as taken then, or a call of another binding
    looking meanwhile goes first."""
    seen: list[bool] = []

    def looks(bt: Any) -> bool:  # what `_write` (Batcher.flush, then taken) sees
        return bool(bt.open is not None or bt.backlog or any(bt.held) or bt.taken)

    def place(bt: Any, b: Any, send: bool = True) -> bool:
        seen.append(looks(bt))
        bt.held[0].append(b)
        return True

    monkeypatch.setattr(linger, "place", place)
    monkeypatch.setattr(linger, "write", lambda bt, link, msgs, direct: None)
    bt = _Batcher([])
    bt.held[:] = [[], []]

    class _Pending:
        args = ((1,),)

    b = _Pending()
    bt.open = b  # type: ignore[assignment]

    def seal(p: Any) -> bool:
        bt.open = None
        return True

    bt._seal = seal  # type: ignore[attr-defined]
    assert linger.timer_flush(bt, b)  # type: ignore[arg-type]
    assert seen == [True], "the batch the timer closed was out of sight while placed"
    assert bt.taken == 0 and not any(bt.held) and bt.open is None


def test_a_timer_that_fails_leaves_nothing_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """A placement that raises leaves no batch counted as taken: a call of another
    binding would wait for it for ever."""
    def place(bt: Any, b: Any, send: bool = True) -> bool:
        raise RuntimeError("placement failed")

    monkeypatch.setattr(linger, "place", place)
    bt = _Batcher([])

    class _Pending:
        args = ((1,),)

    b = _Pending()
    bt.open = b  # type: ignore[assignment]
    bt._seal = lambda p: True  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        linger.timer_flush(bt, b)  # type: ignore[arg-type]
    assert bt.taken == 0
