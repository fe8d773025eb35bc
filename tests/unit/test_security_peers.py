"""Strangers and bad peers at a live replica (in-process, over loopback TCP).

Each bad peer is disconnected with a reason (a refusal status, a Goodbye, or a log
line for one that never speaks) within about a second, while a good client keeps
getting answers; nothing a stranger sends reaches pickle.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.errors import AuthenticationError
from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire import handshake
from polybus.wire.codec import Codec
from polybus.wire.framing import encode_frame
from polybus.wire.messages import Batch, Call, Fail, Goodbye, Message, Register, Replica, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"s3cret-token-for-tests-0123456789"


class Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("pickle ran",))


@pytest.fixture
def worker() -> Iterator[WorkerRuntime]:
    rt = WorkerRuntime("w0", {"echo": lambda x: x}, TOKEN,
                       options=ServeOptions(pool=2, allow_pickle=True, max_frame=1 << 20,
                                            handshake_timeout=1.0)).start()
    try:
        yield rt
    finally:
        rt.stop()


def _raw(rt: WorkerRuntime) -> socket.socket:
    s = socket.create_connection((rt.address.host, rt.address.port), timeout=3)
    return s


def _read_until_closed(s: socket.socket, limit: float = 3.0) -> tuple[bytes, float]:
    t0 = time.monotonic()
    data = b""
    s.settimeout(limit)
    try:
        while chunk := s.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return data, time.monotonic() - t0


def _good_call(ch: Channel, n: int) -> None:
    ch.send(Call(n, "echo", [n]))
    got: list[object] = []
    while not got:
        got = ch.receive()
    assert got == [Result(n, n)]


def _handshaken(rt: WorkerRuntime) -> socket.socket:
    s = _raw(rt)
    hs = handshake.ClientHandshake(TOKEN)
    s.sendall(hs.proof(s.recv(handshake.HELLO_SIZE)))
    hs.verify(s.recv(handshake.ANSWER_SIZE))
    return s


def _goodbye_reason(data: bytes) -> str:
    codec = Codec(max_frame=1 << 20)
    from polybus.wire.framing import FrameDecoder

    dec = FrameDecoder(1 << 20)
    dec.feed(data)
    frame = dec.next_frame()
    assert frame is not None, f"no Goodbye frame in {data!r}"
    msg = codec.decode(frame)
    assert isinstance(msg, Goodbye)
    return msg.reason


def test_bad_peers_are_dropped_with_a_reason_while_a_good_client_is_served(
        worker: WorkerRuntime, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    good = connect(worker.address, TOKEN, Codec())
    try:
        _good_call(good, 1)
        # 1. no handshake: junk where the proof should be
        s = _raw(worker)
        s.recv(handshake.HELLO_SIZE)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".ljust(handshake.PROOF_SIZE, b"\0"))
        data, took = _read_until_closed(s)
        assert data[:1] == bytes([handshake.NOT_POLYBUS]) and took < 1.5
        s.close()
        _good_call(good, 2)
        # 2. a wrong token
        with pytest.raises(AuthenticationError, match="wrong cluster token"):
            connect(worker.address, b"not-the-token", Codec())
        _good_call(good, 3)
        # 3. a valid handshake, then garbage frames
        s = _handshaken(worker)
        s.sendall(struct.pack("<IHHI", 12, 0, 0, 4) + b"\xc1\xc1\xc1\xc1")
        data, took = _read_until_closed(s)
        assert "protocol error" in _goodbye_reason(data) and took < 1.5
        s.close()
        _good_call(good, 4)
        # 4. an oversized length prefix
        s = _handshaken(worker)
        s.sendall(struct.pack("<I", 0xFFFF_FFF0))
        data, took = _read_until_closed(s)
        assert "over the limit" in _goodbye_reason(data) and took < 1.5
        s.close()
        _good_call(good, 5)
        # 5. slowloris: one byte of a proof, then silence
        s = _raw(worker)
        s.recv(handshake.HELLO_SIZE)
        s.sendall(b"P")
        data, took = _read_until_closed(s)
        assert data == b"" and took < 2.0  # dropped after handshake_timeout (1 s)
        s.close()
        _good_call(good, 6)
        # 6. several strangers at once, none of which holds anyone else up
        crowd = [_raw(worker) for _ in range(8)]
        for i, c in enumerate(crowd):
            c.sendall(bytes([i]) * (i * 10))
        _good_call(good, 7)
        for c in crowd:
            _read_until_closed(c)
            c.close()
        _good_call(good, 8)
    finally:
        good.close()
    reasons = "\n".join(r.getMessage() for r in caplog.records)
    for expected in ("not a polybus peer", "wrong cluster token", "malformed message",
                     "over the limit", "timed out"):
        assert expected in reasons
    assert TOKEN.decode() not in reasons


def test_a_stranger_never_reaches_pickle(worker: WorkerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """With pickle enabled, frames carrying a pickle from an unauthenticated peer are
    never decoded; the same frame from an authenticated one is (the control)."""
    import polybus.wire.codec as codec_mod

    calls: list[bytes] = []
    real = pickle.loads

    def recording(data: bytes, /, **kw: object) -> object:
        calls.append(bytes(data))
        return real(data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(codec_mod.pickle, "loads", recording)
    sender = Codec(allow_pickle=True)
    frame = b"".join(bytes(p) for p in sender.encode(Call(1, "echo", [Evil()])))
    assert b"pickle ran" in frame
    # Without a handshake, with a bad handshake, and with the frame in place of the proof.
    for attempt in range(3):
        s = _raw(worker)
        s.recv(handshake.HELLO_SIZE)
        if attempt == 1:
            s.sendall(handshake.ClientHandshake(b"wrong").proof(handshake.ServerHandshake(b"x").hello()))
        s.sendall(frame * 4)
        _read_until_closed(s)
        s.close()
    assert calls == []
    good = connect(worker.address, TOKEN, Codec(allow_pickle=True))
    try:
        good.send(Call(2, "echo", [1]))
        while not good.receive():
            pass
        good.sock.sendall(frame)
        deadline = time.monotonic() + 3
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        good.close()
    assert len(calls) == 1  # the control: an authenticated peer's pickle is decoded


def test_token_is_not_in_refusal_errors() -> None:
    rt = WorkerRuntime("w1", {}, TOKEN).start()
    try:
        with pytest.raises(AuthenticationError) as info:
            connect(rt.address, TOKEN[::-1], Codec())
        assert TOKEN.decode() not in str(info.value)
        assert TOKEN[::-1].decode() not in str(info.value)
    finally:
        rt.stop()


def test_encode_frame_guard() -> None:
    with pytest.raises(Exception, match="over the frame limit"):
        encode_frame(b"x" * 100, max_frame=50)


def _next(ch: Channel, limit: float = 3.0) -> object:
    """The next message on ``ch`` within ``limit`` seconds; None if none came, or if the
    peer closed the connection without one."""
    return next_message(ch, limit)


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


def test_a_nan_priority_is_refused_and_the_order_of_others_kept() -> None:
    """A Call whose prio is NaN would sit in the replica's heap compared false with every
    other, breaking the order of other clients' calls: it is answered bad-call alone."""
    order: list[int] = []
    gate, started = threading.Event(), threading.Event()

    def f(x: int) -> int:
        if x == 0:
            started.set()
            gate.wait(3)  # holds the one handler while the others queue behind it
        order.append(x)
        return x

    rt = WorkerRuntime("w0", {"f": f}, TOKEN, options=ServeOptions(pool=1)).start()
    try:
        ch = connect(rt.address, TOKEN, Codec())
        try:
            ch.send(Call(0, "f", [0]))
            assert started.wait(3)  # 0 runs, and holds the handler
            # (the NaN call last: its answer says every call before it is queued)
            for i, prio in [(1, 1.0), (3, 5.0), (4, 2.0), (5, 3.0), (2, float("nan"))]:
                ch.send(Call(i, "f", [i], None, prio))
            nan = _next(ch)
            gate.set()
            got = [_next(ch) for _ in range(5)]
        finally:
            ch.close()
    finally:
        rt.stop()
    assert isinstance(nan, Fail) and nan.id == 2 and nan.kind == "bad-call", nan
    assert "priority nan is not a number" in nan.message
    assert sorted(m.id for m in got if isinstance(m, Result)) == [0, 1, 3, 4, 5]
    assert order == [0, 3, 5, 4, 1]  # highest first, as if the NaN call never came


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


@pytest.mark.parametrize("transport", ["tcp", "ipc", "shm"])
def test_a_nan_priority_is_refused_on_the_lone_call_path_too(
        transport: str, tmp_path: Path) -> None:
    """After an answer the replica serves that client's next lone call inline
    (direct.py, socketserve.py), not through Intake._admit: a NaN-priority call that
    came then was run and answered, one that came later refused bad-call. It is
    refused on every path, as protocol.md says."""
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"{transport}://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"f": lambda x: x}, TOKEN, where, ServeOptions(pool=1)).start()
    try:
        ch = connect(str(rt.address), TOKEN, Codec())
        try:
            for i in range(5):
                ch.send(Call(100 + i, "f", [i]))
                assert _next(ch) == Result(100 + i, i)
                ch.send(Call(i, "f", [i], None, float("nan")))  # (at once: served inline)
                got = _next(ch)
                assert isinstance(got, Fail) and got.kind == "bad-call", got
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
