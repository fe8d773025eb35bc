"""A live replica fed mutated but authenticated traffic (docs/protocol.md §5).

One worker started by hand serves a module of three functions (one returns its argument,
one raises, one returns an array) over TCP and shm. Each example opens a connection,
authenticates, sends real frames the project's codec makes, mutated (live_fuzz.py), then
a probe (a `Ping`, and a call of the lowest priority, answered after those queued before
it), and checks, with bounded waits:

- the bad connection got documented answers (a `Result`, a `Fail` whose message says what
  was wrong, the control answers) and then the probe's; or a `Goodbye` saying what was
  wrong and its end; or, a frame begun and never finished, its end when the client
  half-closes; and a peer dropped is named in the worker's log, with why;
- a well-behaved client on each transport, connected all along, is answered correctly;
- the worker is alive and no traceback of polybus's own came out of it;
and, over the run, that its thread count and memory do not grow without bound.

The examples are POLYBUS_FUZZ_LIVE_EXAMPLES per transport (300 by default, derandomized:
the same every run; `make fuzz` raises it).
"""

from __future__ import annotations

import math
import os
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from integration.conftest import Procs, start_registry
from integration.live_fuzz import (
    NOWHERE,
    answers_result,
    mutated,
    says_goodbye,
    seed,
    values,
    walk,
)
from polybus.errors import ConnectionLostError, ProtocolError
from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import (
    Batch,
    BatchResult,
    Call,
    Fail,
    Fetched,
    Goodbye,
    Ping,
    Pong,
    Released,
    Result,
    Stats,
    Undelivered,
)

EXAMPLES = int(os.environ.get("POLYBUS_FUZZ_LIVE_EXAMPLES", "300"))
TOKEN = b"fuzz-live-token-" + b"5" * 32
SERVER = '''\
import numpy as np


def echo(x):
    return x


def boom(text):
    raise ValueError(text)


def arr(n):
    return np.arange(int(n) % 4096, dtype=np.float64)
'''
KINDS = {"exception", "busy", "no-interface", "bad-call", "cache-miss", "forward-dropped"}
ANSWERS = (Result, Fail, Batch, BatchResult, Released, Stats, Pong, Fetched, Undelivered)
WAIT = 20.0  # the bound of every wait (a loaded machine; a pass takes milliseconds)


class Live:
    """The worker: its addresses, its stderr as it comes, its pid's threads and memory."""

    def __init__(self, w: Any, tcp: str, shm: str) -> None:
        self.w, self.tcp, self.shm, self.lines = w, tcp, shm, []  # type: list[str]
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            for line in self.w.stderr:
                with self._lock:
                    self.lines.append(line)
        except (ValueError, OSError):
            pass

    def since(self, mark: int) -> list[str]:
        with self._lock:
            return self.lines[mark:]

    def said(self, mark: int, pattern: str) -> list[str]:
        """The lines after ``mark`` matching ``pattern``, waited for (bounded)."""
        deadline = time.monotonic() + WAIT
        while not (got := [ln for ln in self.since(mark) if re.search(pattern, ln)]):
            if time.monotonic() > deadline or self.w.poll() is not None:
                break
            time.sleep(0.005)
        return got

    def sample(self) -> tuple[int, int]:
        """Threads and resident kB of the worker now."""
        status = Path(f"/proc/{self.w.pid}/status").read_text()
        threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
        return threads, rss


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("fuzzlive")
    (tmp / "server.py").write_text(SERVER)
    procs = Procs()
    try:
        env = {"POLYBUS_TOKEN": TOKEN.decode()}
        registry, _ = start_registry(procs, env)
        w = procs.start("worker", "--registry", registry, "--module", tmp / "server.py",
                        "--name", "fuzz-0", "--listen", "tcp://127.0.0.1:0",
                        "--listen", f"shm://{tmp}/w.sock", env=env)
        live = Live(w, "", f"shm://{tmp}/w.sock")
        m = live.said(0, r"serving .* at (tcp://[\d.]+:\d+)")
        assert m, live.since(0)
        live.tcp = re.search(r"(tcp://[\d.]+:\d+)", m[0]).group(1)  # type: ignore[union-attr]
        yield live
    finally:
        procs.close()


def _send_raw(ch: Channel, data: bytes) -> None:
    """``data`` as they are, where a peer's frames go: the socket, or the shm ring."""
    tx = getattr(ch, "_tx", None)
    if tx is None:
        ch.sock.sendall(data)
        return
    with ch.send_lock:
        ch._send_ring(tx, [data], None)  # type: ignore[attr-defined]


def _peer(ch: Channel) -> str:
    """How the worker's log names this connection (transport/endpoints.py)."""
    if ch.sock.family == socket.AF_INET:
        host, port = ch.sock.getsockname()
        return f"{host}:{port}"
    return f"local peer pid {os.getpid()}"


CLOSED = object()


def _read_to_end(ch: Channel) -> list[Any]:
    """What comes until the replica closes the connection (bounded)."""
    got: list[Any] = []
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        m = next_message(ch, max(0.0, deadline - time.monotonic()), CLOSED)
        if m is CLOSED or m is None:
            return got if m is CLOSED else [*got, "no end"]
        got.append(m)
    return [*got, "no end"]


