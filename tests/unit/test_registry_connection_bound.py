"""What one authenticated connection may make the registry hold (registry/limits.py,
registry/state.py), at a live registry over loopback TCP.

A token holder could register replicas under ever new names over one connection, and
the registry stored every one (20,000 over one connection were all held). Past
`REGISTRATIONS_MAX` a Register is refused now, naming the limit; what the connection
registered stays, it is still served, and so is everyone else. Resolves, heartbeats and
unregisters of names no one registered hold nothing, however many come."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from polybus.registry.client import RegistrationRefused, RegistryClient
from polybus.registry.limits import REGISTRATIONS_MAX
from polybus.registry.service import RegistryService
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import (
    Heartbeat,
    Message,
    Register,
    Registered,
    Replica,
    Replicas,
    Resolve,
    Unregister,
)

TOKEN = b"registry-bound-token-0123456789abcd"
GOOD = "tcp://127.0.0.1:9"


@pytest.fixture
def said_lines() -> list[str]:
    return []


@pytest.fixture
def registry(said_lines: list[str]) -> Iterator[RegistryService]:
    with RegistryService(TOKEN, "tcp://127.0.0.1:0", ttl=600.0, say=said_lines.append) as reg:
        yield reg


def _replica(name: str, module: str = "m") -> Replica:
    return Replica(name, module, GOOD, ["f", "g"])


def _answer(ch: Channel, msg: Message) -> Message:
    ch.send(msg)
    while not (got := ch.receive()):
        pass
    assert len(got) == 1, got
    return got[0]


def test_a_connection_past_its_limit_of_registrations_is_refused_and_served_on(
        registry: RegistryService, ch: Channel, said_lines: list[str]) -> None:
    for i in range(REGISTRATIONS_MAX):
        assert _answer(ch, Register(_replica(f"m-{i}"))) == Registered(True)
    got = _answer(ch, Register(_replica("one-too-many")))
    assert isinstance(got, Registered) and not got.ok
    assert got.reason.startswith(f"this connection holds {REGISTRATIONS_MAX:,} "
                                 f"registrations, the registry's limit for one connection "
                                 f"({REGISTRATIONS_MAX:,})"), got.reason
    assert [ln for ln in said_lines if "refused" in ln] == [
        f"registry: refused 'one-too-many' at '{GOOD}': {got.reason}"]
    # The connection keeps what it holds, and is served on: heartbeats, a registration
    # again under a name it holds, resolves; one unregistered makes room for another.
    assert len(registry.state.names()) == REGISTRATIONS_MAX
    assert _answer(ch, Heartbeat("m-7")) == Registered(True)
    assert _answer(ch, Register(_replica("m-7"))) == Registered(True)
    found = _answer(ch, Resolve(module="m", req=1))
    assert isinstance(found, Replicas) and len(found.replicas) == REGISTRATIONS_MAX
    ch.send(Unregister("m-0"))
    assert _answer(ch, Register(_replica("one-too-many"))) == Registered(True)
    assert "one-too-many" in registry.state.names() and "m-0" not in registry.state.names()
    # Another connection registers and finds everything; a worker's client is told
    # the limit when refused.
    other = RegistryClient(str(registry.address), TOKEN)
    try:
        other.register(_replica("other-0", module="o"))
        assert [r.name for r in other.resolve(module="o")] == ["other-0"]
        assert len(other.resolve()) == REGISTRATIONS_MAX + 1
        registry.state.per_connection = 1
        with pytest.raises(RegistrationRefused, match=r"registry refused other-1: this "
                           r"connection holds 1 registration, the registry's limit"):
            other.register(_replica("other-1", module="o"))
    finally:
        other.close()


@pytest.fixture
def ch(registry: RegistryService) -> Iterator[Channel]:
    c = connect(str(registry.address), TOKEN, Codec())
    try:
        yield c
    finally:
        c.close()


def test_a_flood_of_requests_for_names_no_one_registered_grows_nothing(
        registry: RegistryService, ch: Channel) -> None:
    """Resolves (with a turn), heartbeats and unregisters of ever new names, a hundred
    at a time before the answers are read: each is answered, and the registry holds no
    more than before (no names, no rotation counters)."""
    got: list[Message] = []
    for burst in range(30):
        ch.send_many([m for i in range(burst * 100, burst * 100 + 100)
                      for m in (Resolve(module=f"nobody-{i}", interface=f"f{i}", req=i,
                                        turn=True),
                                Heartbeat(f"nobody-{i}"), Unregister(f"nobody-{i}"))])
        while len(got) < 200 * (burst + 1):
            got.extend(ch.receive())
    assert sum(isinstance(m, Replicas) and m.replicas == [] for m in got) == 3000
    assert sum(isinstance(m, Registered) and not m.ok for m in got) == 3000
    assert registry.state.names() == [] and registry.state.turns_held() == 0
    # A module someone registered: one rotation counter, however many ask.
    ch.send(Register(_replica("m-0")))
    ch.send_many([Resolve(module="m", req=i, turn=True) for i in range(500)])
    turns = []
    while len(turns) < 500:
        turns.extend(m.turn for m in ch.receive() if isinstance(m, Replicas))
    assert turns == list(range(500)) and registry.state.turns_held() == 1
