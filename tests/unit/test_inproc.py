"""inproc://NAME: a listener and its connections within one process (transport/inproc.py).

Its name is this process's alone and taken while it listens; its descriptor is readable
exactly while a connection waits (the worker's poller sleeps on it); its connections
pass the same token handshake as any other before anything is decoded.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.errors import AuthenticationError, PolybusError, TransportError
from polybus.transport import inproc
from polybus.transport.channel import Channel
from polybus.transport.endpoints import Address, authenticate, connect, listen
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Result

TOKEN = b"inproc-token-0123456789abcdef0123"


@pytest.fixture
def name(tmp_path: Path) -> str:
    """A name no other test listens on (the test's own directory; nothing is made there)."""
    return f"{tmp_path}/l"


@pytest.fixture
def listener(name: str) -> Iterator[inproc.InprocListener]:
    lst = inproc.listen(name)
    try:
        yield lst
    finally:
        lst.close()


def _readable(lst: inproc.InprocListener) -> bool:
    return bool(select.select([lst], [], [], 0)[0])


def test_addresses_parse_and_print() -> None:
    assert Address.parse("inproc://tests/a b") == Address("inproc", path="tests/a b")
    assert str(Address.parse("inproc://reg")) == "inproc://reg"
    with pytest.raises(TransportError, match=r"bad address 'inproc://': expected inproc://NAME"):
        Address.parse("inproc://")
    with pytest.raises(TransportError, match=r"unknown transport 'udp'.*\(tcp, ipc, shm, or "
                                             r"inproc within one process\)"):
        Address.parse("udp://h:1")


def test_a_name_is_taken_while_it_listens_and_free_once_closed(name: str) -> None:
    first, real = listen(Address.parse(f"inproc://{name}"))
    assert real == Address("inproc", path=name) and not os.path.lexists(name)
    with pytest.raises(TransportError, match="a listener of this process has that name"):
        listen(real)
    first.close()
    first.close()  # (twice: nothing more)
    again, _ = listen(real)
    again.close()


def test_an_unknown_name_is_said_as_no_listener_in_this_process(name: str) -> None:
    with pytest.raises(TransportError, match=f"cannot connect to inproc://{name}: no "
                                             "listener of that name in this process"):
        connect(f"inproc://{name}", TOKEN, Codec())


def test_its_descriptor_is_readable_exactly_while_a_connection_waits(
        listener: inproc.InprocListener, name: str) -> None:
    listener.setblocking(False)  # (as the worker's poller has it)
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert not _readable(listener)
    dialled = [inproc.dial(name, 1.0) for _ in range(2)]
    taken = []
    try:
        assert _readable(listener)
        taken.append(listener.accept())
        assert _readable(listener)  # (one still waits)
        taken.append(listener.accept())
        assert not _readable(listener)
        with pytest.raises(BlockingIOError):
            listener.accept()
        assert [str(peer) for _, peer in taken] == [
            f"in-process peer {i} of inproc://{name}" for i in (1, 2)]
    finally:
        for s in dialled + [s for s, _ in taken]:
            s.close()


def test_a_blocked_accept_wakes_when_the_listener_closes(
        listener: inproc.InprocListener) -> None:
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            listener.accept()
        except BaseException as exc:
            raised.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    listener.shutdown()  # (whether it is in accept() yet or not: it raises either way)
    t.join(10)
    assert not t.is_alive() and len(raised) == 1 and isinstance(raised[0], OSError)
    listener.settimeout(0.01)
    with pytest.raises(OSError):
        listener.accept()


def test_a_timeout_with_none_waiting(listener: inproc.InprocListener) -> None:
    listener.settimeout(0.01)
    assert listener.gettimeout() == 0.01
    with pytest.raises(TimeoutError):
        listener.accept()


def test_a_connection_left_waiting_when_the_listener_closes_is_refused(
        listener: inproc.InprocListener, name: str) -> None:
    raised: list[BaseException] = []

    def dial() -> None:
        try:
            connect(f"inproc://{name}", TOKEN, Codec()).close()
        except BaseException as exc:
            raised.append(exc)

    t = threading.Thread(target=dial)
    t.start()
    select.select([listener], [], [])  # (blocks until the connection waits)
    listener.close()
    t.join(10)
    assert len(raised) == 1 and isinstance(raised[0], TransportError), raised
    assert "closed the connection without a greeting" in str(raised[0])
    assert listener.fileno() == -1


def test_a_wrong_token_is_refused_by_both_sides(listener: inproc.InprocListener,
                                                name: str) -> None:
    served: list[Channel | PolybusError] = []

    def serve() -> None:
        try:
            served.append(authenticate(*listener.accept(), TOKEN, Codec()))
        except PolybusError as exc:
            served.append(exc)

    t = threading.Thread(target=serve)
    t.start()
    with pytest.raises(AuthenticationError):
        connect(f"inproc://{name}", b"another-token-0123456789abcdef012", Codec())
    t.join(10)
    assert len(served) == 1 and isinstance(served[0], AuthenticationError)
    assert f"in-process peer 1 of inproc://{name}" in str(served[0])


def test_an_authenticated_pair_is_an_ordinary_channel(listener: inproc.InprocListener,
                                                      name: str) -> None:
    served: list[Channel] = []
    t = threading.Thread(target=lambda: served.append(
        authenticate(*listener.accept(), TOKEN, Codec())))
    t.start()
    client = connect(f"inproc://{name}", TOKEN, Codec())
    t.join(10)
    try:
        assert type(client) is Channel and type(served[0]) is Channel
        assert client.peer == f"inproc://{name}"
        client.send(Call(1, "f", [b"x" * 100_000]))
        got: list[object] = []
        while not got:
            got = served[0].receive()
        assert got == [Call(1, "f", [b"x" * 100_000])]
        served[0].send(Result(1, 2))
        while not (back := client.receive()):
            pass
        assert back == [Result(1, 2)]
    finally:
        client.close()
        for ch in served:
            ch.close()


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_forked_child_does_not_reach_the_parents_names(
        listener: inproc.InprocListener, name: str) -> None:
    """Not reachable from another process, a child forked from this one included."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: says whether the name was unknown there, and ends
        try:
            inproc.dial(name, 1.0)
            said = b"reached"
        except TransportError as exc:
            said = b"unknown" if "no listener of that name" in str(exc) else b"other"
        except BaseException:
            said = b"other"
        os.write(w, said)
        os._exit(0)
    os.close(w)
    try:
        said = os.read(r, 16)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    assert said == b"unknown"
    assert not _readable(listener)  # (and nothing was queued here)
