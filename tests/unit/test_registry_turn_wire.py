"""The registry's turn between peers of two versions (docs/protocol.md, section 3):
``Resolve.turn`` and ``Replicas.turn`` are optional and last, so a peer that does not
know them leaves them out, and a peer that does reads them as false and 0."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator

import msgspec
import pytest

from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.testing.peers import next_message
from polybus.transport.endpoints import Address, accept, connect, listen
from polybus.wire.codec import Codec
from polybus.wire.messages import Replica, Replicas, Resolve

TOKEN = b"registry-turn-token-0123456789abc"


def _frame(header: bytes) -> bytes:
    return struct.pack("<IHHI", 8 + len(header), 0, 0, len(header)) + header


@pytest.fixture
def registry() -> Iterator[RegistryService]:
    with RegistryService(TOKEN, "tcp://127.0.0.1:0", ttl=60.0) as reg:
        reg.state.register(Replica("server-0", "server", "tcp://127.0.0.1:1", ["f"]), 1,
                           time.monotonic())
        yield reg


def test_an_older_clients_resolve_is_answered_and_takes_no_turn(
        registry: RegistryService) -> None:
    ch = connect(str(registry.address), TOKEN, Codec())
    try:
        with ch.send_lock:  # [23, module, interface, req]: no turn
            ch._send_pieces([_frame(msgspec.msgpack.encode([23, "server", "", 7]))], None)
        got = next_message(ch, 3.0)
        assert isinstance(got, Replicas) and got.req == 7 and got.turn == 0
        assert [r.name for r in got.replicas] == ["server-0"]
    finally:
        ch.close()
    client = RegistryClient(str(registry.address), TOKEN)
    try:  # (the older client's resolve counted no turn)
        assert client.resolve_turn(module="server")[1] == 0
        assert client.resolve_turn(module="server")[1] == 1
    finally:
        client.close()


def test_an_older_registrys_answer_is_read_as_turn_0() -> None:
    """An older registry decodes the Resolve, ``turn`` left over, and answers a
    Replicas without one: the client starts at 0, as it did."""
    class OldResolve(msgspec.Struct, array_like=True, tag_field="t", tag=23):
        module: str = ""
        interface: str = ""
        req: int = 0

    sent = msgspec.msgpack.encode(Resolve(module="server", req=3, turn=True))
    assert msgspec.msgpack.decode(sent, type=OldResolve) == OldResolve("server", "", 3)

    listener, address = listen(Address.parse("tcp://127.0.0.1:0"))
    asked: list[object] = []

    def old_registry() -> None:
        ch = accept(listener, TOKEN, Codec())
        try:
            asked.append(next_message(ch, 3.0))
            with ch.send_lock:  # [24, replicas, req]: no turn
                ch._send_pieces([_frame(msgspec.msgpack.encode([24, [], 0]))], None)
            next_message(ch, 3.0)  # (until the client closes)
        finally:
            ch.close()

    thread = threading.Thread(target=old_registry, daemon=True)
    thread.start()
    client = RegistryClient(str(address), TOKEN)
    try:
        assert client.resolve_turn(module="server") == ([], 0)
    finally:
        client.close()
        thread.join(5.0)
        listener.close()
    assert asked == [Resolve(module="server", turn=True)]
