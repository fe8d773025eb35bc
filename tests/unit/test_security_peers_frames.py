"""Peers past the handshake that send what a replica does not take (in-process, over
loopback TCP, ipc and shm): a frame nested too deeply, a message a worker does not take
(alone or in a batch), frame flags where the transport uses none, a frame cut off by
the peer going, a frame over the receiver's limit over shm, a fault reading the
connection. Each such peer is told (a Goodbye) and dropped, the log says why and names
it, and the replica serves on; a message of exactly the limit is taken over shm as
over tcp."""

from __future__ import annotations

import logging
import os
import socket
import struct
import time
from pathlib import Path

import pytest
from test_security_peers import TOKEN, _next, _raw  # tests/unit

from polybus.transport.endpoints import connect
from polybus.wire import handshake
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Goodbye, Message, Register, Replica, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime


@pytest.mark.parametrize("transport", ["tcp", "ipc", "shm"])
def test_a_frame_nested_too_deeply_drops_its_peer_alone(
        transport: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A small frame of arrays nested 200,000 deep (msgspec: RecursionError) is bad
    input like any other: the peer is told and dropped, the replica serves on. It used
    to escape as a poller failure: over tcp/ipc the peer was never told; over shm the
    frame stayed at the head of its ring and every poll failed on it again, at full
    CPU, and the replica answered no one, on any transport."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"{transport}://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN, where, ServeOptions(pool=2)).start()
    try:
        bad = connect(str(rt.address), TOKEN, Codec())
        header = b"\x94\x01\x01\xa4echo\x91" + b"\x91" * 200_000 + b"\xc0"
        with bad.send_lock:
            bad._send_pieces([struct.pack("<IHHI", 8 + len(header), 0, 0, len(header)) + header], None)
        bye = _next(bad)
        bad.close()
        assert isinstance(bye, Goodbye) and "nested too deeply" in bye.reason
        _serving(rt, 2)
    finally:
        rt.stop()
    assert "nested too deeply" in caplog.text and "poller failed" not in caplog.text


def _answer_to(rt: WorkerRuntime, msg: Message) -> object:
    """What a new connection that sends ``msg`` hears back first (it is closed after)."""
    ch = connect(str(rt.address), TOKEN, Codec())
    try:
        ch.send(msg)
        return _next(ch)
    finally:
        ch.close()


def test_an_answer_inside_a_batch_of_calls_is_refused_as_one_sent_alone(
        caplog: pytest.LogCaptureFixture) -> None:
    """A Batch holding a Result (a worker takes calls, not answers) was dropped without
    a word: the peer is told, as for a Result sent alone, and dropped (as it is, the
    call before it goes unanswered); serving goes on."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN).start()
    try:
        ch = connect(str(rt.address), TOKEN, Codec())
        try:
            ch.send(Batch([Call(1, "echo", [1]), Result(2, 2)]))
            heard = [_next(ch), _next(ch)]
        finally:
            ch.close()
        bye = [m for m in heard if isinstance(m, Goodbye)]
        assert bye and "a worker does not take Result" in bye[0].reason, heard
        _serving(rt, 3)
    finally:
        rt.stop()
    assert "sent Result, which a worker does not take; dropped" in caplog.text


def _serving(rt: WorkerRuntime, n: int) -> None:
    good = connect(str(rt.address), TOKEN, Codec())
    try:
        good.send(Call(n, "echo", [n]))
        assert _next(good) == Result(n, n)
    finally:
        good.close()


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_fault_reading_a_connection_drops_it_alone(
        transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Decoding a frame raises something that is not a ProtocolError (a fault in
    polybus's own steps): that connection is told, logged and dropped. Left to the
    poller's catch-all, the peer was never dropped; over shm the frame stayed at the
    head of the ring and failed every poll after, and the replica served no one."""
    real = Codec.decode_header

    def faulty(self: Codec, header: bytes | bytearray | memoryview) -> object:
        if b"explode" in bytes(header):
            raise RuntimeError("a fault decoding")
        return real(self, header)

    monkeypatch.setattr(Codec, "decode_header", faulty)
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN, where, ServeOptions(pool=2)).start()
    try:
        bye = _answer_to(rt, Call(1, "echo", ["explode"]))
        assert isinstance(bye, Goodbye) and "failed reading this connection" in bye.reason
        _serving(rt, 2)
    finally:
        rt.stop()
    assert "failed; its connection is dropped" in caplog.text
    assert "RuntimeError: a fault decoding" in caplog.text and "poller failed" not in caplog.text


def _raw_to(rt: WorkerRuntime) -> socket.socket:
    addr = rt.address
    if addr.scheme == "tcp":
        return _raw(rt)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(addr.path)
    return s


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
@pytest.mark.parametrize(("declared", "sent", "said"), [
    (1000, 10, "22 of its 1004 bytes"), (1 << 20, 200_000, "200012 of its 1048580 bytes")],
    ids=["small", "large"])
