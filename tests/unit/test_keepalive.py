"""TCP connections are probed when silent, with a bound derived from the heartbeat
(transport/keepalive.py): a replica's accepted sockets, a client's links to replicas
and to the registry, a replica's links to the replicas it forwards values to, and a
registry's connections carry the options; Unix sockets are left alone. What a
peer cut off leaves (data written, never acknowledged) is told apart from a peer that
is alive and not reading (its window closed), and `cut` ends a connection so that its
reader finds it ended. The whole path, a client cut off in another network namespace,
is tests/chaos/test_cut_client.py's.
"""

from __future__ import annotations

import socket
import struct
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.reactor import Reactor
from polybus.client.session import Session
from polybus.config import load
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.transport.keepalive import (
    IDLE_PROBES,
    PROBES,
    bound_s,
    cut,
    idle_bound_s,
    keep_alive,
    probe_s,
    unheard_s,
)
from polybus.wire.codec import Codec
from polybus.wire.messages import Deliver, Replica
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"keepalive-test-token-0123456789ab"
linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="TCP_KEEPIDLE and TCP_INFO are Linux's")


def _probing(sock: socket.socket) -> tuple[int, int, int, int]:
    """SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT of ``sock``."""
    return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT))


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected loopback TCP pair: (accepted, dialled)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        dialled = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
    try:
        yield accepted, dialled
    finally:
        accepted.close()
        dialled.close()


def test_the_bound_is_whole_seconds_of_heartbeat_within_what_the_kernel_takes() -> None:
    assert [probe_s(h) for h in (0.2, 0.5, 1.0, 1.5, 10.0, 86400.0)] == \
        [1, 1, 1, 2, 10, 32767]
    assert PROBES == 3
    assert bound_s(0.5) == 4 and bound_s(1.0) == 4 and bound_s(2.5) == 12
    # A silent peer is given more probes: one is never sent again, and a few lost in a
    # row on a lossy link would end a live idle connection.
    assert IDLE_PROBES == 9
    assert idle_bound_s(0.5) == 10 and idle_bound_s(2.5) == 30


@linux
def test_keep_alive_sets_the_probes_on_tcp(pair: tuple[socket.socket, socket.socket]) -> None:
    accepted, _ = pair
    assert _probing(accepted)[0] == 0  # (off by default: the reason for all this)
    keep_alive(accepted, 2.5)
    assert _probing(accepted) == (1, 3, 3, IDLE_PROBES)


def test_keep_alive_leaves_a_unix_socket_as_it_is() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        keep_alive(a, 1.0)
        assert a.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0
        assert unheard_s(a) == 0.0


@linux
def test_a_replica_probes_its_accepted_tcp_connections() -> None:
    rt = WorkerRuntime("w", {"f": lambda x: x}, TOKEN,
                       options=ServeOptions(heartbeat=2.0)).start()
    ch = connect(rt.address, TOKEN, Codec())
    try:
        deadline = time.monotonic() + 5
        while not rt._channels and time.monotonic() < deadline:
            time.sleep(0.01)
        (accepted,) = rt._channels
        assert _probing(accepted.sock) == (1, 2, 2, IDLE_PROBES)
    finally:
        ch.close()
        rt.stop()


@linux
def test_a_client_probes_its_tcp_links_to_replicas(
        pair: tuple[socket.socket, socket.socket]) -> None:
    _, dialled = pair
    reactor = Reactor(heartbeat=1.5)
    try:
        reactor.add(ReplicaLink("r", "m", Channel(dialled, Codec(), "r")))
        assert _probing(dialled) == (1, 2, 2, IDLE_PROBES)
    finally:
        reactor.close()


@linux
def test_a_registry_probes_its_connections() -> None:
    with RegistryService(TOKEN, ttl=6.0) as reg:  # (three heartbeats of 2 s)
        ch = connect(reg.address, TOKEN, Codec())
        try:
            deadline = time.monotonic() + 5
            while not reg._channels and time.monotonic() < deadline:
                time.sleep(0.01)
            (accepted,) = reg._channels
            assert _probing(accepted.sock) == (1, 2, 2, IDLE_PROBES)
        finally:
            ch.close()


