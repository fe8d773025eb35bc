"""Which address of a replica the client dials (`client/dialing.connect_replica`)."""

from __future__ import annotations

from typing import Any

import pytest

from polybus.client import dialing
from polybus.errors import TransportError
from polybus.wire.codec import Codec
from polybus.wire.messages import Replica

TCP = "tcp://127.0.0.1:7001"
SHM = "shm:///tmp/polybus-elsewhere/server-0.shm"


def _dialled(monkeypatch: pytest.MonkeyPatch, refused: set[str]) -> list[str]:
    tried: list[str] = []

    def connect(where: str, token: bytes, codec: Codec) -> Any:
        tried.append(where)
        if where in refused:
            raise TransportError(f"cannot reach {where}")
        return f"channel to {where}"

    monkeypatch.setattr(dialing, "connect", connect)
    return tried


def test_the_modules_transport_when_the_replica_offers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    tried = _dialled(monkeypatch, set())
    r = Replica("server-0", "server", TCP, ["f"], addresses=[TCP, SHM])
    assert str(dialing.connect_replica(r, "shm", b"t", Codec())) == f"channel to {SHM}"
    assert tried == [SHM]


def test_its_main_address_when_that_one_cannot_be_dialled_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker started by hand on another host offers its shm path, which is not here."""
    tried = _dialled(monkeypatch, {SHM})
    r = Replica("server-0", "server", TCP, ["f"], addresses=[TCP, SHM])
    assert str(dialing.connect_replica(r, "shm", b"t", Codec())) == f"channel to {TCP}"
    assert tried == [SHM, TCP]


def test_both_failures_are_said(monkeypatch: pytest.MonkeyPatch) -> None:
    _dialled(monkeypatch, {SHM, TCP})
    r = Replica("server-0", "server", TCP, ["f"], addresses=[TCP, SHM])
    with pytest.raises(TransportError, match=f"cannot reach {SHM}; and at {TCP}: cannot reach"):
        dialing.connect_replica(r, "shm", b"t", Codec())


def test_the_main_address_is_dialled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    tried = _dialled(monkeypatch, {TCP})
    r = Replica("server-0", "server", TCP, ["f"], addresses=[TCP])
    with pytest.raises(TransportError, match=f"^cannot reach {TCP}$"):
        dialing.connect_replica(r, "shm", b"t", Codec())
    assert tried == [TCP]
