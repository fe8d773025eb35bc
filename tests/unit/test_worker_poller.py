"""ReadPoller: registered sockets come back as the objects they stand for."""

from __future__ import annotations

import socket

import pytest

from polybus.worker.poller import ReadPoller


def test_poll_returns_the_registered_objects_of_readable_sockets() -> None:
    poller = ReadPoller()
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    try:
        poller.register(a, "first")
        poller.register(c, "second")
        assert poller.poll(0) == []
        b.send(b"x")
        assert poller.poll(1.0) == ["first"]
        d.send(b"y")
        assert sorted(poller.poll(1.0)) == ["first", "second"]
    finally:
        poller.close()
        for s in (a, b, c, d):
            s.close()


def test_unregister_forgets_and_refuses_what_it_does_not_know() -> None:
    poller = ReadPoller()
    a, b = socket.socketpair()
    try:
        poller.register(a, "it")
        b.send(b"x")
        poller.unregister(a)
        assert poller.poll(0) == []
        with pytest.raises(KeyError):
            poller.unregister(a)
    finally:
        poller.close()
        a.close()
        b.close()


def test_a_closed_peer_counts_as_readable() -> None:
    poller = ReadPoller()
    a, b = socket.socketpair()
    try:
        poller.register(a, "it")
        b.close()
        assert poller.poll(1.0) == ["it"]
    finally:
        poller.close()
        a.close()
