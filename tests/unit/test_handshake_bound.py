"""Handshakes under way at once are bounded per listener, at a replica and a registry.

Each connection's handshake runs in a thread of its own, so that a peer that says
nothing holds no one else up; a crowd of strangers took a thread and a socket each,
without limit. Past ``MAX_HANDSHAKES`` under way a new connection cuts short the oldest
handshake under way, whatever its age; if it cannot (those cut short still count until
their threads end, up to twice the bound) it is closed at once (no challenge sent),
with a warning in the log saying why. Peers that have passed the handshake are not
counted, and once the crowd goes good clients connect again. A crowd that says nothing
and reconnects as it is closed shut good clients out for as long as it went on; then,
while only handshakes under way for 0.25 s or more were cut, a crowd that kept the gate
full of younger ones still closed 1 good run in 3 out; now they get in. A replica's
stop() ends the handshakes under way (their threads held on to their timeout).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from polybus.errors import AuthenticationError
from polybus.registry.service import RegistryService
from polybus.transport.channel import Channel
from polybus.transport.endpoints import (
    HANDSHAKE_TIMEOUT,
    MAX_HANDSHAKES,
    Address,
    HandshakeGate,
    connect,
)
from polybus.transport.greeting import Greeting
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
    """While no handshake under way can be cut (as if every one had been cut already,
    their threads not yet ended), a newcomer is closed."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    worker._greeting.cut_oldest = lambda: False  # type: ignore[method-assign]
    connected: list[Channel] = []
    try:
        for _ in range(CONNECTED):  # passed the handshake: not counted
            connected.append(connect(worker.address, TOKEN, Codec()))
        assert _answer(connected[-1], Call(1, "echo", [1])) == Result(1, 1)
        _drained(worker._gates[worker.address])  # (a thread that sent its ack may not have left)
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
        "at once, and as many cut short have not ended yet; new connections are closed "
        "until one ends",
        f"worker w: on {worker.address}, more connections came at once than its limit of "
        f"{MAX_HANDSHAKES} handshakes under way: 2 new connections were closed unanswered. "
        "Any client of this cluster among them failed to connect (the server closed the "
        "connection) and may try again; if clients keep failing so, something is opening "
        "connections that do not finish the handshake: find it, and stop it or block it "
        "with a firewall"]


