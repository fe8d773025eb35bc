"""A value a replica cannot send on as the run ends is not said as a fault
(worker/fwdpeers.py `_unreachable`).

At the end of a run the client closes its connections, then the engine stops every
replica at once (SIGTERM). A producer still running a call whose value was asked to go
to another replica (its consumer already answered: failed by another producer, the
error the program ended with) finished it as the consumer's replica stopped, and said
`worker server-1: cannot forward to tcp://...: handshake with ... failed: [Errno 104]
Connection reset by peer (said once until it is reached again)` (the dial sat in the
stopping replica's accept queue as it closed its listener; or "Connection refused",
once closed): 1 run in 5 of a program whose calls were refused as busy. No one could
use that value: it is said at debug level when this replica is stopping or the client
whose request it was has gone. A peer that cannot be reached while the run goes on is
still said, once until it is reached again.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from polybus.errors import TransportError
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Deliver, Forward, Message, Undelivered
from polybus.worker import fwdpeers
from polybus.worker.runtime import WorkerRuntime
from unit.test_fwd_send_later import _Client, _until

TOKEN = b"fwd-run-ending-token-0123456789ab"
SAID = "cannot forward to"


def _said(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """The "cannot forward" lines logged at ``level``."""
    return [r.getMessage() for r in caplog.records
            if r.levelno == level and SAID in r.getMessage()]


@pytest.fixture
def stopped_peer() -> str:
    """The address of a replica that has stopped (its listener closed)."""
    peer = WorkerRuntime("w1", {}, TOKEN).start()
    peer.stop()
    return str(peer.address)


@pytest.fixture
def pair() -> Iterator[tuple[Channel, socket.socket]]:
    """A client's connection as the replica holds it, and the client's end of it."""
    mine, theirs = socket.socketpair()
    ch = Channel(mine, Codec(), "client")
    try:
        yield ch, theirs
    finally:
        ch.close()
        theirs.close()


def test_a_value_sent_on_as_its_replica_stops_is_not_said_as_a_fault(
        stopped_peer: str, caplog: pytest.LogCaptureFixture) -> None:
    # The run's end as it came: the producer stopping (SIGTERM) while its call runs,
    # the call finishing then, its value asked to go to a replica stopped already.
    running, release = threading.Event(), threading.Event()

    def f(x: int) -> int:
        running.set()
        release.wait(30)
        return x

    sender = WorkerRuntime("w0", {"f": f}, TOKEN).start()
    client = connect(str(sender.address), TOKEN, Codec())
    stopper = threading.Thread(target=sender.stop, name="test-stopper", daemon=True)
    try:
        client.send(Call(1, "f", [7]))
        client.send(Forward(1, "n.1", "n.2.0", stopped_peer))
        assert running.wait(10)
        assert _until(lambda: bool(sender.forwarding.targets)), "the Forward was not read"
        with caplog.at_level(logging.DEBUG, logger="polybus.worker"):
            stopper.start()
            assert _until(lambda: sender._stopping)
            release.set()
            stopper.join(30)
            assert not stopper.is_alive()
    finally:
        release.set()
        client.close()
        if not stopper.is_alive() and not sender._stopping:
            sender.stop()
    assert not _said(caplog, logging.WARNING), caplog.text
    (quiet,) = _said(caplog, logging.DEBUG)  # (it was tried, and said there)
    assert stopped_peer in quiet and "stopping" in quiet, quiet


def test_a_value_whose_client_has_gone_is_not_said_as_a_fault_and_then_one_is(
        stopped_peer: str, pair: tuple[Channel, socket.socket],
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    sender = WorkerRuntime("w0", {}, TOKEN).start()
    told: list[Message] = []
    monkeypatch.setattr(sender, "_send_quietly", lambda ch, msg: told.append(msg))
    gone, end = pair
    end.close()  # (the client closed its connections: the run ended)
    live, theirs = socket.socketpair()
    alive = Channel(live, Codec(), "client")
    try:
        with caplog.at_level(logging.DEBUG, logger="polybus.worker"):
            assert not sender.forwarding._send(stopped_peer, Deliver("a", True, 1), gone)
            assert not _said(caplog, logging.WARNING), caplog.text
            (quiet,) = _said(caplog, logging.DEBUG)
            assert "client" in quiet and "gone" in quiet, quiet
            # A peer that cannot be reached while the run goes on: said, once until it
            # is reached again (the quiet one above did not count as said).
            for key in ("b", "c"):
                assert not sender.forwarding._send(stopped_peer, Deliver(key, True, 1), alive)
    finally:
        sender.stop()
        alive.close()
        theirs.close()
    (said,) = _said(caplog, logging.WARNING)
    assert stopped_peer in said and "said once until it is reached again" in said, said
    # Each value's client is told, as ever (the one gone too: it hears nothing).
    assert [(m.key, type(m)) for m in told] == [(k, Undelivered) for k in "abc"], told


def test_a_peer_out_of_reach_during_the_run_is_said_for_each_path(
        stopped_peer: str, pair: tuple[Channel, socket.socket],
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # (send_later: a value asked for after its answer, sent by a thread of its own)
    sender = WorkerRuntime("w0", {}, TOKEN).start()
    told: list[Any] = []
    monkeypatch.setattr(sender, "_send_quietly", lambda ch, msg: told.append(msg))
    alive, _ = pair
    try:
        with caplog.at_level(logging.WARNING, logger="polybus.worker"):
            sender.forwarding.send_later(stopped_peer, Deliver("k", True, 1), alive)
            assert _until(lambda: bool(told))
    finally:
        sender.stop()
    (said,) = _said(caplog, logging.WARNING)
    assert stopped_peer in said, said


def test_a_failed_dial_is_said_if_a_value_behind_it_is_a_live_clients(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # Values of two clients wait for one dial of a peer out of reach: the first one's
    # client has gone, the second's run goes on. The dial fails them both; the peer out
    # of reach is a fault the live client's run meets, said as one (it was said at debug
    # level, as for a value no one could use, for the first value's client alone).
    sender = WorkerRuntime("w0", {}, TOKEN).start()
    release = threading.Event()
    dials: list[str] = []

    def connect(to: Any, *args: Any, **kwargs: Any) -> Channel:
        dials.append(str(to))
        release.wait(30)
        raise TransportError(f"cannot connect to {to}: refused")

    monkeypatch.setattr(fwdpeers, "connect", connect)
    told: list[Message] = []
    monkeypatch.setattr(sender, "_send_quietly", lambda ch, msg: told.append(msg))
    peer = "tcp://127.0.0.1:9"
    gone = _Client()
    gone.closed = True  # (the run that asked for the first value ended)
    alive = _Client()
    fwd = sender.forwarding
    try:
        with caplog.at_level(logging.DEBUG, logger="polybus.worker"):
            fwd.send_later(peer, Deliver("a", True, 1), gone)  # type: ignore[arg-type]
            assert _until(lambda: len(dials) == 1)  # (its dial hangs: the next waits)
            fwd.send_later(peer, Deliver("b", True, 2), alive)  # type: ignore[arg-type]
            release.set()
            assert _until(lambda: len(told) == 2), told
    finally:
        release.set()
        sender.stop()
    assert dials == [peer]  # (one dial failed them both)
    (said,) = _said(caplog, logging.WARNING)
    assert peer in said and "said once until it is reached again" in said, said
