"""A peer past the handshake that sends part of a frame and then nothing more, at a
replica (in-process, over tcp, ipc, shm and tcp with TLS).

Such a peer (a process stopped with SIGSTOP as it wrote, a buggy client) held its
connection for ever over ipc and shm, whose kernel always knows the peer is alive, and
over tcp too (its kernel answers the keepalive probes; nothing written to it waits for
an acknowledgement): the connection, the memory of the frame begun (a 4 MiB frame's
length alone had the replica set aside 4 MiB), and its calls queued, which ran for
nobody. A frame begun must keep making progress: with no byte of it for 4 heartbeats
the connection is dropped, said in one line, as a client that closed (its calls not
yet started go), while other clients are served throughout. A large frame trickling
in, however slowly, as long as it moves, is never dropped.
"""

from __future__ import annotations

import logging
import shutil
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_security_tls import cfg, make_pki  # tests/unit

from polybus.testing.peers import next_message
from polybus.transport import tls
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Result
from polybus.worker.options import ServeOptions
from polybus.worker.poller import ended
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"stalled-frames-token-0123456789ab"
HEARTBEAT = 0.25  # (the test's own [cluster] heartbeat: a frame stalled 1 s is dropped)
WAIT = 15.0  # the most any condition below is waited for
LARGE = 4 * 1024 * 1024  # a frame's size on the wire, its 4-byte length included
# What the stalled peer sends of its last frame, and how the replica says it.
PARTS = {
    "length": (b"\x10\x00", "sent 2 of the 4 bytes of a frame's length"),
    "large": (struct.pack("<IHHI", LARGE - 4, 0, 0, 0), "sent 12 of a 4,194,304-byte frame"),
}


TRANSPORTS = ["tcp", "ipc", "shm", pytest.param("tls", marks=pytest.mark.skipif(
    shutil.which("openssl") is None, reason="needs the openssl command to make a test CA"))]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def where(request: pytest.FixtureRequest, transport: str, tmp_path: Path) -> Iterator[str]:
    """Where the replica listens; for tls, this process's connections use TLS meanwhile
    (test_security_tls.py's certificates)."""
    if transport != "tls":
        yield "tcp://127.0.0.1:0" if transport == "tcp" else f"{transport}://{tmp_path}/w.sock"
        return
    tls.configure(cfg(request.getfixturevalue("pki")))
    try:
        yield "tcp://127.0.0.1:0"
    finally:
        tls.configure(None)


class Held:
    """A function whose calls wait for `release` (each run recorded)."""

    def __init__(self) -> None:
        self.runs: list[int] = []
        self.started = threading.Event()
        self.gate = threading.Event()

    def __call__(self, i: int) -> int:
        self.runs.append(i)
        self.started.set()
        self.gate.wait(4 * WAIT)  # (the fixture lets it go whatever happens)
        return i


@pytest.fixture
def held() -> Iterator[Held]:
    h = Held()
    yield h
    h.gate.set()


def _replica(where: str, held: Held) -> WorkerRuntime:
    # ``hold`` runs one call at a time (a pool of its own), so the stalled peer's second
    # call waits in the queue while the other thread serves everyone else.
    return WorkerRuntime("w", {"echo": lambda x: x, "hold": held}, TOKEN, where,
                         ServeOptions(pool=2, heartbeat=HEARTBEAT,
                                      limits=((("hold",), 1),))).start()


def _frames(*msgs: Call) -> bytes:
    return b"".join(bytes(p) for m in msgs for p in Codec().encode(m))


def _write(ch: Channel, data: bytes) -> None:
    """``data`` as it is, a frame or part of one (over shm, into the ring)."""
    with ch.send_lock:
        ch._send_pieces([data], None)


def _call(ch: Channel, msg: Call) -> object:
    ch.send(msg)
    return next_message(ch, WAIT)


def _until(what: Callable[[], bool], said: Callable[[], str]) -> None:
    """Wait for ``what`` (WAIT at most); else fail with ``said()``."""
    deadline = time.monotonic() + WAIT
    while not what():
        if time.monotonic() >= deadline:
            pytest.fail(said())
        time.sleep(0.02)


