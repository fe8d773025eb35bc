"""A session connects to a module's replicas at once (client/dialing.py `connect_all`):
every connection is under way together, the outcomes come back in the replicas' order,
one that cannot be reached is named rather than raised, and any other failure closes
the connections already made."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from polybus.client import dialing
from polybus.errors import AuthenticationError, TransportError
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec


class _Replicas:
    def __init__(self, outcomes: list[str]) -> None:
        self.outcomes = outcomes
        self.together = threading.Barrier(len(outcomes), timeout=10)  # all at once, or broken
        self.made: list[Channel] = []
        self.peers: list[socket.socket] = []
        self.threads: set[str] = set()

    def connect(self, replica: Any, scheme: str, token: bytes, codec: Codec) -> Channel:
        self.threads.add(threading.current_thread().name)
        self.together.wait()
        what = self.outcomes[replica]
        if what == "down":
            raise TransportError(f"replica {replica} does not answer")
        if what == "refused":
            raise AuthenticationError(f"replica {replica} refused the token")
        a, b = socket.socketpair()
        self.peers.append(b)
        ch = Channel(a, codec, f"replica {replica}")
        self.made.append(ch)
        return ch


def _run(monkeypatch: pytest.MonkeyPatch, outcomes: list[str]) -> tuple[_Replicas, Any]:
    fake = _Replicas(outcomes)
    monkeypatch.setattr(dialing, "connect_replica", fake.connect)
    replicas: Any = list(range(len(outcomes)))
    try:
        got: Any = dialing.connect_all(replicas, "tcp", b"t", [Codec() for _ in outcomes])
    except Exception as exc:
        got = exc
    return fake, got


def test_all_at_once_in_order_with_the_unreachable_named(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, got = _run(monkeypatch, ["up", "down", "up", "down"])
    try:
        assert [type(g) for g in got] == [Channel, TransportError, Channel, TransportError]
        assert len(fake.threads) == 4 and all(n.startswith("polybus-connect") for n in fake.threads)
        assert got[0].peer == "replica 0" and got[2].peer == "replica 2"
        assert "replica 1 does not answer" in str(got[1])
    finally:
        for ch in fake.made:
            ch.close()
        for p in fake.peers:
            p.close()


def test_another_failure_closes_what_was_made_and_is_raised(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake, got = _run(monkeypatch, ["up", "refused", "up"])
    try:
        assert isinstance(got, AuthenticationError)
        assert len(fake.made) == 2 and all(ch.closed or ch.sock.fileno() == -1
                                           for ch in fake.made)
    finally:
        for p in fake.peers:
            p.close()


def test_one_replica_needs_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, got = _run(monkeypatch, ["up"])
    try:
        assert len(got) == 1 and isinstance(got[0], Channel)
        assert fake.threads == {threading.current_thread().name}  # made here, no pool
    finally:
        for ch in fake.made:
            ch.close()
        for p in fake.peers:
            p.close()


def test_replicas_here_without_the_modules_transport_are_named() -> None:
    """A client configured for ipc or shm says which replicas on its host offer only TCP
    (started by hand with --module), rather than use TCP without a word; one on another
    host cannot offer either to this one, and is not named."""
    from polybus.wire.messages import Replica

    def rep(name: str, address: str, *more: str) -> Replica:
        return Replica(name, "server", address, ["f"], addresses=[address, *more])

    plain = rep("a", "tcp://127.0.0.1:5000")
    offers = rep("b", "tcp://127.0.0.1:5001", "shm:///tmp/x/b.shm", "ipc:///tmp/x/b.sock")
    named = rep("c", "tcp://localhost:5002")
    elsewhere = rep("d", "tcp://10.1.2.3:5003")
    by_name = rep("e", "tcp://db.example:5004")
    every = [plain, offers, named, elsewhere, by_name]
    assert dialing.without_scheme(every, "shm") == ["a", "c"]
    assert dialing.without_scheme(every, "ipc") == ["a", "c"]
    assert dialing.without_scheme(every, "tcp") == []
    assert dialing.without_scheme([rep("f", "tcp://127.0.0.1:5005", "ipc:///tmp/f")],
                                  "shm") == ["f"]


def test_tcp_alone_is_said_with_what_makes_it(tmp_path: Any,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """A replica on this host offering tcp alone for a module configured for ipc: the
    warning names what makes a worker started by hand listen so. A transport this run's
    --set gave is the cause to name first, as a worker started with ``--config`` listens
    on its own configuration's (it said "started by hand with --module or --listen" of
    workers started with ``--config app.toml --as store``, whose transport is tcp)."""
    import logging

    from polybus.config import load
    from polybus.testing.apps import write_one_call_app
    from polybus.wire.messages import Replica

    path = write_one_call_app(tmp_path)
    caplog.set_level(logging.WARNING, logger="polybus.client")
    reps = [Replica(n, "server", f"tcp://127.0.0.1:{i + 5000}", ["f"])
            for i, n in enumerate(["server-0", "server-1"])]

    def said(app: Any, replicas: list[Replica]) -> str:
        caplog.clear()
        dialing.say_tcp_only("server", "ipc", replicas, set(), app)
        [line] = [r.getMessage() for r in caplog.records]
        return line

    line = said(load(path, ['modules.server.transport="ipc"']), reps[:1])
    assert line.startswith("polybus: warning: module 'server' is configured for ipc, but "
                           "server-0 on this host offers only tcp: this run's ipc is from "
                           "--set, which reaches no worker started by hand: one started "
                           "with `--config FILE --as server` listens on FILE's transport "
                           "(give it the same --set to listen on ipc too)"), line
    assert line.endswith("; it is reached by tcp"), line
    # the file's own transport: a worker's configuration of another, or --module/--listen
    (tmp_path / "app.toml").write_text((tmp_path / "app.toml").read_text().replace(
        'source = "server.py"', 'source = "server.py"\ntransport = "ipc"'))
    line = said(load(path), reps)
    assert ("server-0, server-1 on this host offer only tcp: they were started with a "
            "configuration whose transport for 'server' is not ipc, or with --module or "
            "--listen") in line and line.endswith("; they are reached by tcp"), line
