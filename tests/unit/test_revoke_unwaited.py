"""A timed-out call's Revoke never waits for room in its connection (client/calls.py,
`abandon`; client/sending.py, `send_unwaited`): with a replica that does not read (its
queue full, ``overflow = "block"``), a send that waited for room would hold the
program's timeout until the replica read again. What the connection cannot take now
stays in it, the reactor knows a write is unfinished, and the Revoke reaches the
replica whole, after what was written before it."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace
from typing import Any

from polybus.client.later import Later
from polybus.client.sending import Sending
from polybus.errors import ConnectionLostError, PolybusError
from polybus.transport.channel import LATER, Channel
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Message, Revoke

MiB = 1 << 20


class _Reactor(Sending):
    """Sending's state alone; a send that waits for room waits for ever (nobody reads)."""

    def __init__(self) -> None:
        self.later = Later()
        self._in_send = 0
        self.unfinished = False
        self.blocked = threading.Event()
        self.lost: list[PolybusError] = []

    def _when_full(self) -> None:
        self.blocked.set()
        threading.Event().wait()  # (as a replica that never reads again)

    def _lost(self, link: Any, error: PolybusError) -> None:
        self.lost.append(error)


def test_a_revoke_on_a_full_connection_returns_and_goes_with_the_next_write() -> None:
    a, b = socket.socketpair()
    w, r = Channel(a, Codec(), "replica"), Channel(b, Codec(), "client")
    try:
        early = [Call(1, "f", [b"\x07" * (4 * MiB)])]  # far more than the socket holds
        w.send(early[0], LATER)
        assert w.unsent  # full: the rest of it waits in the channel
        reactor = _Reactor()
        link = SimpleNamespace(channel=w, dead=False)
        done = threading.Event()

        def revoke() -> None:
            reactor.send_unwaited(link, Revoke([1], 0))  # type: ignore[arg-type]
            done.set()

        threading.Thread(target=revoke, daemon=True).start()
        assert done.wait(30), "the Revoke waited for room in the connection"
        assert not reactor.blocked.is_set() and not reactor.lost
        assert reactor.unfinished  # the reactor writes on with it (Reactor._write_unsent)
        got: list[Message] = []

        def read() -> None:
            try:
                while len(got) < 2:
                    got.extend(r.receive())
            except ConnectionLostError:
                pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        while w.unsent:  # (what the pump's turns do: on with it as room comes)
            w.send_unsent(LATER)
        reader.join(30)
        assert [type(m) for m in got] == [Call, Revoke]
        assert got[1] == Revoke([1], 0)
    finally:
        w.close()
        r.close()