def _begun(rt: WorkerRuntime) -> Channel | None:
    """The replica's connection whose decoder holds part of a frame, if any."""
    for ch in list(rt._channels):
        if ch.decoder.partial():
            return ch
    return None


def _held_now(rt: WorkerRuntime, ch: Channel) -> str:
    return (f"after {WAIT:g} s the replica still holds the stalled peer's connection "
            f"({ch.peer}: {ch.decoder.partial()} of a frame received, "
            f"{rt._queue.waiting(ch)} call(s) of its queued, its frame's memory "
            f"{'set aside' if ch.decoder.receiving_large else 'not set aside'})")


@pytest.mark.parametrize("part", list(PARTS))
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_peer_stalled_in_a_frame_is_dropped_with_its_queued_calls(
        where: str, part: str, held: Held, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    data, said = PARTS[part]
    rt = _replica(where, held)
    good = bad = None
    try:
        good = connect(str(rt.address), TOKEN, Codec())
        bad = connect(str(rt.address), TOKEN, Codec())
        assert _call(good, Call(1, "echo", [1])) == Result(1, 1)
        # (an answer first: the replica then waits for this client's next call alone)
        assert _call(bad, Call(2, "echo", [2])) == Result(2, 2)
        # Two calls (one runs and waits, one is queued), then part of a frame, and no more.
        _write(bad, _frames(Call(3, "hold", [3]), Call(4, "hold", [4])) + data)
        assert held.started.wait(WAIT)
        _until(lambda: _begun(rt) is not None, lambda: "the frame begun never reached "
               "the replica's decoder")
        stalled = _begun(rt)
        assert stalled is not None and rt._queue.waiting(stalled) == 1
        # Others are served while it holds its connection.
        assert _call(good, Call(5, "echo", [5])) == Result(5, 5)
        # (the read that finds the cut marks it closed, then the drop takes it out of
        # the channels, then its queued calls: looked at between the last two, its call
        # was still queued, seen once; all three waited for, bounded, and held.runs
        # below shows the queued call never ran)
        _until(lambda: (stalled not in rt._channels and stalled.closed
                        and rt._queue.waiting(stalled) == 0),
               lambda: _held_now(rt, stalled))
        assert said in caplog.text, caplog.text
        _until(lambda: ended(bad.sock), lambda: "its end never saw the connection go")
        assert _call(good, Call(6, "echo", [6])) == Result(6, 6)
        held.gate.set()
        # Its queued call never runs: the next hold call runs after the running one.
        assert _call(good, Call(7, "hold", [7])) == Result(7, 7)
        assert held.runs == [3, 7]
    finally:
        for ch in (good, bad):
            if ch is not None:
                ch.close()
        held.gate.set()
        rt.stop()
    lines = [r.getMessage() for r in caplog.records if "frame" in r.getMessage()]
    assert len(lines) == 1, lines  # (one line: not also "went in the middle of a frame")
    assert "and nothing more for " in lines[0] and f"(heartbeat {HEARTBEAT:g} s)" in lines[0]
    assert lines[0].startswith(f"worker w: {stalled.peer} {said} "), lines[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_large_frame_trickling_in_is_never_dropped(
        where: str, caplog: pytest.LogCaptureFixture) -> None:
    """A 4 MiB call sent in 12 pieces over 2.75 times the bound, each pause a quarter of
    it (room for a sender held up on a loaded machine): answered, nothing said of it."""
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    rt = WorkerRuntime("w", {"size": lambda b: len(b)}, TOKEN, where,
                       ServeOptions(pool=2, heartbeat=HEARTBEAT)).start()
    try:
        ch = connect(str(rt.address), TOKEN, Codec())
        try:
            frame = _frames(Call(1, "size", [bytes(LARGE - 200)]))
            pieces = 12
            step = -(-len(frame) // pieces)
            pause = 4 * HEARTBEAT / 4  # (a quarter of the bound)
            for k in range(pieces):
                _write(ch, frame[k * step:(k + 1) * step])
                if k < pieces - 1:
                    time.sleep(pause)  # (the sender's pace, not a wait for the replica)
            assert next_message(ch, WAIT) == Result(1, LARGE - 200)
        finally:
            ch.close()
    finally:
        rt.stop()
    assert "nothing more for" not in caplog.text, caplog.text
