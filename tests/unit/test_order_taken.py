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
