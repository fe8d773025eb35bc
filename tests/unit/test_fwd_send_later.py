"""Values a replica sends on by its sending threads (worker/fwdpeers.py `send_later`).

A kept value asked for by a Forward is sent by a thread of the replica's own, not by the
one reading its sockets. One thread for every peer sent them one after the other: a
value to a peer whose dial hung (a peer accepting connections but not greeting) held
every value behind it to the other peers, whose consumers waited as long. And stopping
the replica waited for such a dial (the dial held the lock `close` takes), after which
the connection it made was kept, open, by a replica that had stopped, and the value
was sent on it.
"""

from __future__ import annotations

import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polybus.errors import TransportError
from polybus.transport.channel import Channel
from polybus.wire.messages import Deliver, Message, Undelivered
from polybus.worker import fwdpeers
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"fwd-later-token-0123456789abcdef"


class _Client:
    """Stands for the client whose value was forwarded: what it was told. Its connection
    is live (a replica says a value it cannot send on as a fault only while the client
    that asked for it is there: fwdpeers.py `_ending`)."""

    closed = False

    def __init__(self) -> None:
        self.told: list[Message] = []
        self._ends = socket.socketpair()
        weakref.finalize(self, _close, self._ends)

    def fileno(self) -> int:
        return self._ends[0].fileno()


def _close(ends: tuple[socket.socket, socket.socket]) -> None:
    for end in ends:
        end.close()


def _until(cond: Callable[[], bool], within: float = 10.0) -> bool:
    """Whether ``cond()`` became true within ``within`` seconds (looked at every 10 ms)."""
    end = time.monotonic() + within
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def replicas() -> Iterator[Callable[[str], WorkerRuntime]]:
    """replica(name): a started replica, stopped at the end."""
    made: list[WorkerRuntime] = []

    def start(name: str) -> WorkerRuntime:
        rt = WorkerRuntime(name, {}, TOKEN).start()
        made.append(rt)
        return rt

    yield start
    for rt in made:
        rt.stop()


def _senders(rt: WorkerRuntime) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"polybus-forward-{rt.name}")]


def test_a_value_to_one_peer_does_not_wait_behind_a_dial_of_another(
        replicas: Callable[[str], WorkerRuntime], monkeypatch: pytest.MonkeyPatch) -> None:
    _, good, stuck, release, client, fwd = _beside_a_stuck_dial(replicas, monkeypatch)
    try:
        fwd.send_later(stuck, Deliver("to-stuck", True, 1), client)  # type: ignore[arg-type]
        fwd.send_later(str(good.address), Deliver("to-good", True, 2), client)  # type: ignore[arg-type]
        # The good peer's value came while the other peer's dial still waits.
        assert _until(lambda: good.forwarding.received == 1), "it waited behind the dial"
        assert not release.is_set() and not client.told
    finally:
        release.set()
    # The stuck one is said to the client (its consumer fails, it does not wait).
    assert _until(lambda: len(client.told) == 1)
    (said,) = client.told
    assert isinstance(said, Undelivered) and said.key == "to-stuck", said
    assert said.type == "TransportError" and "no greeting" in said.message


