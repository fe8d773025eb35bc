"""A replica taken back is asked its counters on the connection just dialled
(client/stats.py `first_stats`, from client/revive.py `dial`, on the session's look
thread), waiting a bounded while for the answer. A session that closes halts the look
under way (`Halt`), and its close waits for the look thread (client/rejoin.py): that
wait is cut short too, as the wait for the registry's answer is. No network: fakes.
"""

from __future__ import annotations

from typing import Any

import pytest

from polybus.client import revive
from polybus.client.revive import Halt, Wanted, dial
from polybus.wire.messages import Message, Replica, Stats, StatsRequest


class _Registry:
    def __init__(self, address: str, token: bytes) -> None:
        pass

    def resolve(self, module: str) -> list[Replica]:
        return [Replica("w0", module, "127.0.0.1:1", ["f"])]

    def interrupt(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Silent:
    """A replica's connection that never answers; ``on_look`` runs at each look."""

    def __init__(self, on_look: Any = None) -> None:
        self.sent: list[Message] = []
        self.looks = 0
        self.on_look = on_look

    def send(self, msg: Message) -> None:
        self.sent.append(msg)

    def wait_readable(self, seconds: float) -> bool:
        self.looks += 1
        if self.on_look is not None:
            self.on_look()
        return True  # (something to read: `fill` finds it)

    def fill(self, *, wait: bool = True) -> int:
        return 0

    def next_message(self) -> Message | None:
        return None


class _Answering(_Silent):
    """One that answers at the third look."""

    answered = False

    def next_message(self) -> Message | None:
        if self.looks < 3 or self.answered:
            return None
        self.answered = True
        [asked] = self.sent
        assert isinstance(asked, StatsRequest)
        return Stats("w0", 7, 1.0, 0.5, 0, 0, req=asked.req)


def _wanted() -> Wanted:
    return Wanted("server", "server", "tcp", frozenset(), ("w0",), "127.0.0.1:2", b"t",
                  False, 1 << 20)


def test_a_halt_cuts_the_wait_for_a_replica_s_counters_short(
        monkeypatch: pytest.MonkeyPatch) -> None:
    halt = Halt()
    ch = _Silent(on_look=halt.halt)  # (the session closes while the look waits)
    monkeypatch.setattr(revive, "RegistryClient", _Registry)
    monkeypatch.setattr(revive, "connect_replica", lambda r, scheme, token, codec: ch)
    found, failed = dial(_wanted(), halt)
    assert [type(m) for m in ch.sent] == [StatsRequest] and not failed
    assert ch.looks == 1  # (it looked on, for 2 s, until its own bound)
    assert [f.base for f in found] == [None]


def test_a_replica_s_counters_are_read_as_it_is_dialled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ch = _Answering()
    monkeypatch.setattr(revive, "RegistryClient", _Registry)
    monkeypatch.setattr(revive, "connect_replica", lambda r, scheme, token, codec: ch)
    [found], failed = dial(_wanted(), Halt())
    assert not failed and found.base is not None and found.base.calls == 7
    assert ch.looks == 3
