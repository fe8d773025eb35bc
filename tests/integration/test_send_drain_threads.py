"""A program thread whose send finds its connection full reads meanwhile (`_drain`), while
another program thread waits for its answers, reading the same connections. The send's
read took no turn: both threads decoded one connection at once, some answers were filed
twice and others never, and the waiting thread waited for ever (every run of 5, tcp)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.promise import wait
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.token import make_token
from polybus.transport import ring as ring_mod
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = make_token()
BLOB = 8 << 20  # (far more than a socket takes at once: the send waits for room)


def size(b: bytes) -> int:
    time.sleep(0.002)  # (the queue of 2 fills: the replica stops reading meanwhile)
    return len(b)


def square(i: int) -> int:
    return i * i


@contextmanager
def _served(transport: str, tmp_path: Path, functions: dict[str, Callable[..., Any]]
            ) -> Iterator[tuple[Reactor, ReplicaLink]]:
    """A replica of ``functions`` (a queue of 2) and a reactor with one link to it."""
    if transport == "shm" and not ring_mod.supported():
        pytest.skip("the ring needs x86-64")
    addr = f"shm://{tmp_path}/w.sock" if transport == "shm" else "tcp://127.0.0.1:0"
    rt = WorkerRuntime("w", functions, TOKEN, addr, ServeOptions(queue=2)).start()
    reactor = Reactor()
    try:
        link = ReplicaLink(rt.name, "server", connect(rt.address, TOKEN, Codec()))
        reactor.add(link)
        yield reactor, link
    finally:
        reactor.close()
        rt.stop()


def _joined(threads: dict[str, threading.Thread], link: ReplicaLink) -> None:
    """Start ``threads`` and wait for them all (30 s in all); none may be left waiting."""
    for t in threads.values():
        t.start()
    deadline = time.monotonic() + 30
    for t in threads.values():
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [name for name, t in threads.items() if t.is_alive()]
    assert not hung, f"{hung} still waiting; {sorted(link.outstanding)} unanswered"


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_send_waiting_for_room_and_another_threads_wait_share_the_reads(
        transport: str, tmp_path: Path) -> None:
    errors: list[str] = []
    big_done = threading.Event()
    rounds = [0, 0]
    with _served(transport, tmp_path, {"size": size, "square": square}) as (reactor, link):
        big = Dispatcher("size", reactor, [link], CallStyle("async"))
        small = Dispatcher("square", reactor, [link], CallStyle("async"))

        def bigs() -> None:
            blob = bytes(BLOB)
            try:
                for _ in range(10):
                    ps = [big.call_async((blob,), {}) for _ in range(4)]
                    assert [wait(p) for p in ps] == [BLOB] * 4
                    rounds[0] += 1
            except Exception as exc:
                errors.append(f"bigs: {exc!r}")
            finally:
                big_done.set()

        def smalls() -> None:
            try:
                while not big_done.is_set() or rounds[1] < 3:
                    ps = [small.call_async((i,), {}) for i in range(200)]
                    assert [wait(p) for p in ps] == [i * i for i in range(200)]
                    rounds[1] += 1
            except Exception as exc:
                errors.append(f"smalls: {exc!r}")

        _joined({"bigs": threading.Thread(target=bigs, daemon=True),
                 "smalls": threading.Thread(target=smalls, daemon=True)}, link)
        assert errors == []
        assert rounds[0] == 10 and rounds[1] >= 3


def echo(b: bytes) -> bytes:
    return b


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_sync_call_waiting_for_a_connection_another_thread_writes_reads_meanwhile(
        transport: str, tmp_path: Path) -> None:
    """Thread A writes large calls whose large answers come back; threads B and C make
    sync calls on the same connection. A sync call alone takes the read turn and then
    waits for the connection's send lock, which A holds while its write waits for room;
    A's write may no longer read outside the turn, and the replica reads no more from a
    client that leaves its answers unread: each waited for the other (1 run in 3 once
    the reads took turns). The sync call reads while it waits for the lock."""
    errors: list[str] = []
    big_done = threading.Event()
    rounds = [0, 0, 0]
    with _served(transport, tmp_path, {"echo": echo, "square": square}) as (reactor, link):
        big = Dispatcher("echo", reactor, [link], CallStyle("async"))
        one = Dispatcher("square", reactor, [link], CallStyle("sync"))

        def bigs() -> None:
            blob = bytes(BLOB)
            try:
                for _ in range(40):
                    ps = [big.call_async((blob,), {}) for _ in range(6)]
                    assert [len(wait(p)) for p in ps] == [BLOB] * 6
                    rounds[0] += 1
            except Exception as exc:
                errors.append(f"bigs: {exc!r}")
            finally:
                big_done.set()

        def syncs(k: int) -> None:
            try:
                while not big_done.is_set():
                    assert one((k,), {}) == k * k
                    rounds[k] += 1
            except Exception as exc:
                errors.append(f"sync {k}: {exc!r}")

        _joined({"bigs": threading.Thread(target=bigs, daemon=True),
                 **{f"sync {k}": threading.Thread(target=syncs, args=(k,), daemon=True)
                    for k in (1, 2)}}, link)
        assert errors == []
        assert rounds[0] == 40
