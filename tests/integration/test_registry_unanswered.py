"""A registry that accepts a connection, passes the handshake and then answers nothing
(its process stopped or hung, or another polybus peer at its address) fails each
request within the client's bound (registry/client.py), rather than holding its caller
for ever: a run's start-up (its resolve), a worker's registration, a look for a lost
replica. The connection is closed then, so a late answer is never read as the answer
to the next request; a slow registry within the bound is waited for, and `interrupt`
still ends a wait at once.

The registry is a real `RegistryService` in this process whose answers to the requests
chosen are held (`Muted`): it reads them, and answers when let go, or never.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from integration.conftest import EXAMPLES, cli, side_by_side
from polybus.client.revive import Wanted, dial
from polybus.errors import ConnectionLostError, TransportError
from polybus.registry.client import Membership, RegistryClient
from polybus.registry.service import RegistryService
from polybus.wire.messages import Heartbeat, Message, Register, Replica, Resolve

TOKEN = b"unanswered-token-0123456789abcdef"
SORT = EXAMPLES / "sort"


@dataclass
class Muted:
    """A registry whose answers to ``held`` message types wait until ``go`` is set (or
    ``delay`` s, if given, for one slow but live); ``asked`` is set at each held one."""

    registry: RegistryService
    held: tuple[type[Message], ...]
    delay: float | None = None
    go: threading.Event = field(default_factory=threading.Event)
    asked: threading.Event = field(default_factory=threading.Event)
    answered: threading.Event = field(default_factory=threading.Event)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.registry.address.port}"


@contextmanager
def muted(*held: type[Message], delay: float | None = None) -> Iterator[Muted]:
    with RegistryService(TOKEN, "tcp://127.0.0.1:0", ttl=60) as reg:
        m = Muted(reg, held, delay)
        handle = reg._handle

        def holding(msg: Message, owner: int) -> Message | None:
            if isinstance(msg, m.held):
                m.asked.set()
                m.go.wait(delay if delay is not None else 60)
                try:
                    return handle(msg, owner)
                finally:
                    m.answered.set()
            return handle(msg, owner)
        reg._handle = holding  # type: ignore[method-assign]
        try:
            yield m
        finally:
            m.go.set()  # (its connection threads end with it)


def _within(bound: float, request: Callable[[], Any]) -> Any:
    """``request()``'s value, or the exception it raised, run on a thread joined for at
    most ``bound`` s: a request still waiting then is the failure."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(request())
        except BaseException as exc:
            out.append(exc)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(bound)
    assert not t.is_alive(), f"the request was still waiting for the registry after {bound} s"
    return out[0]


@contextmanager
def asking(m: Muted, timeout: float = 5.0) -> Iterator[RegistryClient]:
    """A client of ``m``, its connection cut at the end (a request still waiting, on
    the old code, ends then) and closed."""
    client = RegistryClient(m.address, TOKEN, timeout=timeout)
    try:
        yield client
    finally:
        client.interrupt()
        client.close()


REPLICA = Replica("server-0", "server", "tcp://127.0.0.1:5000", ["f"])


@pytest.mark.parametrize("what", ["resolve", "register"])
def test_a_request_the_registry_never_answers_fails_within_the_bound(what: str) -> None:
    with muted(Resolve, Register) as m, asking(m, timeout=1.0) as client:
        request = ((lambda: client.resolve(module="server")) if what == "resolve"
                   else (lambda: client.register(REPLICA)))
        got = _within(20, request)
        assert m.asked.is_set()
        assert isinstance(got, ConnectionLostError), got
        assert str(got).startswith(
            f"the registry at {m.address} accepted the connection and has not "
            f"answered a {what} in 1 s: "), got
        assert client._ch is None  # (closed: a late answer is read by no one)


def test_a_look_for_a_lost_replica_ends_within_the_bound() -> None:
    # (client/rejoin.py's and http/revival.py's looks: said, and looked for again)
    with muted(Resolve) as m:
        w = Wanted("server", "server", "tcp", frozenset(), ("server-0",), m.address, TOKEN,
                   False, 1 << 20)
        got = _within(20, lambda: dial(w))
        assert isinstance(got, ConnectionLostError), got
        assert "has not answered a resolve in 5 s" in str(got)


def test_a_late_answer_is_not_taken_for_the_next_requests() -> None:
    # A heartbeat's answer held past the bound, then sent: the registration after it
    # must get its own answer, not the heartbeat's "not registered".
    with muted(Heartbeat) as m, asking(m, timeout=1.0) as client:
        with pytest.raises(ConnectionLostError, match="has not answered a heartbeat"):
            client.heartbeat("server-0")
        old = client._ch
        m.go.set()
        assert m.answered.wait(20)
        if old is not None and not old.closed:  # (kept open: its late answer arrives)
            select.select([old], [], [], 20)
        client.register(REPLICA)
        assert [r.name for r in client.resolve(module="server")] == ["server-0"]


def test_a_slow_registry_within_the_bound_is_waited_for() -> None:
    with muted(Resolve, Register, delay=1.0) as m, asking(m) as client:  # (the bound: 5 s)
        client.register(REPLICA)
        assert [r.name for r in client.resolve(module="server")] == ["server-0"]


def test_interrupt_ends_a_wait_for_the_answer_at_once() -> None:
    with muted(Resolve) as m, asking(m, timeout=60.0) as client:
        waiter = threading.Thread(target=m.asked.wait, args=(20,))
        waiter.start()
        interrupter = threading.Thread(
            target=lambda: (waiter.join(), client.interrupt()), daemon=True)
        interrupter.start()
        got = _within(20, lambda: client.resolve(module="server"))
        assert isinstance(got, TransportError), got
        assert "has not answered" not in str(got)  # (ended by the interrupt)
        with pytest.raises(TransportError, match="was interrupted"):
            client.resolve(module="server")


def test_run_and_worker_at_a_registry_that_never_answers_say_so() -> None:
    env = {"POLYBUS_TOKEN": TOKEN.decode()}
    with muted(Resolve, Register) as m:
        run, worker = side_by_side(
            lambda: cli("run", SORT / "app.toml", "--registry", m.address, env=env,
                        timeout=60),
            lambda: cli("worker", "--registry", m.address, "--module", SORT / "server.py",
                        env=env, timeout=60))
    for p, what in ((run, "resolve"), (worker, "register")):
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert (f"the registry at {m.address} accepted the connection and has not "
                f"answered a {what} in 5 s: ") in p.stderr, p.stderr


def test_a_worker_stopped_while_its_heartbeat_waits_stops_at_once() -> None:
    # A worker's SIGTERM (`Membership.stop`, then the client closed: worker/main.py)
    # while a heartbeat waits for a registry that does not answer (stopped, hung, its
    # host gone): stop() gave the heartbeat thread 2 s, then the close waited for the
    # heartbeat's own bound (5 s; 60 here, to tell the two apart) to end the request.
    with muted(Heartbeat) as m:
        client = RegistryClient(m.address, TOKEN, timeout=60.0)
        said: list[str] = []
        membership = Membership(client, REPLICA, 0.05, say=said.append)
        try:
            membership.start()
            assert m.asked.wait(20)  # a heartbeat is waiting for its answer
            got = _within(20, lambda: (membership.stop(), client.close()))
            assert not isinstance(got, BaseException), got
            assert not any(t.name == "polybus-heartbeat" and t.is_alive()
                           for t in threading.enumerate()), "the heartbeat thread outlived stop()"
            assert said == []  # (its request ended by the stop: not "lost the registry")
        finally:
            client.interrupt()
            client.close()
