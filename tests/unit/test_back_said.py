"""Which place filled again says so (client/revive.py `install`, ``ReplicaLink.back``):
a lost worker's coming back once, however many connections the run had to it, and
another worker's taking its place once; the one not said for the other.

A real Session with no replica (its registry never dialled): two places of module
``server``'s replica server-0, its module's transport and a binding's other one, each
a connection of a socket pair, lost as the reactor loses one, then filled by `install`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.revive import Found, install
from polybus.client.session import Session
from polybus.config import load
from polybus.errors import ConnectionLostError
from polybus.testing.apps import write_one_call_app
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec
from polybus.wire.messages import Replica

KEYS = ("server", "server@tcp")


_SOCKS: list[socket.socket] = []  # (the test's own, each closed at its end)


def _pair() -> socket.socket:
    a, b = socket.socketpair()
    _SOCKS.extend((a, b))
    return a


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    """A session whose two places of server-0 were lost."""
    app = load(write_one_call_app(tmp_path))
    s = Session(app, "127.0.0.1:1", b"t" * 32, bindings=[], pump=False)
    try:
        for key in KEYS:
            link = ReplicaLink("server-0", "server", Channel(_pair(), Codec(), "server-0"))
            s.links[key] = [link]
            s.reactor._lost(link, ConnectionLostError("server-0 is gone"))
        yield s
    finally:
        s.close()
        while _SOCKS:
            _SOCKS.pop().close()


def _fill(s: Session, key: str, name: str) -> ReplicaLink:
    found = Found(Replica(name, "server", "tcp://127.0.0.1:1", ["f"]),
                  Channel(_pair(), Codec(), name))
    [link] = install(s, key, [found])
    return link


def test_the_lost_worker_is_back_once_over_both_its_places(session: Session) -> None:
    assert [_fill(session, k, "server-0").back for k in KEYS] == [True, False]


def test_the_lost_worker_back_after_another_took_a_place_is_said(session: Session) -> None:
    """server-9 took the first place ("takes the place of lost replica server-0"); then
    server-0, started again, filled the second: nothing said that the run now uses it."""
    assert _fill(session, KEYS[0], "server-9").back
    assert _fill(session, KEYS[1], "server-0").back
