"""The shm rings' awake flags: each side keeps its reader's flag up while it runs (its peer
then rings no doorbell) and lowers it, with a last look, before it sleeps; nothing that
came meanwhile is left unread."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.promise import wait
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.token import make_token
from polybus.transport import ring as ring_mod
from polybus.transport.endpoints import connect
from polybus.transport.shm import ShmChannel
from polybus.wire.codec import Codec
from polybus.worker.runtime import WorkerRuntime

pytestmark = pytest.mark.skipif(not ring_mod.supported(), reason="the ring needs x86-64")
TOKEN = make_token()


def square(i: int) -> int:
    return i * i


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Reactor, Dispatcher, list[WorkerRuntime]]]:
    rts = [WorkerRuntime(f"w{i}", {"square": square}, TOKEN, f"shm://{tmp_path}/w{i}.sock").start()
           for i in range(2)]
    reactor = Reactor()
    try:
        links = [ReplicaLink(rt.name, "server", connect(rt.address, TOKEN, Codec())) for rt in rts]
        for link in links:
            link.channel.spin_s = 100e-6
            reactor.add(link)
        d = Dispatcher("square", reactor, links, CallStyle("async"))
        reactor.on_lost = d.lost
        yield reactor, d, rts
    finally:
        reactor.close()
        for rt in rts:
            rt.stop()


def _rings(d: Dispatcher) -> list[ShmChannel]:
    chans = [lk.channel for lk in d.links]
    assert all(type(ch) is ShmChannel for ch in chans)
    return chans  # type: ignore[return-value]


def test_answers_that_came_with_no_doorbell_are_taken_by_poll(
        two: tuple[Reactor, Dispatcher, list[WorkerRuntime]]) -> None:
    reactor, d, rts = two
    assert [wait(d((i,), {})) for i in range(4)] == [0, 1, 4, 9]  # both links read
    for ch in _rings(d):
        assert ch._rx is not None and ch._rx.reader_awake()  # up: the client runs on
    promises = [d((i,), {}) for i in range(40)]
    deadline = time.monotonic() + 10
    while sum(rt.calls for rt in rts) < 44 and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.01)  # (the last answers written)
    reactor.poll()  # no wait: the rings are looked at, not only the sockets
    assert all(p.done for p in promises)
    assert [wait(p) for p in promises] == [i * i for i in range(40)]


def test_a_replica_lowers_the_flag_before_it_sleeps_and_is_woken_after(
        two: tuple[Reactor, Dispatcher, list[WorkerRuntime]]) -> None:
    d = two[1]
    assert [wait(d((i,), {})) for i in range(6)] == [i * i for i in range(6)]
    tx = [ch._tx for ch in _rings(d)]
    assert all(r is not None for r in tx)
    deadline = time.monotonic() + 5
    while any(r.reader_awake() for r in tx if r is not None) and time.monotonic() < deadline:
        time.sleep(0.005)  # idle replicas: past their spin, asleep, flags down
    assert not any(r.reader_awake() for r in tx if r is not None)
    # Woken by doorbells: a replica past its select timeout does not look at the rings
    # again, so a bell lost here would leave these calls unanswered (the test's timeout).
    assert [wait(d((i,), {})) for i in range(10)] == [i * i for i in range(10)]
