"""A replica that stops reading a client (`overflow = "block"`, its queue full) still
tells that client it is alive: the client's Ping waits unread behind the call held
back, so the replica sends a Pong of its own each half heartbeat while the client is
paused (worker/polling.py, `_assure_paused`). Before, calls longer than three heartbeats behind a full
queue got the replica taken for dead ("sent nothing for 3 s while holding calls ...
a call that holds the GIL"), though its calls slept with the GIL free, and every call
failed with ConnectionLostError."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.promise import wait
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.token import make_token
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = make_token()
HEARTBEAT = 0.15
NAP = 0.75  # five heartbeats: past the three a silent replica holding calls is given


def nap(i: int) -> int:
    time.sleep(NAP)
    return i


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_replica_holding_a_paused_client_back_is_not_taken_for_dead(
        transport: str, tmp_path: Path) -> None:
    address = "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"nap": nap}, TOKEN, address,
                       options=ServeOptions(queue=1, overflow="block", heartbeat=HEARTBEAT))
    rt.start()
    reactor = Reactor(heartbeat=HEARTBEAT)
    try:
        link = ReplicaLink("w", "server", connect(rt.address, TOKEN, Codec()))
        reactor.add(link)
        d = Dispatcher("nap", reactor, [link], CallStyle("async"))
        reactor.on_lost = d.lost
        promises = [d((i,), {}) for i in range(4)]  # 1 running, 1 queued, 1 held back
        assert [wait(p) for p in promises] == [0, 1, 2, 3]
        assert not link.dead
    finally:
        reactor.close()
        rt.stop()