@linux
def test_a_replica_probes_its_tcp_links_to_the_replicas_it_forwards_to() -> None:
    """The link a producer's replica dials to send a value on to its consumer's replica
    (worker/fwdpeers.py) is probed from that side too: it only writes, so a consumer's
    host gone while it is idle was found by nothing until the next value."""
    made = [WorkerRuntime(n, {}, TOKEN, options=ServeOptions(heartbeat=2.0)).start()
            for n in ("producer", "consumer")]
    producer, consumer = made
    try:
        to = str(consumer.address)
        assert producer.forwarding._send(to, Deliver("k", True, 1))
        deadline = time.monotonic() + 5
        while not consumer.forwarding.received and time.monotonic() < deadline:
            time.sleep(0.01)
        assert consumer.forwarding.received == 1
        dialled = producer.forwarding._peers[to]
        assert _probing(dialled.sock) == (1, 2, 2, IDLE_PROBES)
    finally:
        for rt in made:
            rt.stop()


@linux
def test_a_client_probes_its_tcp_link_to_the_registry(tmp_path: Path) -> None:
    """A session's link to the registry (client/session.py), idle once its replicas
    are found, is probed with the cluster's heartbeat, as the registry probes its end."""
    (tmp_path / "server.py").write_text("def double(x):\n    return x * 2\n")
    (tmp_path / "client.py").write_text("def main():\n    return None\n")
    (tmp_path / "app.toml").write_text(textwrap.dedent("""
        [cluster]
        heartbeat = "2s"

        [modules.server]
        source = "server.py"

        [modules.client]
        source = "client.py"
        entrypoint = "main"

        [bind]
        "client.double" = "server.double"
        """))
    with RegistryService(TOKEN, ttl=6.0) as reg:
        rt = WorkerRuntime("server-0", {"double": lambda x: x * 2}, TOKEN).start()
        worker_side = RegistryClient(str(reg.address), TOKEN)
        session: Session | None = None
        try:
            worker_side.register(Replica("server-0", "server", str(rt.address), ["double"]))
            session = Session(load(tmp_path / "app.toml"), str(reg.address), TOKEN)
            link = session.registry._ch
            assert link is not None and not link.closed
            assert _probing(link.sock) == (1, 2, 2, IDLE_PROBES)
        finally:
            if session is not None:
                session.close()
            worker_side.close()
            rt.stop()


@linux
def test_a_peer_that_acknowledges_or_does_not_read_is_not_unheard(
        pair: tuple[socket.socket, socket.socket]) -> None:
    accepted, dialled = pair
    keep_alive(accepted, 0.5)
    accepted.sendall(b"x" * 1000)
    assert dialled.recv(1000)
    time.sleep(0.3)
    assert unheard_s(accepted) == 0.0  # (acknowledged)
    # A peer alive but not reading: its window closes, and what waits is unsent, not
    # unacknowledged. (A kernel timeout on unacknowledged data, TCP_USER_TIMEOUT, ends
    # this connection too: tests/integration/test_cut_off_clients.py.)
    accepted.setblocking(False)
    try:
        while accepted.send(b"x" * 65536):
            pass
    except BlockingIOError:
        pass
    time.sleep(1.5)
    assert unheard_s(accepted) == 0.0


def _unacked(sock: socket.socket) -> int:
    """struct tcp_info's tcpi_unacked (linux/tcp.h): segments sent, not yet acknowledged."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8 + 13 * 4)
    return int(struct.unpack("8B13I", raw)[8 + 4])


@linux
def test_a_peer_alive_that_drops_what_it_has_no_room_for_is_not_unheard(
        pair: tuple[socket.socket, socket.socket]) -> None:
    """A client alive that keeps less room than it offered (its buffer made smaller, or
    its host short of memory) drops data it had said it would take: that data stays
    unacknowledged and is sent again, further and further apart, so its last
    acknowledgement grows old, yet it answers each time. The kernel sends those again
    as window probes, not retransmissions (`tcpi_retransmits` stays 0), which is why
    `unheard_s` asks for retransmissions and not only unacknowledged data."""
    accepted, dialled = pair
    keep_alive(accepted, 0.5)
    dialled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)  # (it reads nothing)
    accepted.setblocking(False)
    unacked_seen = 0
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        try:
            accepted.send(b"x" * 65536)
        except BlockingIOError:
            pass
        unacked_seen += _unacked(accepted) > 0
        assert unheard_s(accepted) == 0.0
        time.sleep(0.1)
    assert unacked_seen > 10  # (the case above, not data all acknowledged)


@linux
def test_cut_ends_the_connection_for_its_reader_and_its_writer(
        pair: tuple[socket.socket, socket.socket]) -> None:
    accepted, _ = pair
    cut(accepted)
    assert accepted.recv(10) == b""
    with pytest.raises(OSError):
        accepted.send(b"x")
    cut(accepted)  # (twice, or after the close: nothing happens)
    accepted.close()
    cut(accepted)
