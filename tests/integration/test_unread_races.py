"""A replica that does not wait for clients to read (worker/unread.py), at its edges.

Found by a review of the change, each reproduced first: a call held while its client
was stuck was overwritten (lost) when the lone-call path served that client before the
poller took it up again; clients that went while stuck were never dropped (their
sockets, rings and segments kept: 39 of 40 over shm, 674 MB); a writer whose socket's
descriptor was past 1023 spun (select() refuses it); and an shm client that died with
its ring's awake flag up left its writer sleeping for ever.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Message, Ping, Pong
from polybus.worker import unread
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"unread-races-token-0123456789abcdef"


def _where(transport: str, tmp_path: Path) -> str:
    return "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock"


def _until(cond: Callable[[], bool], limit: float = 10.0) -> bool:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _answers(ch: Any, want: int, limit: float = 10.0) -> dict[Any, Message]:
    got: dict[Any, Message] = {}
    deadline = time.monotonic() + limit
    while len(got) < want and time.monotonic() < deadline:
        ch.fill_soon(0.05)
        while (m := ch.next_message()) is not None:
            for x in (m.items if isinstance(m, Batch) else [m]):
                if isinstance(x, Pong) and x.req == 0:
                    continue  # (unasked: the replica holds the client back, alive)
                got[x.id if hasattr(x, "id") else ("pong", getattr(x, "req", 0))] = x
    return got


def _stuck(rt: WorkerRuntime, ch: Any) -> None:
    """Wait until answers wait for ``ch``'s client, then send a Ping: read after that,
    the client is stuck (not read further until it reads)."""
    assert _until(lambda: any(unread.behind(c) for c in list(rt._channels)))
    ch.send(Ping(1))
    assert _until(lambda: bool(rt._stuck))


def test_a_call_held_while_its_client_is_stuck_is_answered() -> None:
    """pool 1, queue 1: the third call is held (the queue is full) when the client is
    stuck behind a large answer; it read that answer while the second call ran, and the
    replica then served it inline before taking the held call up again: the held call
    was overwritten by the next message (5-6 of 10 trials)."""
    rt: WorkerRuntime | None = None
    big = b"x" * 30_000_000
    go = threading.Event()

    def slow() -> str:
        assert rt is not None
        _until(lambda: bool(rt._stuck), 1.0)  # (the standby resumes the client, and sticks it)
        go.set()
        _until(lambda: not any(unread.behind(c) for c in list(rt._channels)), 5.0)
        time.sleep(0.001)
        return "slow"

    for _ in range(6):
        go.clear()
        rt = WorkerRuntime("w", {"big": lambda: big, "slow": slow, "echo": lambda x: x},
                           TOKEN, options=ServeOptions(pool=1, queue=1)).start()
        c = connect(rt.address, TOKEN, Codec())
        try:
            c.send_many([Call(1, "big", []), Call(2, "slow", []), Call(3, "echo", ["D"]),
                         Ping(9)])
            go.wait(5)
            got = _answers(c, 4)
            assert {1, 2, 3, ("pong", 9)} <= set(got), sorted(map(str, got))
        finally:
            c.close()
            rt.stop()


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_clients_that_go_while_stuck_are_dropped(transport: str, tmp_path: Path) -> None:
    rt = WorkerRuntime("w", {"blob": lambda i: b"x" * 200_000}, TOKEN,
                       _where(transport, tmp_path)).start()
    try:
        fds = len(os.listdir("/proc/self/fd"))
        for _ in range(6):
            c = connect(rt.address, TOKEN, Codec())
            c.send_many([Call(i, "blob", [i]) for i in range(80)] + [Ping(1)])
            time.sleep(0.15)  # (stuck by now: 16 MB of answers it does not read)
            c.close()
        assert _until(lambda: not rt._channels and not rt._stuck), (
            len(rt._channels), len(rt._stuck))
        assert _until(lambda: not [t for t in threading.enumerate()
                                   if t.name.startswith("polybus-unread")])
        assert _until(lambda: len(os.listdir("/proc/self/fd")) <= fds)  # all let go
    finally:
        rt.stop()


def test_an_shm_client_that_dies_with_its_ring_awake_is_dropped(tmp_path: Path) -> None:
    rt = WorkerRuntime("w", {"blob": lambda i: b"x" * 200_000}, TOKEN,
                       f"shm://{tmp_path}/w.sock").start()
    slow = connect(rt.address, TOKEN, Codec())
    try:
        for i in range(60):
            slow.send(Call(i, "blob", [i]))
        _stuck(rt, slow)
        slow.fill(wait=False)  # (the replica's ring, to raise its flag)
        slow._rx.set_awake(True)  # type: ignore[attr-defined]  # killed mid-spin: no bell
        slow.sock.close()
        assert _until(lambda: not rt._channels and not rt._stuck)
        assert _until(lambda: not [t for t in threading.enumerate()
                                   if t.name.startswith("polybus-unread")])
    finally:
        slow.close()
        rt.stop()


def test_the_writer_waits_without_select(monkeypatch: pytest.MonkeyPatch) -> None:
    """select() refuses a descriptor past 1023 (ValueError), which the writer took for a
    closed channel and looked again at once: a core spun for as long as the client was
    stuck. It waits with poll(), which has no such limit."""
    called: list[object] = []

    def refused(*a: object) -> None:
        called.append(a)
        raise ValueError("filedescriptor out of range in select()")

    monkeypatch.setattr(unread.select, "select", refused)
    rt = WorkerRuntime("w", {"blob": lambda i: b"x" * 200_000}, TOKEN).start()
    c = connect(rt.address, TOKEN, Codec())
    try:
        c.send_many([Call(i, "blob", [i]) for i in range(60)])
        _stuck(rt, c)
        got = _answers(c, 61)
        assert sorted(k for k in got if isinstance(k, int)) == list(range(60))
        assert not called
    finally:
        c.close()
        rt.stop()
