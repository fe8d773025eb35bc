"""A replica answering a lone client's calls on its connection (worker/direct.py) still
does everything the general path does: other messages, queued work, long calls, errors."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from integration.conftest import next_message
from polybus.errors import RemoteError
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Fail, Goodbye, Message, Ping, Pong, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"k" * 32


def _boom(x: int) -> int:
    raise ValueError(f"no {x}")


class _FailedPromise:
    """A promise whose call failed, inside a result: encoding the result forces it."""

    def __polybus_value__(self) -> None:
        raise RemoteError("the upstream call failed")


@pytest.fixture(params=["tcp", "shm"])
def pair(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[tuple[WorkerRuntime, Channel]]:
    where = "tcp://127.0.0.1:0" if request.param == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"echo": lambda x: x, "nap": time.sleep, "boom": _boom,
                             "pair": lambda a, b=0: (a, b),
                             "forwards": lambda: [_FailedPromise()]}, TOKEN,
                       where, ServeOptions(pool=1)).start()
    ch = connect(str(rt.address), TOKEN, Codec())
    ch.spin_s = 100e-6
    try:
        yield rt, ch
    finally:
        ch.close()
        rt.stop()


def test_lone_calls_then_other_messages_between_them(pair: tuple[WorkerRuntime, Channel]) -> None:
    rt, ch = pair
    for i in range(200):  # each answered, the next comes while the replica looks at ch
        ch.send(Call(i, "echo", [i]))
        assert next_message(ch) == Result(i, i)
    _place_given_back(rt)
    ch.send(Ping(7))  # control, read by the direct loop, answered by the general intake
    assert next_message(ch) == Pong(7, 0, 0)
    ch.send(Call(500, "boom", [3]))
    fail = next_message(ch)
    assert isinstance(fail, Fail) and fail.type == "ValueError" and "no 3" in fail.traceback
    ch.send(Call(501, "nope", []))
    assert isinstance(miss := next_message(ch), Fail) and miss.kind == "no-interface"
    assert rt.calls == 201


def _place_given_back(rt: WorkerRuntime) -> None:
    """A call's place in the pool is given back just after its answer is written: the
    answer can be read a moment before, so wait (bounded) for the count to come down."""
    deadline = time.monotonic() + 5
    while rt._running and time.monotonic() < deadline:
        time.sleep(0.001)


def _spun(ch: Channel) -> Message:
    """The next message, read as a sync client does (spinning first: no pause)."""
    while (msg := ch.next_message()) is None:
        ch.fill(wait=True)
    return msg


def test_calls_that_queue_are_run_at_once(pair: tuple[WorkerRuntime, Channel]) -> None:
    """A batch read while answering lone calls is queued: the pool runs it right away
    (the direct loop lets the role go rather than sleep in the selector holding it).
    The poller's idle look is made a minute long: a batch left until then is not
    answered within the reads' bound (no clock is read to judge it)."""
    rt, ch = pair
    rt.idle_s = 60.0
    for i in range(0, 100, 3):
        ch.send(Call(i, "echo", [i]))
        assert next_message(ch, 20.0, pause=0) == Result(i, i)
        ch.send(Batch([Call(i + 1, "echo", [i + 1]), Call(i + 2, "echo", [i + 2])]))
        got: list[Message] = []
        while len(got) < 2:
            msg = next_message(ch, 20.0, pause=0)
            got.extend(msg.items if isinstance(msg, Batch) else [msg])
        assert sorted(r.id for r in got if isinstance(r, Result)) == [i + 1, i + 2]


def test_a_long_call_leaves_the_connection_read(pair: tuple[WorkerRuntime, Channel]) -> None:
    """While a call runs inline the role is let go: the standby answers a ping."""
    rt, ch = pair
    ch.send(Call(1, "echo", [1]))
    assert next_message(ch) == Result(1, 1)
    _place_given_back(rt)  # (else the nap is queued behind the echo's place)
    ch.send(Call(2, "nap", [2.0]))  # (long enough for a loaded machine's standby look)
    deadline = time.monotonic() + 2
    while rt._running == 0 and time.monotonic() < deadline:
        time.sleep(0.001)  # the call runs
    ch.send(Ping(9))
    assert next_message(ch, 1.5) == Pong(9, 0, 1)
    assert next_message(ch) == Result(2, None)


def test_calls_read_with_a_lone_one_are_not_left_unread(pair: tuple[WorkerRuntime, Channel]) -> None:
    """Calls that arrive together with the one the direct loop runs inline are queued
    before it runs: while a long call runs the standby takes the poller role and sleeps
    in the selector, which cannot see frames already read into the connection's
    decoder (they waited for the client's next ping, a second or more). The poller's
    idle look is made a minute long: calls left unread until then are not answered
    within the reads' bound (no clock is read to judge it)."""
    rt, ch = pair
    rt.idle_s = 60.0
    ch.send(Call(1, "echo", [1]))
    assert _spun(ch) == Result(1, 1)
    for rnd in range(3):
        base = 100 * (rnd + 1)
        ch.send_many([Call(base + k, "nap", [0.005]) for k in range(4)])
        got = {next_message(ch, 20.0).id for _ in range(4)}  # type: ignore[union-attr]
        assert got == {base + k for k in range(4)}
        ch.send(Call(base + 50, "echo", [rnd]))  # a lone call again: the direct loop
        assert _spun(ch) == Result(base + 50, rnd)