def _check_answer(m: Any, what: Any) -> None:
    assert isinstance(m, ANSWERS), (what, m)
    fails = m.items if isinstance(m, Batch) else m.fails if isinstance(m, BatchResult) \
        else [m]
    if isinstance(m, Undelivered) and (m.to in NOWHERE or "nonexistent" in m.to):
        # (the address is what failed, not the value: a host IDNA refuses was once
        # said as "the value it returned cannot be sent", a TypeError)
        assert m.type == "TransportError" and m.message, (what, m)
    for f in fails:
        if isinstance(f, Fail):
            assert f.kind in KINDS and f.type, (what, f)
            assert f.message or f.kind == "exception", (what, f)  # (a user's own may be "")


class Round:
    """The state of one transport's run: its well-behaved client, the samples."""

    def __init__(self, live: Live, address: str) -> None:
        self.live, self.address = live, address
        self.good = connect(address, TOKEN, Codec())
        self.n = 0
        self.samples: list[tuple[int, int]] = []
        self.outcomes: Counter[str] = Counter()  # (printed at the end: what the run tried)

    def example(self, data: st.DataObject) -> None:
        live = self.live
        self.n += 1
        mark = len(live.since(0))
        msgs, loose = seed(data, 1000 * self.n, live.tcp)
        stream = mutated(data, msgs, loose)
        # The probe: a Ping answered at once, then a call of the lowest priority, which
        # runs after the calls of the stream that were queued (their answers come first).
        probe = Ping(10**9 + self.n)
        last = Call(10**9 + self.n, "echo", ["end"], prio=-math.inf)
        tail = _frame(probe) + _frame(last)
        whole = walk(stream.data + tail) == "whole"
        what = (stream.what, stream.data)
        bad = connect(self.address, TOKEN, Codec())
        peer = _peer(bad)
        try:
            try:
                _send_raw(bad, stream.data + tail)
                if not whole:
                    bad.sock.shutdown(socket.SHUT_WR)
            except (OSError, ConnectionLostError):
                pass  # (dropped already: what it said is read below)
            self._outcome(bad, peer, probe, whole, mark, what)
        finally:
            bad.close()
        self._good(data)
        assert live.w.poll() is None, ("the worker died", what, live.since(mark))
        own = [ln for ln in live.since(mark) if "Traceback" in ln or "failed;" in ln]
        assert not own, (what, "".join(live.since(mark)))
        self.samples.append(live.sample())

    def _outcome(self, bad: Channel, peer: str, probe: Ping, whole: bool, mark: int,
                 what: Any) -> None:
        got: list[Any] = []
        ponged = False
        try:
            while True:
                m = next_message(bad, WAIT, CLOSED)
                if m is None or m is CLOSED:
                    break
                if isinstance(m, Pong) and m.req == probe.req:
                    assert whole, (what, got)
                    ponged = True
                    continue
                got.append(m)
                if isinstance(m, Goodbye):
                    got += _read_to_end(bad)
                    break
                _check_answer(m, what)
                if ponged and any(isinstance(a, Result) and a.id == probe.req
                                  for a in (m.items if isinstance(m, Batch) else [m])):
                    self.outcomes["served on"] += 1
                    return  # read as whole frames, every one answered as documented
        except ProtocolError as exc:  # the replica sent what its own codec cannot read
            raise AssertionError(("undecodable answer", what, got)) from exc
        assert m is not None, ("no answer and no end in time", what, got)
        bye = [g for g in got if isinstance(g, Goodbye)]
        assert all(g.reason for g in bye), (what, got)
        self.outcomes["goodbye" if bye else "half-closed" if not whole else "closed"] += 1
        if not bye and says_goodbye(what[1]):  # (it said goodbye itself: nothing to log)
            return
        said = live_said(self.live, mark, peer)
        assert said, ("dropped, and the log says nothing of", peer, what, got,
                      self.live.since(mark))

    def _good(self, data: st.DataObject) -> None:
        """The well-behaved client: each function answers it as it should."""
        v = data.draw(values)
        good, n = self.good, 3 * self.n
        good.send_many([Call(n, "echo", [v]), Call(n + 1, "boom", ["no"]), Call(n + 2, "arr", [3])])
        got = {}
        while len(got) < 3:
            m = next_message(good, WAIT)
            for a in m.items if isinstance(m, Batch) else [m]:
                assert isinstance(a, Result | Fail), a
                got[a.id] = a
        assert isinstance(got[n], Result) and answers_result(got[n], v), got
        assert isinstance(got[n + 1], Fail) and got[n + 1].message == "no", got
        assert answers_result(got[n + 2], np.arange(3.0)), got


def live_said(live: Live, mark: int, peer: str) -> list[str]:
    """The worker's lines since ``mark`` that name ``peer`` (waited for, bounded)."""
    return live.said(mark, rf"{re.escape(peer)}\b")


def _frame(msg: Any) -> bytes:
    return b"".join(bytes(p) for p in Codec().encode(msg))


def _run(live: Live, address: str) -> Round:
    r = Round(live, address)

    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(st.data())
    def fuzz(data: st.DataObject) -> None:
        r.example(data)

    try:
        fuzz()
    finally:
        r.good.close()
        print(f"{address}: {r.n} examples: {dict(r.outcomes)}")
    return r


def _bounded(r: Round) -> None:
    """Threads and memory at the end are within a margin of the first tenth's most."""
    first = r.samples[:max(1, len(r.samples) // 10)]
    threads, rss = r.live.sample()
    assert threads <= max(t for t, _ in first) + 4, (r.samples[::10], threads)
    assert rss <= max(k for _, k in first) + 128 * 1024, (r.samples[::10], rss)


def test_mutated_frames_over_tcp(live: Live) -> None:
    _bounded(_run(live, live.tcp))


def test_mutated_frames_over_shm(live: Live) -> None:
    _bounded(_run(live, live.shm))

