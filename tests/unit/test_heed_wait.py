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
            r._heed_cv.notify_all()
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
            rt._heed_cv.notify_all()
        heeder.join(10)
    assert read == [ch]  # it took the role, and read its client
    assert len(rings) == 1, f"the bell was rung {len(rings)} times"
    assert not rt._polling and rt._heeding == 0


def test_the_turns_end_wakes_the_heeding_thread_not_the_idle_ones(
        rt: WorkerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The end of a turn tells the threads that heed; an idle thread of the pool, waiting
    for work or the role, sleeps on (it was woken at every heed of a large answer, only
    to find the role promised and wait again)."""
    woken: list[int] = []
    idle_waiting, stop_idle = threading.Event(), threading.Event()

    def idle() -> None:  # (a pool thread with nothing to do: waits on the runtime's cv)
        with rt._cv:
            idle_waiting.set()
            while not stop_idle.is_set():
                rt._cv.wait()
                woken.append(1)

    reading, read_done = threading.Event(), threading.Event()

    def read(_ch: Any) -> None:  # (the heeding thread has the role: hold it here)
        reading.set()
        read_done.wait(10)

    monkeypatch.setattr(rt, "_read", read)
    idler = threading.Thread(target=idle, daemon=True)
    idler.start()
    assert idle_waiting.wait(10)
    rt._polling = True  # (this thread's turn)
    heeder = threading.Thread(target=rt.heed, args=(Conn(),), daemon=True)
    heeder.start()
    try:
        while True:  # (until the heeding thread waits for the turn's end)
            with rt._cv:
                if rt._heeding:
                    break
        rt._poll_and_release(takes_job=False)  # the turn ends
        assert reading.wait(10), "the heeding thread did not take the role"
        with rt._cv:
            # Woken, the idle thread has either left the condition's waiters and not yet
            # run, or run and recorded it: either shows here, whenever it is looked at.
            assert woken == [] and len(rt._cv._waiters) == 1, (  # type: ignore[attr-defined]
                "the turn's end woke an idle pool thread")
    finally:
        read_done.set()
        heeder.join(10)
        stop_idle.set()
        with rt._cv:
            rt._cv.notify_all()
        idler.join(10)
    assert not heeder.is_alive() and not idler.is_alive()


def test_a_heeding_thread_past_its_wait_when_the_turn_ends_takes_the_role(
        rt: WorkerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The turn's end wakes no idle thread while one heeds: a heeding thread whose wait
    has run out by the time it is told takes the role all the same (it looks whether
    the role is free before whether its time is up), so the replica is never left with
    the role free and no one told to take it."""
    from types import SimpleNamespace

    read: list[Any] = []
    monkeypatch.setattr(rt, "_read", read.append)
    ch = Conn()
    rt._polling = True  # (this thread's turn)
    heeder = threading.Thread(target=rt.heed, args=(ch,), daemon=True)
    heeder.start()
    try:
        while True:  # (until the heeding thread waits for the turn's end)
            with rt._cv:
                if rt._heeding:
                    break
        # Its wait runs out as the turn ends: the clock it reads is past its deadline.
        later = SimpleNamespace(monotonic=lambda: float("inf"))
        monkeypatch.setattr(heeding, "time", later)
        rt._poll_and_release(takes_job=False)  # the turn ends, and no idle thread is woken
        heeder.join(10)
        assert not heeder.is_alive(), "the turn's end did not tell the heeding thread"
    finally:
        with rt._cv:
            rt._stopping = True
            rt._heed_cv.notify_all()
        heeder.join(10)
    assert read == [ch], "the role was left free: the heeding thread did not take it"
    assert not rt._polling and rt._heeding == 0
