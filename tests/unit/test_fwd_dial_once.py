"""Threads that send values on to one peer at once dial it one at a time, and keep one
connection (worker/fwdpeers.py `_peer`).

Each peer's dial lock is made for its first dial and let go with its last user: a lock
let go while a thread still waited on it, and made again by a thread that came then,
would have two threads dial the peer at once, each keeping its connection.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from polybus.errors import TransportError
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec
from polybus.worker import fwdpeers
from polybus.worker.runtime import WorkerRuntime
from unit.test_fwd_send_later import _until

TOKEN = b"fwd-dial-once-token-0123456789ab"
PEER = "tcp://127.0.0.1:9"


def test_threads_asking_for_one_peer_dial_it_one_at_a_time_and_keep_one_connection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rt = WorkerRuntime("w0", {}, TOKEN).start()
    fwd = rt.forwarding
    lock = threading.Lock()
    dials: list[threading.Event] = []  # (each dial's gate, the test opens it)
    inside = [0, 0]  # dials under way now, the most at once
    ends: list[socket.socket] = []

    def connect(to: Any, *args: Any, **kwargs: Any) -> Channel:
        gate = threading.Event()
        with lock:
            dials.append(gate)
            n = len(dials)
            inside[0] += 1
            inside[1] = max(inside)
        gate.wait(10)
        with lock:
            inside[0] -= 1
        if n == 1:  # (the first dial fails: a thread waiting dials again)
            raise TransportError(f"cannot connect to {to}: refused")
        mine, theirs = socket.socketpair()
        ends.extend((mine, theirs))
        return Channel(mine, Codec(), "peer")

    monkeypatch.setattr(fwdpeers, "connect", connect)
    got: list[Any] = []

    def ask() -> None:
        try:
            got.append(fwd._peer(PEER))
        except TransportError as exc:
            got.append(exc)

    def users() -> int:
        entry = fwd._dialing.get(PEER)
        return entry[1][0] if entry is not None else 0

    threads = [threading.Thread(target=ask, daemon=True) for _ in range(6)]
    try:
        threads[0].start()
        assert _until(lambda: len(dials) == 1)
        for t in threads[1:3]:  # (they wait for the first dial)
            t.start()
        assert _until(lambda: users() == 3)
        dials[0].set()  # fails: the next waiting dials again, the other waits on
        assert _until(lambda: len(dials) == 2 and len(got) == 1)
        for t in threads[3:]:  # (come as the first dial's thread has gone)
            t.start()
        # (they wait for the second dial; with a lock of their own, one dials now)
        assert _until(lambda: users() == 5 or len(dials) > 2), users()
        for gate in dials:
            gate.set()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads)
    finally:
        for gate in dials:
            gate.set()
        rt.stop()
        for end in ends:
            end.close()
    assert len(dials) == 2 and inside[1] == 1, (len(dials), inside)
    assert isinstance(got[0], TransportError), got  # (the first dial's thread)
    kept = [g for g in got if isinstance(g, Channel)]
    assert len(kept) == 5 and all(ch is kept[0] for ch in kept), got
    assert not fwd._dialing