def test_a_registry_closes_connections_past_the_bound_at_once(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    with RegistryService(TOKEN, "tcp://127.0.0.1:0") as reg:
        reg._greeting.cut_oldest = lambda: False  # type: ignore[method-assign]
        connected: list[Channel] = []
        try:
            for _ in range(CONNECTED):
                connected.append(connect(str(reg.address), TOKEN, Codec()))
            assert _answer(connected[-1], Resolve(req=1)) == Replicas([], 1)
            _drained(reg._gate)  # (a thread that sent its ack may not have left the gate)
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
    assert said == [f"registry: {MAX_HANDSHAKES} handshakes are under way, the most at once, "
                    "and as many cut short have not ended yet; new connections are closed "
                    "until one ends"]


def test_a_good_client_gets_past_a_crowd_that_says_nothing(
        worker: WorkerRuntime, caplog: pytest.LogCaptureFixture) -> None:
    """A crowd of strangers fills the gate and says nothing, and another comes each time
    one is closed: a good client connects anyway, cutting the oldest stranger's
    handshake short (its connection is closed), and the log says so. A new user's
    trial: 100 such connections, reopened as they were closed, kept every client out.
    The crowd here has only just connected: a gate that cut only handshakes under way
    for 0.25 s or more closed the good client (a tester's crowd of 150 that reconnected
    every 0.2 s failed 1 `polybus run` in 3)."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    gate = worker._gates[worker.address]
    crowd = _crowd(worker.address)
    connected: list[Channel] = []
    try:
        for k in range(3):
            if k:
                crowd.append(_stranger(worker.address))  # the crowd fills the gate again
            good = connect(worker.address, TOKEN, Codec())
            connected.append(good)
            assert _answer(good, Call(k, "echo", [k])) == Result(k, k)
            crowd[k].settimeout(10)
            assert _closed_by_peer(crowd[k])  # the oldest, cut for the newcomer
            deadline = time.monotonic() + 10  # (its thread leaves the gate just after)
            while gate.pending >= MAX_HANDSHAKES and time.monotonic() < deadline:
                time.sleep(0.01)
            assert gate.pending == MAX_HANDSHAKES - 1  # the crowd's, less the one cut
    finally:
        for s in crowd:
            s.close()
        for ch in connected:
            ch.close()
    _drained(gate)
    said = [r.getMessage() for r in caplog.records if "worker w" in r.getMessage()]
    assert said and all(m.startswith(
        f"worker w: on {worker.address}, more connections came at once than its limit of "
        f"{MAX_HANDSHAKES} handshakes under way: 1 handshake under way was cut short (the "
        "oldest first). Any client of this cluster among them failed to connect")
        for m in said[:3]), said
    assert "Broken pipe" not in caplog.text  # (a handshake cut short is no refusal)


def test_a_full_gate_cuts_a_handshake_for_a_newcomer_and_counts_them() -> None:
    gate = HandshakeGate(limit=2)
    assert gate.enter() == 0 and gate.enter() == 0
    assert gate.enter() == 1  # (nothing to cut with)
    assert gate.enter(lambda: False) == 2  # none to cut: refused
    asked: list[bool] = []
    assert gate.enter(lambda: asked.append(True) or True) == 0  # one cut for it
    assert asked == [True] and gate.pending == 3
    assert gate.leave() == (0, 0)  # (still full: said when it is not)
    assert gate.leave() == (2, 1)
    assert gate.enter(lambda: True) == 0 and gate.enter(lambda: True) == 0
    assert gate.pending == 3 and gate.enter(lambda: True) == 0
    assert gate.pending == 4 and gate.enter(lambda: True) == 1  # (twice the limit)


def test_the_oldest_handshake_is_cut_whatever_its_age() -> None:
    """`cut_oldest` cuts the handshakes under way oldest first, one not cut already,
    however young (each here a thread that waits for its connection to be shut down)."""
    greeting = Greeting("hs-test")
    pairs = [socket.socketpair() for _ in range(3)]
    ended: list[int] = []

    def handshake(k: int, waker: socket.socket) -> None:
        pairs[k][0].recv(1)  # (b"" once cut: shut down)
        ended.append(k)
        greeting.done(waker)

    try:
        for k, (a, _b) in enumerate(pairs):
            assert greeting.start(a, partial(handshake, k))
        for k in range(3):
            assert greeting.cut_oldest()
            deadline = time.monotonic() + 10
            while len(ended) <= k and time.monotonic() < deadline:
                time.sleep(0.01)
            assert ended == list(range(k + 1))
        assert not greeting.cut_oldest()  # (none left)
    finally:
        greeting.end(timeout=5)
        for a, b in pairs:
            a.close()
            b.close()


def _stranger(address: Address) -> socket.socket:
    """A peer that connects and says nothing, its handshake under way (it has been
    sent the challenge)."""
    if address.scheme == "tcp":
        s = socket.create_connection((address.host, address.port), timeout=10)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(address.path)
        except BaseException:
            s.close()
            raise
    try:
        assert len(s.recv(handshake.HELLO_SIZE, socket.MSG_WAITALL)) == handshake.HELLO_SIZE
    except BaseException:
        s.close()
        raise
    return s


def _closed_by_peer(s: socket.socket) -> bool:
    """True if ``s``'s peer closed it (EOF or a reset) within its timeout."""
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("scheme", ["tcp", "ipc", "shm"])
def test_a_replica_s_stop_ends_the_handshakes_under_way(
        scheme: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A peer in its handshake when the replica stops (it connected and said nothing)
    is closed with it, and the handshake's thread ends: both ran on to the handshake's
    timeout (60 s here), the thread then logging the connection as refused."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    where = "tcp://127.0.0.1:0" if scheme == "tcp" else f"{scheme}://{tmp_path}/w.sock"
    before = set(threading.enumerate())
    rt = WorkerRuntime("hs-stop", {"echo": lambda x: x}, TOKEN, where,
                       options=ServeOptions(pool=2, handshake_timeout=60.0)).start()
    stopped = False
    try:
        s = _stranger(rt.address)
        try:
            [greeting] = [t for t in threading.enumerate()
                          if t.name == "polybus-hs-stop-handshake"]
            assert rt._gates[rt.address].pending == 1
            rt.stop()
            stopped = True
            greeting.join(timeout=HANDSHAKE_TIMEOUT)  # a bound, well short of the 60 s
            assert not greeting.is_alive()
            assert _closed_by_peer(s)  # (its timeout is 10 s, the handshake's 60 s)
            assert rt._gates[rt.address].pending == 0
        finally:
            s.close()
    finally:
        if not stopped:
            rt.stop()
    left = [t for t in set(threading.enumerate()) - before if t.name.startswith("polybus-hs-stop")]
    for t in left:  # (stop() has joined the pool's: this is a bound)
        t.join(timeout=HANDSHAKE_TIMEOUT)
    assert [t.name for t in left if t.is_alive()] == []
    assert "refused" not in caplog.text
    assert "dropped a connection" not in caplog.text


def test_a_replica_s_stop_says_nothing_of_its_full_gate(
        worker: WorkerRuntime, caplog: pytest.LogCaptureFixture) -> None:
    """A replica stopped while its gate is full, a handshake cut short for a newcomer
    and not yet said: stop() ends the handshakes under way, and the gate's count came
    out as the first of them left, a warning that handshakes were cut short at every
    such stop. Nor is a client in its handshake then told that it was cut short."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    gate = worker._gates[worker.address]
    crowd = _crowd(worker.address)
    try:
        crowd.append(_stranger(worker.address))  # cuts the oldest short (not yet said)
        client = _stranger(worker.address)  # (and the next: a client, in its handshake)
        crowd.append(client)
        assert gate.cut == 2
        threads = [t for t in threading.enumerate() if t.name == "polybus-w-handshake"]
        worker.stop()
        for t in threads:
            t.join(timeout=HANDSHAKE_TIMEOUT)
        assert not any(t.is_alive() for t in threads) and gate.pending == 0
        assert [r.getMessage() for r in caplog.records] == []
        answer = client.recv(handshake.ANSWER_SIZE)  # (b"": closed)
        with pytest.raises(AuthenticationError, match="it may be stopping"):
            handshake.ClientHandshake(TOKEN).verify(answer)
    finally:
        for s in crowd:
            s.close()


def test_a_registry_s_close_says_nothing_of_its_full_gate(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    with RegistryService(TOKEN, "tcp://127.0.0.1:0") as reg:
        crowd = _crowd(reg.address)
        try:
            crowd.append(_stranger(reg.address))  # cuts the oldest short (not yet said)
            assert reg._gate.cut == 1
            threads = [t for t in threading.enumerate() if t.name == "polybus-registry-conn"]
            reg.close()
            for t in threads:
                t.join(timeout=HANDSHAKE_TIMEOUT)
            assert not any(t.is_alive() for t in threads) and reg._gate.pending == 0
            assert [r.getMessage() for r in caplog.records] == []
        finally:
            for s in crowd:
                s.close()
