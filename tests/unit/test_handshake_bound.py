"""Handshakes under way at once are bounded per listener, at a replica and a registry.

Each connection's handshake runs in a thread of its own, so that a peer that says
nothing holds no one else up; a crowd of strangers took a thread and a socket each,
without limit. Past ``MAX_HANDSHAKES`` under way a new connection is closed at once
(no challenge sent), with a warning in the log saying why; peers that have passed the
handshake are not counted, and once the crowd goes good clients connect again.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator

import pytest

from polybus.registry.service import RegistryService
from polybus.transport.channel import Channel
from polybus.transport.endpoints import MAX_HANDSHAKES, Address, HandshakeGate, connect
from polybus.wire import handshake
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Message, Replicas, Resolve, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"handshake-bound-token-0123456789"
CONNECTED = MAX_HANDSHAKES + 6  # authenticated peers held open: more than the bound


def _answer(ch: Channel, msg: Message) -> Message | None:
    ch.send(msg)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        got = ch.receive()
        if got:
            return got[0]
    return None


def _crowd(address: Address) -> list[socket.socket]:
    """MAX_HANDSHAKES strangers that say nothing, each one's handshake under way (it
    has been sent the challenge)."""
    crowd: list[socket.socket] = []
    try:
        for _ in range(MAX_HANDSHAKES):
            s = socket.create_connection((address.host, address.port), timeout=10)
            crowd.append(s)
            assert len(s.recv(handshake.HELLO_SIZE, socket.MSG_WAITALL)) == handshake.HELLO_SIZE
    except BaseException:
        for s in crowd:
            s.close()
        raise
    return crowd


def _closed_at_once(address: Address) -> bool:
    """One more stranger: True if its connection is closed with nothing sent to it (a
    handshake would send the challenge; it has 10 s to)."""
    with socket.create_connection((address.host, address.port), timeout=10) as s:
        try:
            return s.recv(handshake.HELLO_SIZE) == b""
        except ConnectionResetError:
            return True


def _drained(gate: HandshakeGate) -> None:
    """Wait until the crowd's handshakes (which fail as their peers went) have ended."""
    deadline = time.monotonic() + 10
    while gate.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gate.pending == 0


@pytest.fixture
def worker() -> Iterator[WorkerRuntime]:
    # A long handshake_timeout: the crowd's handshakes stay under way throughout.
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN,
                       options=ServeOptions(pool=2, handshake_timeout=60.0)).start()
    try:
        yield rt
    finally:
        rt.stop()


def test_a_replica_closes_connections_past_the_bound_at_once(
        worker: WorkerRuntime, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    connected: list[Channel] = []
    try:
        for _ in range(CONNECTED):  # passed the handshake: not counted
            connected.append(connect(worker.address, TOKEN, Codec()))
        assert _answer(connected[-1], Call(1, "echo", [1])) == Result(1, 1)
        crowd = _crowd(worker.address)
        try:
            assert _closed_at_once(worker.address)
            assert _closed_at_once(worker.address)
            assert _answer(connected[0], Call(2, "echo", [2])) == Result(2, 2)  # served on
        finally:
            for s in crowd:
                s.close()
        _drained(worker._gates[worker.address])
        late = connect(worker.address, TOKEN, Codec())
        connected.append(late)
        assert _answer(late, Call(3, "echo", [3])) == Result(3, 3)
    finally:
        for ch in connected:
            ch.close()
    said = [r.getMessage() for r in caplog.records if "handshakes" in r.getMessage()]
    assert said == [
        f"worker w: {MAX_HANDSHAKES} handshakes are under way on {worker.address}, the most "
        "at once; new connections are closed until one ends",
        f"worker w: 2 connections to {worker.address} were closed while {MAX_HANDSHAKES} "
        "handshakes were under way"]


def test_a_registry_closes_connections_past_the_bound_at_once(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    with RegistryService(TOKEN, "tcp://127.0.0.1:0") as reg:
        connected: list[Channel] = []
        try:
            for _ in range(CONNECTED):
                connected.append(connect(str(reg.address), TOKEN, Codec()))
            assert _answer(connected[-1], Resolve(req=1)) == Replicas([], 1)
            crowd = _crowd(reg.address)
            try:
                assert _closed_at_once(reg.address)
                assert _answer(connected[0], Resolve(req=2)) == Replicas([], 2)
            finally:
                for s in crowd:
                    s.close()
            _drained(reg._gate)
            late = connect(str(reg.address), TOKEN, Codec())
            connected.append(late)
            assert _answer(late, Resolve(req=3)) == Replicas([], 3)
        finally:
            for ch in connected:
                ch.close()
    said = [r.getMessage() for r in caplog.records if "handshakes" in r.getMessage()]
    assert said == [f"registry: {MAX_HANDSHAKES} handshakes are under way, the most at once; "
                    "new connections are closed until one ends"]
