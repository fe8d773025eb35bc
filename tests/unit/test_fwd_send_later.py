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

import threading
import time
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
    """Stands for the client whose value was forwarded: what it was told."""

    def __init__(self) -> None:
        self.told: list[Message] = []


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
    sender, good = replicas("w0"), replicas("w1")
    stuck = "tcp://127.0.0.1:9"  # its dial waits until the test lets it fail
    release = threading.Event()
    real = fwdpeers.connect

    def connect(to: Any, *args: Any, **kwargs: Any) -> Channel:
        if str(to) == stuck:
            release.wait(30)
            raise TransportError(f"cannot connect to {to}: no greeting")
        return real(to, *args, **kwargs)

    monkeypatch.setattr(fwdpeers, "connect", connect)
    client = _Client()
    monkeypatch.setattr(sender, "_send_quietly", lambda ch, msg: client.told.append(msg))
    fwd = sender.forwarding
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