def test_stopping_does_not_wait_for_a_dial_nor_keep_what_it_made(
        replicas: Callable[[str], WorkerRuntime], monkeypatch: pytest.MonkeyPatch) -> None:
    sender, peer = replicas("w0"), replicas("w1")
    dialing, go = threading.Event(), threading.Event()
    made: list[Channel] = []
    real = fwdpeers.connect

    def connect(to: Any, *args: Any, **kwargs: Any) -> Channel:
        dialing.set()
        go.wait(30)
        made.append(real(to, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(fwdpeers, "connect", connect)
    client = _Client()
    monkeypatch.setattr(sender, "_send_quietly", lambda ch, msg: client.told.append(msg))
    fwd = sender.forwarding
    fwd.send_later(str(peer.address), Deliver("k", True, 1), client)  # type: ignore[arg-type]
    assert dialing.wait(10)
    closer = threading.Thread(target=fwd.close, name="test-closer", daemon=True)
    closer.start()
    try:
        closer.join(10)
        assert not closer.is_alive(), "close waited for the dial under way"
    finally:
        go.set()
    closer.join(30)
    for t in _senders(sender):
        t.join(30)
        assert not t.is_alive()
    # The connection the dial made once the replica stopped is closed, not kept, and
    # the value was not sent on it: its client is told it did not go.
    assert len(made) == 1 and made[0].closed
    assert not fwd._peers
    (said,) = client.told
    assert isinstance(said, Undelivered) and said.key == "k", said
    assert peer.forwarding.received == 0


def test_a_fault_sending_a_value_is_said_to_its_client_and_the_next_one_goes(
        replicas: Callable[[str], WorkerRuntime], monkeypatch: pytest.MonkeyPatch) -> None:
    # A fault in polybus's own steps was logged alone: the consumer waited for ever
    # (read by the socket-reading thread, it dropped the client's connection, said).
    sender, peer = replicas("w0"), replicas("w1")
    client = _Client()
    monkeypatch.setattr(sender, "_send_quietly", lambda ch, msg: client.told.append(msg))
    fwd = sender.forwarding
    real = fwd._send

    def send(to: str, msg: Deliver, *args: Any, **kwargs: Any) -> bool:
        if msg.key == "bad":
            raise RuntimeError("a fault")
        return real(to, msg, *args, **kwargs)

    monkeypatch.setattr(fwd, "_send", send)
    fwd.send_later(str(peer.address), Deliver("bad", True, 1), client)  # type: ignore[arg-type]
    fwd.send_later(str(peer.address), Deliver("good", True, 2), client)  # type: ignore[arg-type]
    assert _until(lambda: peer.forwarding.received == 1)
    (said,) = client.told
    assert isinstance(said, Undelivered) and said.key == "bad", said
    assert said.type == "RuntimeError" and "a fault" in said.message


# -- the outbox's bounds ---------------------------------------------------------------
# Values waiting for a sending thread were an unbounded deque: behind a peer whose dial
# hung (or whose socket was full) every value asked for meanwhile was kept, with no limit
# in count or bytes. Past a bound a value is not kept: its client is told at once
# (``Undelivered``, a BusyError saying why), the call that asked returns at once.

def _stuck(monkeypatch: pytest.MonkeyPatch, stuck: str) -> threading.Event:
    """Dials of ``stuck`` wait until the event returned is set, then fail."""
    release = threading.Event()
    real = fwdpeers.connect

    def connect(to: Any, *args: Any, **kwargs: Any) -> Channel:
        if str(to) == stuck:
            release.wait(30)
            raise TransportError(f"cannot connect to {to}: no greeting")
        return real(to, *args, **kwargs)

    monkeypatch.setattr(fwdpeers, "connect", connect)
    return release


def _beside_a_stuck_dial(replicas: Callable[[str], WorkerRuntime], monkeypatch: pytest.MonkeyPatch
                         ) -> tuple[WorkerRuntime, WorkerRuntime, str, threading.Event, _Client, Any]:
    """A sender (w0) and a good peer (w1); an address whose dials wait until the event
    returned is set, then fail; the client the sender tells what did not go; the
    sender's forwarding."""
    sender, good = replicas("w0"), replicas("w1")
    stuck = "tcp://127.0.0.1:9"
    release = _stuck(monkeypatch, stuck)
    client = _Client()
    monkeypatch.setattr(sender, "_send_quietly", lambda ch, msg: client.told.append(msg))
    return sender, good, stuck, release, client, sender.forwarding


def _told(client: _Client) -> dict[str, Undelivered]:
    """What ``client`` was told, by key (each key told once: checked)."""
    said = {m.key: m for m in client.told if isinstance(m, Undelivered)}
    assert len(said) == len(client.told), client.told
    return said


def test_a_peer_that_takes_nothing_holds_at_most_the_bound_and_each_value_is_answered(
        replicas: Callable[[str], WorkerRuntime], monkeypatch: pytest.MonkeyPatch) -> None:
    _, good, stuck, release, client, fwd = _beside_a_stuck_dial(replicas, monkeypatch)
    fwd.outbox_max = 3
    try:
        for i in range(6):  # 3 wait (the first one's dial hangs), 3 past the bound
            fwd.send_later(stuck, Deliver(f"v{i}", True, i), client)  # type: ignore[arg-type]
        # Past the bound: told at once, while the dial still hangs.
        assert _until(lambda: len(client.told) == 3)
        said = _told(client)
        assert set(said) == {"v3", "v4", "v5"} and not release.is_set()
        for m in said.values():
            assert m.type == "BusyError" and m.to == stuck, m
            assert "did not send" in m.message and "3 values wait to be sent on to" in m.message
        # Another peer's values still go (its own bound).
        fwd.send_later(str(good.address), Deliver("g", True, 7), client)  # type: ignore[arg-type]
        assert _until(lambda: good.forwarding.received == 1)
    finally:
        release.set()
    # The ones kept are each said once as their dial fails: every value answered once.
    assert _until(lambda: len(client.told) == 6)
    said = _told(client)
    assert set(said) == {f"v{i}" for i in range(6)}
    assert all(said[f"v{i}"].type == "TransportError" for i in range(3))
    # Drained: the bound counts what waits now, not what waited before.
    assert _until(lambda: stuck not in fwd._outbox)
    fwd.send_later(str(good.address), Deliver("g2", True, 8), client)  # type: ignore[arg-type]
    assert _until(lambda: good.forwarding.received == 2)
    assert len(client.told) == 6


def test_the_bytes_waiting_are_bounded_counting_a_value_once(
        replicas: Callable[[str], WorkerRuntime], monkeypatch: pytest.MonkeyPatch) -> None:
    _, good, stuck, release, client, fwd = _beside_a_stuck_dial(replicas, monkeypatch)
    fwd.outbox_bytes_max = 10_000
    big, other = b"x" * 6_000, b"y" * 6_000
    try:
        fwd.send_later(stuck, Deliver("first", True, b"z"), client)  # type: ignore[arg-type]
        fwd.send_later(stuck, Deliver("big", True, big), client)  # type: ignore[arg-type]
        # The same value again (a kept value sent to many consumers) holds no more bytes.
        fwd.send_later(stuck, Deliver("big-again", True, big), client)  # type: ignore[arg-type]
        fwd.send_later(stuck, Deliver("other", True, other), client)  # type: ignore[arg-type]
        assert _until(lambda: len(client.told) == 1)
        (said,) = client.told
        assert isinstance(said, Undelivered) and said.key == "other", said
        assert said.type == "BusyError" and "bytes" in said.message, said
        # A value larger than the bound alone goes to a peer with none waiting.
        fwd.send_later(str(good.address), Deliver("g", True, b"w" * 20_000), client)  # type: ignore[arg-type]
        assert _until(lambda: good.forwarding.received == 1)
    finally:
        release.set()
    assert _until(lambda: len(client.told) == 4)
    said2 = _told(client)
    assert {k: m.type for k, m in said2.items()} == {
        "first": "TransportError", "big": "TransportError", "big-again": "TransportError",
        "other": "BusyError"}
    assert _until(lambda: stuck not in fwd._outbox)
    assert fwd._outbox_bytes == 0  # (every byte counted was let go)


def test_the_peers_sent_to_at_once_are_bounded(
        replicas: Callable[[str], WorkerRuntime], monkeypatch: pytest.MonkeyPatch) -> None:
    # One thread each: an address per value (a client's Forwards name any) made a thread
    # per address, without limit.
    sender, good, stuck, release, client, fwd = _beside_a_stuck_dial(replicas, monkeypatch)
    fwd.senders_max = 1
    try:
        fwd.send_later(stuck, Deliver("s", True, 1), client)  # type: ignore[arg-type]
        fwd.send_later(str(good.address), Deliver("g", True, 2), client)  # type: ignore[arg-type]
        assert _until(lambda: len(client.told) == 1)
        (said,) = client.told
        assert isinstance(said, Undelivered) and said.key == "g" and said.type == "BusyError"
        assert "1 replicas at once" in said.message, said
        assert len(_senders(sender)) == 1
    finally:
        release.set()
    assert _until(lambda: len(client.told) == 2 and stuck not in fwd._outbox)
    fwd.send_later(str(good.address), Deliver("g2", True, 3), client)  # type: ignore[arg-type]
    assert _until(lambda: good.forwarding.received == 1)


def test_a_failed_dial_fails_every_value_that_waited_for_it(
        replicas: Callable[[str], WorkerRuntime], monkeypatch: pytest.MonkeyPatch) -> None:
    # Each value waiting behind a peer that accepts and never greets dialled it again
    # after the one before it had failed, and waited out its own handshake timeout (5 s):
    # the last of 10,000 values waiting was answered some 14 hours later. A dial that
    # fails now fails every value that waited for it; one asked for later dials again.
    sender = replicas("w0")
    stuck = "tcp://127.0.0.1:9"
    release = threading.Event()
    dials: list[str] = []

    def connect(to: Any, *args: Any, **kwargs: Any) -> Channel:
        dials.append(str(to))
        release.wait(30)
        raise TransportError(f"cannot connect to {to}: no greeting")

    monkeypatch.setattr(fwdpeers, "connect", connect)
    client = _Client()
    monkeypatch.setattr(sender, "_send_quietly", lambda ch, msg: client.told.append(msg))
    fwd = sender.forwarding
    try:
        for i in range(5):  # the first one's dial hangs; four wait behind it
            fwd.send_later(stuck, Deliver(f"v{i}", True, i), client)  # type: ignore[arg-type]
        assert _until(lambda: len(dials) == 1)
    finally:
        release.set()
    assert _until(lambda: len(client.told) == 5)
    said = _told(client)
    assert set(said) == {f"v{i}" for i in range(5)}
    for m in said.values():
        assert m.type == "TransportError" and "no greeting" in m.message, m
    assert dials == [stuck]  # one dial for the five
    assert _until(lambda: stuck not in fwd._outbox) and fwd._outbox_count == 0
    # A value asked for after the failure dials again (the peer may be back).
    fwd.send_later(stuck, Deliver("later", True, 9), client)  # type: ignore[arg-type]
    assert _until(lambda: len(client.told) == 6)
    assert dials == [stuck, stuck]