def test_frames_that_are_not_one_lone_call_a_read_are_answered_alike(
        pair: tuple[WorkerRuntime, Channel]) -> None:
    """The loop takes a read that is one plain frame as it is; anything else (part of a
    frame, a frame with buffers, keywords, a large frame) goes by the decoder, and the
    lone calls after it are taken inline again. Bytes are counted either way."""
    rt, ch = pair
    ch.send(Call(1, "echo", [1]))
    assert _spun(ch) == Result(1, 1)
    if type(ch) is Channel:  # a write in two halves, the second after the replica read
        frame = b"".join(bytes(p) for p in ch.codec.encode(Call(2, "echo", ["split in two"])))
        ch.sock.sendall(frame[:7])
        time.sleep(0.02)
        ch.sock.sendall(frame[7:])
        ch.bytes_sent += len(frame)
    else:  # (the ring carries whole frames)
        ch.send(Call(2, "echo", ["split in two"]))
    assert _spun(ch) == Result(2, "split in two")
    a = np.arange(20000.0)  # buffers beside the header
    ch.send(Call(3, "echo", [a]))
    got = _spun(ch)
    assert isinstance(got, Result) and np.array_equal(got.value, a)
    big = bytes(range(256)) * 4096  # 1 MiB: a large frame, read on into its own memory
    ch.send(Call(4, "echo", [big]))
    assert _spun(ch) == Result(4, big)
    ch.send(Call(5, "pair", [1], {"b": 2}))
    assert _spun(ch) == Result(5, [1, 2])
    for i in range(6, 50):
        ch.send(Call(i, "echo", [i]))
        assert _spun(ch) == Result(i, i)
    assert rt.calls == 49
    if type(ch) is Channel:
        (served,) = rt._channels
        # (the replica counts an answer once its write returns, which may be after the
        # client has read it: the last answer's bytes are waited for, a bounded time)
        deadline = time.monotonic() + 10.0
        while served.bytes_sent != ch.bytes_received and time.monotonic() < deadline:
            time.sleep(0.001)
        assert served.bytes_received == ch.bytes_sent and served.bytes_sent == ch.bytes_received


def test_a_malformed_call_is_refused_and_others_are_served_on(
        pair: tuple[WorkerRuntime, Channel]) -> None:
    """A frame whose header is not a message, read by the inline loop: the client is
    told why and dropped; the replica serves a new client as before."""
    rt, ch = pair
    ch.send(Call(1, "echo", [1]))
    assert _spun(ch) == Result(1, 1)
    junk = b"\xc1\xc1\xc1"  # (0xc1: never used in msgpack)
    with ch.send_lock:
        ch._send_pieces([struct.pack("<IHHI", 8 + len(junk), 0, 0, len(junk)) + junk], None)
    bye = next_message(ch)
    assert isinstance(bye, Goodbye) and "malformed message" in bye.reason
    other = connect(str(rt.address), TOKEN, Codec())
    try:
        other.send(Call(2, "echo", ["still here"]))
        assert next_message(other) == Result(2, "still here")
    finally:
        other.close()


def test_a_result_that_fails_as_it_is_encoded_is_answered_and_serving_goes_on(
        pair: tuple[WorkerRuntime, Channel]) -> None:
    """Encoding a result can raise a polybus error (a failed promise inside it): the
    call gets a Fail saying so, and the replica answers the next calls (the inline
    loop's thread used to die of it, leaving a pool of one with no one to run calls)."""
    rt, ch = pair
    ch.send(Call(1, "echo", [1]))
    assert _spun(ch) == Result(1, 1)
    ch.send(Call(2, "forwards", []))
    fail = next_message(ch)
    assert isinstance(fail, Fail) and fail.id == 2
    assert "cannot be sent: the upstream call failed" in fail.message
    for i in range(3, 20):
        ch.send(Call(i, "echo", [i]))
        assert next_message(ch) == Result(i, i)
    _place_given_back(rt)
    assert rt._running == 0


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_client_gone_while_its_call_runs_leaves_the_replica_serving(
        transport: str, tmp_path: object) -> None:
    """The client goes while its call runs, and the standby drops its connection (a
    closed socket, no descriptor). The thread that ran the call then looked for that
    client's next call on it, and the epoll it made there raised ValueError: the only
    pool thread died, and the replica never answered anyone again (a new client's
    handshake timed out: 1 run in 12 of a chaos test)."""
    release = threading.Event()
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"echo": lambda x: x, "hold": lambda: release.wait(10)},
                       TOKEN, where, ServeOptions(pool=1)).start()
    try:
        ch = connect(str(rt.address), TOKEN, Codec())
        ch.send(Call(1, "hold", []))
        deadline = time.monotonic() + 5
        while rt._running == 0 and time.monotonic() < deadline:
            time.sleep(0.001)  # the call runs
        ch.close()
        while rt._channels and time.monotonic() < deadline:
            time.sleep(0.0002)  # the standby has seen the client go and dropped it
        release.set()  # the call ends now, while the standby waits for its next look
        time.sleep(0.2)
        other = connect(str(rt.address), TOKEN, Codec())
        try:
            for i in range(3):
                other.send(Call(10 + i, "echo", [i]))
                assert next_message(other) == Result(10 + i, i)
        finally:
            other.close()
        assert all(t.is_alive() for t in rt._threads)
    finally:
        release.set()
        rt.stop()
