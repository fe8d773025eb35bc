"""A replica drops a TCP client cut off by the network, and never one that is alive.

Cut off, a client sends no FIN and no reset: what the replica writes to it goes
unacknowledged, and its connection is then shut down and dropped as a client that
closed, its queued calls with it (worker/accepting.py, `_look_for_cut_off`; here the
look's measure, transport/keepalive.py's `unheard_s`, is made to say so; the real cut is
tests/chaos/test_cut_client.py's). A client alive is never dropped, however long it is
silent or slow: one waiting for a call longer than the bound on a connection silent
both ways (the kernel answers the probes), and one that reads none of its answers for
longer than the bound (its window closed: a kernel timeout on unacknowledged data,
TCP_USER_TIMEOUT, ended that one too).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from polybus.errors import ConnectionLostError
from polybus.testing.peers import next_message
from polybus.transport import keepalive
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Message, Result
from polybus.worker import accepting
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"cut-off-clients-token-0123456789"
HEARTBEAT = 0.5  # (probes a second apart: the kernel's unit)
BIG = 1 << 20


class Server:
    """Functions that record each run (the replica's own count is what is tested)."""

    def __init__(self) -> None:
        self.runs: list[int] = []
        self.lock = threading.Lock()
        self.bigs = [bytes([i]) * BIG for i in range(24)]

    def work(self, i: int, seconds: float) -> int:
        with self.lock:
            self.runs.append(i)
        time.sleep(seconds)
        return i

    def big(self, i: int) -> bytes:
        return self.bigs[i]  # (made beforehand: a call as quick as in a process that
        # has made such values before, whose memory is at hand)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[WorkerRuntime, Server]]:
    # One heartbeat unacknowledged, not three, makes the bound (the replica runs in this
    # process): 2 s, not 4, for the tests of a live client to wait past. What is tested
    # is that a live client is never taken for cut off, however long the bound.
    monkeypatch.setattr(keepalive, "PROBES", 1)
    assert keepalive.bound_s(HEARTBEAT) == 2
    server = Server()
    rt = WorkerRuntime("w", {"work": server.work, "big": server.big}, TOKEN,
                       options=ServeOptions(heartbeat=HEARTBEAT)).start()
    try:
        yield rt, server
    finally:
        rt.stop(grace=0.5)


def _client(rt: WorkerRuntime) -> Channel:
    return connect(rt.address, TOKEN, Codec())


def _answers(ch: Channel, n: int, limit: float) -> list[Message]:
    """Up to ``n`` answers, those a Batch carries (answers written together) each."""
    got: list[Message] = []
    deadline = time.monotonic() + limit
    while len(got) < n and time.monotonic() < deadline:
        msg = next_message(ch, limit=max(0.1, deadline - time.monotonic()))
        if msg is None:
            break
        got += msg.items if isinstance(msg, Batch) else [msg]
    return got


def test_a_client_cut_off_is_dropped_with_its_queued_calls(
        served: tuple[WorkerRuntime, Server], monkeypatch: pytest.MonkeyPatch) -> None:
    rt, server = served
    cut_off, other = _client(rt), _client(rt)
    try:
        for i in range(20):
            cut_off.send(Call(i, "work", [i, 0.1]))
        deadline = time.monotonic() + 5
        while not server.runs and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.runs, "no call ran"
        # (the other's connection is adopted by the poller apart from its handshake:
        # it may not be yet, a call of the first running)
        while len(rt._channels) < 2 and time.monotonic() < deadline + 5:
            time.sleep(0.01)
        # From now on, its connection is one whose answers go unacknowledged (as if it
        # were cut off), the other's not.
        assert len(rt._channels) == 2
        cut_sock = next(ch.sock for ch in list(rt._channels)
                        if ch.sock.getpeername() == cut_off.sock.getsockname())
        real = keepalive.unheard_s
        monkeypatch.setattr(accepting, "unheard_s",
                            lambda s: 1000.0 if s is cut_sock else real(s))
        deadline = time.monotonic() + 5
        while len(rt._channels) > 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(rt._channels) == 1, "the client cut off was not dropped"
        ran = len(server.runs)
        time.sleep(0.5)  # (five calls' time: none more of its calls runs)
        assert len(server.runs) == ran < 20
        # The replica serves the others on.
        other.send(Call(99, "work", [99, 0.0]))
        answer = next_message(other, limit=5)
        assert isinstance(answer, Result) and answer.value == 99
        with pytest.raises(ConnectionLostError):
            for _ in range(100):
                cut_off.fill_soon(0.05)
    finally:
        cut_off.close()
        other.close()


@pytest.mark.slow
def test_a_call_longer_than_the_bound_on_a_silent_connection_is_answered(
        served: tuple[WorkerRuntime, Server]) -> None:
    rt, _ = served
    seconds = keepalive.bound_s(HEARTBEAT) + 1.0  # (past a look after it; never pings)
    ch = _client(rt)
    try:
        ch.send(Call(1, "work", [7, seconds]))
        answer = next_message(ch, limit=seconds + 5)
        assert isinstance(answer, Result) and answer.value == 7
        assert len(rt._channels) == 1
    finally:
        ch.close()


@pytest.mark.slow
def test_a_client_that_reads_nothing_for_longer_than_the_bound_is_kept(
        served: tuple[WorkerRuntime, Server]) -> None:
    rt, _ = served
    n = 24  # answers of 1 MiB: more than the kernel's buffers of both sides hold
    ch = _client(rt)
    try:
        for i in range(n):
            ch.send(Call(i, "big", [i]))
        time.sleep(keepalive.bound_s(HEARTBEAT) + 1.0)  # (reading nothing, past a look)
        assert len(rt._channels) == 1
        got = _answers(ch, n, limit=30)
        # Every answer, each whole, in the order the calls ran (one thread runs them).
        said = [(type(m).__name__, getattr(m, "id", None)) for m in got]
        assert [m for m in got if not isinstance(m, Result)] == [], said
        assert [(m.id, len(m.value), m.value[:1]) for m in got  # type: ignore[attr-defined]
                ] == [(i, BIG, bytes([i])) for i in range(n)], said
    finally:
        ch.close()
