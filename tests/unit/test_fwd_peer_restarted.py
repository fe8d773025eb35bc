"""A value sent on to a replica started again at the address of one that ended
(worker/fwdpeers.py keeps one connection per peer address, made on first use).

A worker started again where it listened before (the hosts engine's workers, restarted
by systemd or by hand at their fixed port or socket file) is dialled again by a client
that rejoins it (client/rejoin.py), which places consumers there. A producer's replica
that had sent values to the one that ended still held its connection to it: over tcp
the next value was written into that dead connection, lost with no word (the write
after the peer's FIN succeeds; the reset comes after), so its consumer would wait for
ever; the value after it, and over ipc the first, failed its consumer with
ConnectionLostError, though the replica at that address took connections. A connection
the peer has ended is now dialled again before a value goes on it.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from polybus.wire.messages import Deliver, Message
from polybus.worker.runtime import WorkerRuntime
from unit.test_fwd_send_later import _until

TOKEN = b"fwd-restart-token-0123456789abcd"



@pytest.fixture
def replicas() -> Iterator[Callable[[str, str], WorkerRuntime]]:
    """replica(name, address): a started replica, stopped at the end (once)."""
    made: list[WorkerRuntime] = []

    def start(name: str, address: str) -> WorkerRuntime:
        rt = WorkerRuntime(name, {}, TOKEN, address).start()
        made.append(rt)
        return rt

    yield start
    for rt in made:
        if not rt._stopping:
            rt.stop()


def _address(transport: str, tmp: Path) -> str:
    if transport == "ipc":
        return f"ipc://{tmp}/w1.sock"
    with socket.socket() as s:  # (a free port, for both of w1's lives)
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_a_value_to_a_replica_started_again_at_the_same_address_reaches_it(
        replicas: Callable[[str, str], WorkerRuntime], transport: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sender = replicas("w0", "tcp://127.0.0.1:0")
    told: list[Message] = []
    monkeypatch.setattr(sender, "_send_quietly", lambda ch, msg: told.append(msg))
    address = _address(transport, tmp_path)
    first = replicas("w1", address)
    to = str(first.address)
    client = object()  # (stands for the client whose Forward it was: told only on failure)
    assert sender.forwarding._send(to, Deliver("k1", True, 1), client)  # type: ignore[arg-type]
    assert _until(lambda: first.forwarding.received == 1)
    first.stop()
    again = replicas("w1", address)
    assert str(again.address) == to
    for i, key in enumerate(["k2", "k3"], start=1):
        sender.forwarding.send_later(to, Deliver(key, True, i), client)  # type: ignore[arg-type]

        def settled(n: int = i) -> bool:
            return again.forwarding.received == n or bool(told)

        # Each reaches the replica now at that address, and nothing is said to fail.
        assert _until(settled, 5.0), f"{key} was lost: neither received nor said to the client"
        assert not told, told
    assert again.forwarding.received == 2
