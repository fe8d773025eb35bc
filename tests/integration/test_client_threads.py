"""Several client threads sharing one reactor, mixing sync calls and async bursts over
two replicas: every call is answered. A reader that took only its own answer left the
others whole in the link's decoder, and the next thread's blocking read waited on the
socket for bytes already read: the program hung (found by a stress run)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from integration.mixed_calls import run_threads
from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.token import make_token
from polybus.transport import ring as ring_mod
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.worker.runtime import WorkerRuntime

TOKEN = make_token()


def square(i: int) -> int:
    if i % 97 == 0:
        time.sleep(0.003)
    return i * i


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_threads_mixing_sync_and_async_calls_all_get_answers(transport: str, tmp_path: Path) -> None:
    if transport == "shm" and not ring_mod.supported():
        pytest.skip("the ring needs x86-64")
    addr = [f"shm://{tmp_path}/w{i}.sock" if transport == "shm" else "tcp://127.0.0.1:0"
            for i in range(2)]
    rts = [WorkerRuntime(f"w{i}", {"square": square}, TOKEN, addr[i]).start() for i in range(2)]
    reactor = Reactor()
    try:
        links = [ReplicaLink(rt.name, "server", connect(rt.address, TOKEN, Codec())) for rt in rts]
        for link in links:
            reactor.add(link)
        burst = Dispatcher("square", reactor, links, CallStyle("async"))
        one = Dispatcher("square", reactor, links, CallStyle("sync"))
        reactor.on_lost = burst.lost
        rounds, errors, hung = run_threads(one, burst, threads=3, rounds=300, most=20,
                                           pauses=[0, 5e-5, 2e-4, 1e-3])
        assert not hung, f"hung after rounds {rounds}"
        assert errors == []
        assert rounds == [300] * 3
    finally:
        reactor.close()
        for rt in rts:
            rt.stop()


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_call_to_an_idle_replica_is_not_held_behind_another_threads_wait(
        transport: str, tmp_path: Path) -> None:
    """Thread A waits for a long call on replica 0, asleep on that replica's socket (the
    sync fast path). The main thread's call to replica 1 must come back at once, not
    when A's answer comes: it rings A awake (transport/wake.py) and A's general loop
    reads replica 1 too. Before, it waited for A's answer (or a heartbeat, 0.7 s)."""
    if transport == "shm" and not ring_mod.supported():
        pytest.skip("the ring needs x86-64")
    entered, release = threading.Event(), threading.Event()

    def hold() -> bool:
        entered.set()
        return release.wait(20)  # False: nobody released it (the main thread was stuck)

    def echo(x: int) -> int:
        return x

    addr = [f"shm://{tmp_path}/w{i}.sock" if transport == "shm" else "tcp://127.0.0.1:0"
            for i in range(2)]
    funcs = {"hold": hold, "echo": echo}
    rts = [WorkerRuntime(f"w{i}", funcs, TOKEN, addr[i]).start() for i in range(2)]
    reactor = Reactor(heartbeat=None)  # no heartbeat: nothing else ends A's sleep
    try:
        links = [ReplicaLink(rt.name, "server", connect(rt.address, TOKEN, Codec())) for rt in rts]
        for link in links:
            reactor.add(link)
        held = Dispatcher("hold", reactor, [links[0]], CallStyle("sync"))
        quick = Dispatcher("echo", reactor, [links[1]], CallStyle("sync"))
        outcome: list[bool] = []
        a = threading.Thread(target=lambda: outcome.append(held((), {})), daemon=True)
        a.start()
        assert entered.wait(10)
        time.sleep(0.05)  # (A is past its spin window, asleep on replica 0's socket)
        assert quick((7,), {}) == 7
        release.set()
        a.join(30)
        assert outcome == [True]  # released by us: the echo came back while A still waited
    finally:
        release.set()
        reactor.close()
        for rt in rts:
            rt.stop()
