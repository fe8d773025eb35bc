"""`heed` waiting for another thread's poll turn (worker/heeding.py): one ring of the
wake bell, then a wait until the turn ends, which tells it (runtime.py).

The replica is not started: the test's own threads are its poller and its heeding one.
The poller's turn lasts until the bell rings a second time (as the old `heed` rang it
every millisecond while it waited) or 0.2 s; `HEED_WAIT_S` is made long, so a turn's
end that did not tell the heeding thread shows as that thread not returning at all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from polybus.worker import heeding
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"heed-wait-token-0123456789abcdef"


class Conn:
    """A client's connection, as far as `heed` looks at one."""

    closed = False
    peer = "client"


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerRuntime]:
    monkeypatch.setattr(heeding, "HEED_WAIT_S", 60.0)
    r = WorkerRuntime("w", {"f": lambda: 0}, TOKEN)
    try:
        yield r
    finally:
        with r._cv:  # (a heeding thread still waiting, were the test to fail, ends)
            r._stopping = True
            r._cv.notify_all()
        r.stop()


def test_a_heeding_thread_rings_once_and_takes_the_role_when_the_turn_ends(
        rt: WorkerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    rings: list[int] = []
    first, second = threading.Event(), threading.Event()
    real_wake = rt._wake

    def wake() -> None:
        rings.append(1)
        (second if first.is_set() else first).set()
        real_wake()

    read: list[Any] = []
    monkeypatch.setattr(rt, "_wake", wake)
    monkeypatch.setattr(rt, "_read", read.append)
    ch = Conn()
    rt._polling = True  # (this thread's turn)
    heeder = threading.Thread(target=rt.heed, args=(ch,), daemon=True)
    heeder.start()
    try:
        assert first.wait(10), "the heeding thread never rang the bell"
        second.wait(0.2)  # (the turn goes on: the old heed rang again meanwhile)
        rt._poll_and_release(takes_job=False)  # the turn (the bell ends its sleep) ends
        heeder.join(10)
        assert not heeder.is_alive(), "the turn's end did not tell the heeding thread"
    finally:
        with rt._cv:
            rt._stopping = True
            rt._cv.notify_all()
        heeder.join(10)
    assert read == [ch]  # it took the role, and read its client
    assert len(rings) == 1, f"the bell was rung {len(rings)} times"
    assert not rt._polling and rt._heeding == 0
