"""The replica's queue bound holds exactly, however many calls one read brings in: no more
than ``queue`` calls wait beyond those the free handlers take."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.mixed_calls import run_threads
from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.promise import wait
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.errors import BusyError
from polybus.token import make_token
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Ping, Pong
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

BOUND = 20
TOKEN = make_token()


def square(i: int) -> int:
    time.sleep(0.00025)
    return i * i


class Watched:
    """A replica whose waiting calls are counted on every push: those in its queue but
    for one per free handler, which takes it as the poller lets its role go (the
    bound is on what waits: intake.py, `_full`). Pushed under the lock, so exactly."""

    def __init__(self, overflow: str, address: str) -> None:
        self.rt = WorkerRuntime("w", {"square": square}, TOKEN, address,
                                options=ServeOptions(queue=BOUND, overflow=overflow))
        self.longest = 0  # calls waiting
        self.fullest = 0  # calls in the queue
        rt, queue = self.rt, self.rt._queue
        push = queue.push

        def watched_push(*a: object) -> object:
            job = push(*a)  # type: ignore[arg-type]
            free = rt.options.pool - rt._running
            self.longest = max(self.longest, len(queue) - free)
            self.fullest = max(self.fullest, len(queue))
            return job

        queue.push = watched_push  # type: ignore[method-assign]
        self.rt.start()


# Over shm, calls a paused client wrote into its ring while the replica's awake flag was
# up came with no doorbell: resuming it must look at the ring (polling._resume_paused).
@pytest.fixture(params=[("block", "tcp"), ("reject", "tcp"), ("block", "shm")],
                ids=["block-tcp", "reject-tcp", "block-shm"])
def replica(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Watched]:
    overflow, transport = request.param
    w = Watched(overflow, "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock")
    try:
        yield w
    finally:
        w.rt.stop()


def test_queue_never_exceeds_its_bound(replica: Watched) -> None:
    reactor = Reactor()
    link = ReplicaLink("w", "server", connect(replica.rt.address, TOKEN, Codec()))
    reactor.add(link)
    d = Dispatcher("square", reactor, [link], CallStyle("async"))
    reactor.on_lost = d.lost
    try:
        n = 3000
        promises = [d((i,), {}) for i in range(n)]  # far faster than 0.25 ms a call
        # A second client is still answered (control messages pass a full queue).
        other = connect(replica.rt.address, TOKEN, Codec())
        other.send(Ping(7))
        got: list[object] = []
        t0 = time.monotonic()
        done = threading.Event()

        def read() -> None:
            while not got:
                got.extend(other.receive())
            done.set()

        threading.Thread(target=read, daemon=True).start()
        ok = busy = 0
        for i, p in enumerate(promises):
            try:
                assert wait(p) == i * i
                ok += 1
            except BusyError:
                busy += 1
        assert done.wait(10) and isinstance(got[0], Pong)
        assert time.monotonic() - t0 < 30
        other.close()
    finally:
        reactor.close()
    assert ok + busy == n  # every call answered: a value or a typed error
    if replica.rt.options.overflow == "block":
        assert busy == 0
    else:
        assert busy > 0
    assert 0 < replica.longest <= BOUND, replica.longest
    assert replica.fullest <= BOUND + replica.rt.options.pool, replica.fullest


def _uneven_square(i: int) -> int:
    if i % 50 == 0:
        time.sleep(0.02)
    elif i % 50 < 5:
        time.sleep(0.002)
    return i * i


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_backpressure_with_one_thread_answers_every_call_of_two_client_threads(
        transport: str, tmp_path: Path) -> None:
    """A queue of 4 and one thread, two client threads mixing sync calls and bursts that
    fill it: the client is paused and resumed over and over, and every call is answered
    with its own value, with no stall: the poll timeout is raised to 60 s, so a client
    left paused shows as a hang. (Two such stalls are fixed: a poller that resumed a
    client and then slept with its calls queued; and a poller that paused a client
    while the pool drained the queue, the pool having looked for paused clients just
    before, which hung about 1 run in 80 of this test.)"""
    address = "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"square": _uneven_square}, TOKEN, address,
                       options=ServeOptions(queue=4, overflow="block", pool=1))
    rt.idle_s = 60.0
    rt.start()
    reactor = Reactor()
    try:
        link = ReplicaLink("w", "server", connect(rt.address, TOKEN, Codec()))
        reactor.add(link)
        burst = Dispatcher("square", reactor, [link], CallStyle("async"))
        one = Dispatcher("square", reactor, [link], CallStyle("sync"))
        reactor.on_lost = burst.lost
        done, errors, hung = run_threads(one, burst, threads=2, rounds=150, most=30,
                                         join_s=30)
        assert not hung, f"stalled after rounds {done}"
        assert errors == [] and done == [150, 150]
    finally:
        reactor.close()
        rt.stop()


def test_wakes_never_block_the_pool_however_many_pile_up() -> None:
    """A pool thread wakes the poller once per call it runs while a client is paused,
    holding the pool's lock; with one thread (the only poller) none are read until the
    queue is drained. Sent blocking, the wakes filled the socket's buffer and the next
    one never returned: the replica stopped for good (an async burst of 2,000 small
    array calls over shm hung there). A wake that finds the buffer full is dropped, and
    the ones waiting still wake the poller."""
    rt = WorkerRuntime("w", {"square": square}, TOKEN, "tcp://127.0.0.1:0")
    try:
        sent = threading.Event()

        def wake_many() -> None:
            for _ in range(50_000):  # far more than any socket buffer holds
                rt._wake()
            sent.set()

        threading.Thread(target=wake_many, daemon=True).start()
        assert sent.wait(30), "a wake blocked on a full socket buffer"
        assert rt._sel.poll(0.0)  # the wakes that fit are there for the poller
    finally:
        rt.stop()


def _echo(x: object) -> object:
    return x


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_long_burst_through_a_full_queue_with_one_thread_is_answered(
        transport: str, tmp_path: Path) -> None:
    """The default queue (1,000) and one thread, a burst three times that of small
    arrays: the client is paused while the thread runs the whole queue (a wake per call
    run), and every call is answered with its own value."""
    import numpy as np

    address = "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"echo": _echo}, TOKEN, address,
                       options=ServeOptions(pool=1)).start()
    reactor = Reactor(heartbeat=1.0)  # (a stalled replica fails the test, not hangs it)
    try:
        link = ReplicaLink("w", "server", connect(rt.address, TOKEN, Codec()))
        reactor.add(link)
        d = Dispatcher("echo", reactor, [link], CallStyle("async"))
        reactor.on_lost = d.lost
        xs = [np.full(10, float(i)) for i in range(3000)]
        for _ in range(3):
            promises = [d((x,), {}) for x in xs]
            for x, p in zip(xs, promises, strict=True):
                assert np.array_equal(wait(p), x)
    finally:
        reactor.close()
        rt.stop()
