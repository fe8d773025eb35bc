"""Strangers and bad peers at a live replica (in-process, over loopback TCP).

Each bad peer is disconnected with a reason (a refusal status, a Goodbye, or a log
line for one that never speaks) within about a second, while a good client keeps
getting answers; nothing a stranger sends reaches pickle. Peers past the handshake
that send what a replica does not take: test_security_peers_frames.py.
"""

from __future__ import annotations

import logging
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
from polybus.wire.messages import Call, Fail, Goodbye, Result
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
    import polybus.wire.decoding as decoding  # (where a frame's pickles are read)

    calls: list[bytes] = []
    real = pickle.loads

    def recording(data: bytes, /, **kw: object) -> object:
        calls.append(bytes(data))
        return real(data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(decoding.pickle, "loads", recording)
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
