"""What an authenticated peer may send the registry (registry/limits.py), at a live
registry over loopback TCP.

The registry took any text a token holder sent: an address that does not parse, names
of a megabyte (stored, and handed to every client), a name with a newline and an escape
sequence (said as it came, forging a line of its log). Such a Register is refused now,
naming the field and the limit, a Resolve of such a name is answered with a Goodbye that
says why, and the registry serves on; peer text in its log is escaped and cut short.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from polybus.errors import TransportError
from polybus.registry.client import RegistryClient
from polybus.registry.limits import (
    ADDRESSES_MAX,
    INTERFACES_MAX,
    NAME_MAX,
    SETTING_MAX,
    SETTINGS_MAX,
    said,
)
from polybus.registry.service import RegistryService
from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import (
    Goodbye,
    Heartbeat,
    Register,
    Registered,
    Replica,
    Replicas,
    Resolve,
)

TOKEN = b"registry-limits-token-0123456789ab"
MEGA = "x" * (1 << 20)
FORGED = "w\n2026-11-27 registry: forged line\x1b[31m"
GOOD = "tcp://127.0.0.1:9"


@pytest.fixture
def said_lines() -> list[str]:
    return []


@pytest.fixture
def registry(said_lines: list[str]) -> Iterator[RegistryService]:
    with RegistryService(TOKEN, "tcp://127.0.0.1:0", ttl=60.0, say=said_lines.append) as reg:
        yield reg


@pytest.fixture
def ch(registry: RegistryService) -> Iterator[Channel]:
    c = connect(str(registry.address), TOKEN, Codec())
    try:
        yield c
    finally:
        c.close()


def _served(reg: RegistryService, module: str = "m") -> list[str]:
    """The names another client is told for ``module`` (the registry serves on)."""
    other = connect(str(reg.address), TOKEN, Codec())
    try:
        other.send(Resolve(module=module, req=9))
        got = next_message(other)
        assert isinstance(got, Replicas), got
        return [r.name for r in got.replicas]
    finally:
        other.close()


@pytest.mark.parametrize(("replica", "said_in_reason"), [
    (Replica("a", "m", "not an address", ["f"]), ["its address:", "bad address"]),
    (Replica("a", "m", "tcp://127.0.0.1:99999", ["f"]), ["its address:", "0-65535"]),
    (Replica("a", "m", "bogus://x", ["f"]), ["its address:", "unknown transport"]),
    (Replica("a", "m", GOOD, ["f"], addresses=[GOOD, "tcp://h"]),
     ["its address [1]:", "bad address"]),
    (Replica(MEGA, "m", GOOD, ["f"]), ["its name", "1,048,576 characters", f"{NAME_MAX}"]),
    (Replica("a", MEGA, GOOD, ["f"]), ["its module", "1,048,576 characters", f"{NAME_MAX}"]),
    (Replica("a", "m", GOOD, ["f", MEGA]),
     ["its interface [1]", "1,048,576 characters", f"{NAME_MAX}"]),
    (Replica("a", "m", GOOD, ["f"], source=MEGA), ["its source", f"{NAME_MAX}"]),
    (Replica("a", "m", "tcp://" + MEGA + ":1", ["f"]), ["its address", "1,024"]),
    (Replica("a", "m", GOOD, [f"f{i}" for i in range(INTERFACES_MAX + 1)]),
     ["its interfaces are 4,097", f"{INTERFACES_MAX:,}"]),
    (Replica("a", "m", GOOD, ["f"], addresses=[GOOD] * (ADDRESSES_MAX + 1)),
     ["its addresses are 17", f"{ADDRESSES_MAX}"]),
    (Replica(FORGED, "m", GOOD, ["f"]), ["its name", "not printable", r"'\n' at 1"]),
    (Replica("a", "m", GOOD, ["f\tg"]), ["its interface [0]", "not printable"]),
    (Replica("a", "m", GOOD, ["f"], settings={FORGED: "1"}), ["its setting", "not printable"]),
    (Replica("a", "m", GOOD, ["f"], settings={"speed": MEGA}),
     ["its setting 'speed'", f"{SETTING_MAX:,}"]),
    (Replica("a", "m", GOOD, ["f"], settings={str(i): "1" for i in range(SETTINGS_MAX + 1)}),
     ["its settings are", f"{SETTINGS_MAX:,}"]),
], ids=["unparseable", "port", "scheme", "addresses", "name", "module", "interface",
        "source", "long-address", "many-interfaces", "many-addresses", "newline", "tab",
        "setting-key", "setting-value", "many-settings"])
def test_a_register_the_registry_does_not_take_is_refused_naming_the_field(
        registry: RegistryService, ch: Channel, replica: Replica,
        said_in_reason: list[str]) -> None:
    ch.send(Register(replica))
    got = next_message(ch)
    assert isinstance(got, Registered) and not got.ok, got
    for part in said_in_reason:
        assert part in got.reason, (part, got.reason)
    assert len(got.reason) < 600, got.reason[:600]  # (a megabyte is said cut short)
    assert registry.state.names() == []
    # The same connection registers a good replica, and another client finds it.
    ch.send(Register(Replica("good", "m", GOOD, ["f"], addresses=[GOOD, "ipc:///tmp/x.sock"])))
    assert next_message(ch) == Registered(True)
    assert _served(registry) == ["good"]


@pytest.mark.parametrize("field", ["module", "interface"])
def test_a_resolve_of_a_name_past_the_limit_is_refused_and_the_registry_serves_on(
        registry: RegistryService, ch: Channel, field: str) -> None:
    ch.send(Resolve(**{field: MEGA}, req=3, turn=True))  # type: ignore[arg-type]
    got = next_message(ch)
    assert isinstance(got, Goodbye), got
    assert f"its {field}" in got.reason and f"limit of {NAME_MAX}" in got.reason, got.reason
    assert len(got.reason) < 600
    assert next_message(ch, closed="closed") == "closed"
    assert _served(registry) == []


def test_a_registry_client_refused_a_resolve_resolves_again(registry: RegistryService) -> None:
    """The registry closes the connection of a Resolve it refuses (a Goodbye): the
    client's next call connects again. (It was sent on the closed connection and failed
    "closed the connection", and only the call after that connected again.)"""
    client = RegistryClient(str(registry.address), TOKEN)
    try:
        with pytest.raises(TransportError, match="refused a Resolve: its module"):
            client.resolve(module=MEGA)
        assert client.resolve(module="m") == []
    finally:
        client.close()


def test_peer_text_is_said_escaped_and_short(
        registry: RegistryService, ch: Channel, said_lines: list[str]) -> None:
    """The lines `polybus registry` prints of refusals quote what the peer sent as
    ``repr`` does, cut short: no newline or escape of the peer's reaches them."""
    for r in (Replica(FORGED, "m", GOOD, ["f"]), Replica(MEGA, "m", GOOD, ["f"]),
              Replica("b", "m", FORGED + MEGA, ["f"])):
        ch.send(Register(r))
        got = next_message(ch)
        assert isinstance(got, Registered) and not got.ok
    ch.send(Heartbeat(FORGED + MEGA))  # (answered, its name quoted short)
    beat = next_message(ch)
    assert isinstance(beat, Registered) and not beat.ok and len(beat.reason) < 300, beat
    assert "\n" not in beat.reason and "\x1b" not in beat.reason
    assert len(said_lines) == 3, said_lines
    for line in said_lines:
        assert "\n" not in line and "\x1b" not in line, line
        assert len(line) < 1000, line[:1000]
    assert r"'w\n2026-11-27 registry: forged line\x1b[31m'" in said_lines[0]
    assert "... (1,048,576 characters)" in said_lines[1]


def test_said_escapes_and_cuts() -> None:
    assert said("a\nb") == r"'a\nb'"
    assert said("x" * 500, 20) == "'xxxxxxxxxxxxxxxxxxx... (500 characters)"
