"""Which frames a connection never wrote whole (transport/unwhole.py): every frame the
peer decoded is one `stop_writes` does not name, and every frame it names the peer
never decoded; what cannot be told is None."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.unwritten import unwritten
from polybus.errors import ConnectionLostError
from polybus.transport.channel import LATER, Channel
from polybus.transport.ringchannel import RingChannel
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, CallBatch, Message

BIG = b"x" * (64 << 10)


@contextmanager
def _pair() -> Iterator[tuple[Channel, Channel]]:
    a, b = socket.socketpair()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    w, r = Channel(a, Codec(), "reader"), Channel(b, Codec(), "writer")
    try:
        yield w, r
    finally:
        w.close()
        r.close()


def _ids(msgs: list[Message]) -> set[int]:
    return {m.id for m in msgs if type(m) is Call}


def _decoded(r: Channel) -> set[int]:
    """Every whole frame the reader can still take (the writer closed)."""
    got: list[Message] = []
    try:
        while True:
            got += r.receive(wait=True)
    except ConnectionLostError:
        pass
    return _ids(got)


def test_frames_left_unsent_are_named_and_those_written_are_not() -> None:
    with _pair() as (w, r):
        sent: set[int] = set()
        i = 0
        while not w.unsent:  # (the reader does not read: the connection fills)
            w.send(Call(i, "f", [BIG[:4096]]), LATER)
            sent.add(i)
            i += 1
        for j in range(i, i + 3):  # (behind the rest, untried)
            w.send(Call(j, "f", [b"small"]), LATER)
            sent.add(j)
        never = w.stop_writes()
        assert never is not None and {i - 1, i, i + 1, i + 2} <= never
        with pytest.raises(ConnectionLostError):  # (no write after the look)
            w.send(Call(99, "f", []), LATER)
        w.sock.shutdown(socket.SHUT_WR)
        whole = _decoded(r)
        assert whole and not whole & never and whole | never == sent


def test_a_send_cut_short_by_a_broken_connection_names_its_frames() -> None:
    # The reader takes some frames and hangs up while the writer is inside one
    # send_many: the frames it took are whole (counted as written, though the send
    # raised), the rest are named.
    with _pair() as (w, r):
        got: list[Message] = []

        def read_some() -> None:
            while len(got) < 3:
                got.extend(r.receive(wait=True))
            r.sock.shutdown(socket.SHUT_RDWR)

        t = threading.Thread(target=read_some)
        t.start()
        msgs: list[Message] = [Call(i, "f", [BIG]) for i in range(40)]
        try:
            with pytest.raises(ConnectionLostError):
                w.send_many(msgs)
        finally:
            t.join(10)
        never = w.stop_writes()
        assert never is not None
        assert not _ids(got) & never and len(never) >= 30, (sorted(_ids(got)), never)


def test_batches_and_calls_in_a_batch_are_named_by_their_ids() -> None:
    with _pair() as (w, _r):
        w.sock.shutdown(socket.SHUT_WR)  # (every send fails: nothing reaches the peer)
        with pytest.raises(ConnectionLostError):
            w.send_many([CallBatch(7, "f", [[1], [2]]),
                         Batch([Call(8, "f", []), Call(9, "f", [])])])
        assert w.stop_writes() == {7, 8, 9}


def test_what_is_not_known_is_none() -> None:
    with _pair() as (w, r):  # a write under way on another thread
        w.send(Call(1, "f", []))
        with w.send_lock:
            assert w.stop_writes() is None
    with _pair() as (w, r):  # a write cut short by a Ctrl-C, not the connection

        def interrupted() -> None:
            raise KeyboardInterrupt

        r.sock.send(b"?")  # (so the full writer reads, here: interrupted)
        with pytest.raises(KeyboardInterrupt):
            for i in range(1000):
                w.send(Call(i, "f", [BIG]), interrupted)
        assert w.stop_writes() is None and w.untracked
    assert RingChannel.frames_known is False  # (shm: a put may be read once committed)


def test_calls_held_at_the_client_are_unwritten_unless_a_write_was_cut_short() -> None:
    # (client/unwritten.py) a call held to be written with the next ones never went;
    # after a write cut short by a Ctrl-C, what it took from them is put back to be
    # held again, though it may have gone: nothing is told unwritten then
    with _pair() as (w, _r):
        link = ReplicaLink("w0", "m", w)
        link.held.append(Call(5, "f", []))
        assert unwritten(link) == {5}
        assert w.closed  # (its writes ended with the look)
    with _pair() as (w, _r):
        link = ReplicaLink("w0", "m", w)
        link.held.append(Call(5, "f", []))
        w.untracked = True
        assert unwritten(link) is None


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
@pytest.mark.parametrize("size", [4096, 40 << 10])
def test_over_tls_frames_left_unsent_are_named_and_those_written_are_not(
        tmp_path: Path, size: int) -> None:
    # TLS writes records; a send that would block reports none of its bytes (CPython
    # enables no partial writes), though whole records of it may have gone: frames of
    # several records check that what the peer decodes is never named
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", "key.pem", "-out", "cert.pem"],
                   cwd=tmp_path, check=True, capture_output=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(tmp_path / "cert.pem")
    a, b = socket.socketpair()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    ends: list[ssl.SSLSocket] = []
    t = threading.Thread(target=lambda: ends.append(server.wrap_socket(b, server_side=True)))
    t.start()
    ca = client.wrap_socket(a, server_hostname="localhost")
    t.join(10)
    w, r = Channel(ca, Codec(), "reader"), Channel(ends[0], Codec(), "writer")
    try:
        sent: set[int] = set()
        i = 0
        while not w.unsent:  # (the reader does not read: the connection fills)
            w.send(Call(i, "f", [b"y" * size]), LATER)
            sent.add(i)
            i += 1
        for j in range(i, i + 3):
            w.send(Call(j, "f", [b"y" * size]), LATER)
            sent.add(j)
        never = w.stop_writes()
        assert never is not None and {i - 1, i, i + 1, i + 2} <= never
        w.sock.setblocking(True)
        w.sock.shutdown(socket.SHUT_WR)
        r.sock.settimeout(5)
        whole = _decoded(r)
        assert not whole & never and whole | never == sent, (sorted(whole), sorted(never))
    finally:
        w.close()
        r.close()


def test_a_lone_send_that_finds_the_peer_gone_names_its_frame() -> None:
    """The common case (nothing left unsent before it) counts a frame's end only when it
    is not written whole: a send that raised at once, the peer gone, names its frame;
    one written whole before it is not named."""
    with _pair() as (w, r):
        w.send(Call(1, "f", [b"small"]))
        assert r.receive(wait=True) == [Call(1, "f", [b"small"])]
        r.sock.close()  # (the peer gone: the next sends raise, the first or the second)
        with pytest.raises(ConnectionLostError):
            for i in range(2, 10):
                w.send(Call(i, "f", [b"small"]))
        never = w.stop_writes()
        assert never is not None and 1 not in never and i in never, (never, i)


def test_frames_of_several_left_unsent_are_named_and_those_written_are_not() -> None:
    """The same for sends of several messages at once (an async burst, a batch's)."""
    with _pair() as (w, r):
        sent: set[int] = set()
        i = 0
        while not w.unsent:  # (the reader does not read: the connection fills)
            w.send_many([Call(i, "f", [BIG[:4096]]), Call(i + 1, "f", [b"small"])], LATER)
            sent |= {i, i + 1}
            i += 2
        never = w.stop_writes()
        assert never is not None and i - 1 in never
        w.sock.shutdown(socket.SHUT_WR)
        whole = _decoded(r)
        assert whole and not whole & never and whole | never == sent