def test_a_peer_gone_in_the_middle_of_a_frame_is_logged(
        transport: str, declared: int, sent: int, said: str, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """A peer that closes its connection with a frame half sent: the frame is lost, and
    the log says so, with how much of it came (it was dropped without a word); a peer
    that sends a message a worker does not take is logged too; serving goes on."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"ipc://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN, where, ServeOptions(pool=2)).start()
    try:
        s = _raw_to(rt)
        hs = handshake.ClientHandshake(TOKEN)
        s.sendall(hs.proof(s.recv(handshake.HELLO_SIZE)))
        hs.verify(s.recv(handshake.ANSWER_SIZE))
        s.sendall(struct.pack("<IHHI", declared, 0, 0, declared - 8) + b"\x91" * sent)
        s.close()  # (what was sent before is read before the end: no wait needed)
        deadline = time.monotonic() + 3
        while "middle of a frame" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
        _serving(rt, 1)
        bye = _answer_to(rt, Register(Replica("n", "m", "tcp://127.0.0.1:1", [])))
        assert isinstance(bye, Goodbye) and "does not take Register" in bye.reason
        _serving(rt, 2)
    finally:
        rt.stop()
    assert f"went in the middle of a frame ({said} received; dropped)" in caplog.text
    assert "sent Register, which a worker does not take; dropped" in caplog.text


def test_an_shm_frame_over_the_receivers_limit_is_refused(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Over shm a large array travels by segment, beside a small frame: the receiver
    held only that frame to its limit, so a peer could hand it a value of any size (and
    a bytes value was copied out whole). The message's full size is checked, as on the
    other transports, and the replica serves on.

    The replica reads the ring while the sender is still ringing its bell, so it may
    refuse and close before the send returns (the send then fails, broken pipe): the
    refusal is checked in the replica's log as well as in its Goodbye when that came."""
    import numpy as np

    from polybus.errors import ConnectionLostError

    caplog.set_level(logging.WARNING, logger="polybus.worker")
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN, f"shm://{tmp_path}/w.sock",
                       ServeOptions(pool=2, max_frame=1 << 20)).start()
    try:
        bad = connect(str(rt.address), TOKEN, Codec(max_frame=64 << 20))
        # A peer that does not keep to the limits the handshake said (ours would refuse
        # to send this: test_frame_limits_agreed.py): the receiver still checks.
        bad.codec.max_frame = 64 << 20
        try:
            bad.send(Call(1, "echo", [np.zeros(4 << 20, np.uint8)]))  # 4 MiB, by segment
            bye = _next(bad)
        except ConnectionLostError:
            bye = None  # refused and closed before the send returned
        finally:
            bad.close()  # (its segment unmapped whatever happened)
        if bye is not None:
            assert isinstance(bye, Goodbye), bye
            assert "over the frame limit of 1048576 bytes" in bye.reason
        _serving(rt, 2)
    finally:
        rt.stop()
    assert any("over the frame limit of 1048576 bytes" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_an_shm_message_at_the_limit_is_taken_as_over_tcp(tmp_path: Path) -> None:
    """The receiver counts a message by segment as its sender did (the frame it would
    be with every buffer in it): counted as the shm frame's own size (its prefix, its
    table, its empty buffer slots) plus its segments, a message of exactly max_frame,
    which the sender let through and tcp answers, was refused and its connection
    dropped. One byte more is refused by the sender, as on every transport."""
    import numpy as np

    from polybus.errors import MessageTooLarge
    from polybus.wire.framing import body_length

    limit = 1 << 20
    codec = Codec(max_frame=limit)

    def length(n: int) -> int:
        header, bufs = codec.encode_parts(Call(1, "size", [np.zeros(n, np.uint8)]), 1 << 30)
        return body_length(len(header), [memoryview(b).nbytes for b in bufs])

    n = limit - 256
    while length(n + 1) <= limit:
        n += 1
    assert length(n) == limit  # (the largest message the sender lets through)
    rt = WorkerRuntime("w", {"size": lambda x: x.nbytes}, TOKEN, f"shm://{tmp_path}/w.sock",
                       ServeOptions(pool=2, max_frame=limit)).start()
    try:
        ch = connect(str(rt.address), TOKEN, Codec(max_frame=limit))
        try:
            ch.send(Call(1, "size", [np.zeros(n, np.uint8)]))  # by segment
            assert _next(ch) == Result(1, n)
            with pytest.raises(MessageTooLarge):
                ch.send(Call(2, "size", [np.zeros(n + 1, np.uint8)]))
            ch.send(Call(3, "size", [np.zeros(n, np.uint8)]))  # the connection serves on
            assert _next(ch) == Result(3, n)
        finally:
            ch.close()
    finally:
        rt.stop()


def test_a_local_peer_is_named_by_its_process_in_the_log(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Over ipc (and shm) the peer has no address: the log named every one "local peer",
    so two local clients could not be told apart. It names the process (SO_PEERCRED)."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN, f"ipc://{tmp_path}/w.sock",
                       ServeOptions(pool=2)).start()
    try:
        bye = _answer_to(rt, Register(Replica("n", "m", "tcp://127.0.0.1:1", [])))
        assert isinstance(bye, Goodbye)
    finally:
        rt.stop()
    assert f"local peer pid {os.getpid()} sent Register" in caplog.text


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_frame_flags_are_refused_where_the_transport_uses_none(
        transport: str, tmp_path: Path) -> None:
    """Flags 1 and 2 mean something only on shm connections (protocol.md); elsewhere a
    frame that sets them was decoded as if they were 0. It is bad input now."""
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"ipc://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN, where, ServeOptions(pool=2)).start()
    try:
        bad = connect(str(rt.address), TOKEN, Codec())
        header = Codec().encode_parts(Call(1, "echo", [1]), 1 << 30)[0]
        with bad.send_lock:  # flags 1, as a shared-memory frame says
            bad._send_pieces([struct.pack("<IHHI", 8 + len(header), 0, 1, len(header)) + header], None)
        bye = _next(bad)
        bad.close()
        assert isinstance(bye, Goodbye) and "frame flags 1" in bye.reason, bye
        _serving(rt, 2)
    finally:
        rt.stop()
