"""A replica's ``queue`` bounds the calls that wait, not those a free handler is about to
take (worker/intake.py, `_full`).

Found by a new user: ``define.slow = { pool = 4, queue = 2, overflow = "reject" }`` and
an async burst of 16 calls of 0.2 s: 3 or 4 accepted, not 6, while handlers sat idle (a
burst of 300 calls of 2 ms: 2). The poller reads a whole burst before it lets its role
go, and only then do the handlers take calls from the queue: the calls meant for the
free handlers were counted against the bound, and the rest refused. Here each call
holds its handler until the test lets it go, so what a burst gets is exact: ``pool``
calls running, ``queue`` waiting, the rest refused (``reject``) or held back at the
connection (``block``), however the burst's bytes were split between reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Fail, Message, Pong, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"queue-free-handlers-token-0123456789"
BURST = 16


class Held:
    """``hold(i)``: counts itself started, then holds its handler until `go` is set."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = 0
        self.go = threading.Event()

    def __call__(self, i: int) -> int:
        with self.lock:
            self.started += 1
        self.go.wait(30.0)
        return i


def _until(cond: Callable[[], bool], limit: float = 10.0) -> bool:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _answers(ch: Channel, want: int, limit: float = 10.0) -> dict[int, Message]:
    """The next ``want`` answers on ``ch`` by call id (corked ones come in a Batch; the
    Pongs a replica sends a client it holds back, req 0, are not answers)."""
    got: dict[int, Message] = {}
    deadline = time.monotonic() + limit
    while len(got) < want and time.monotonic() < deadline:
        ch.fill_soon(0.05)
        while (m := ch.next_message()) is not None:
            for x in (m.items if isinstance(m, Batch) else [m]):
                if isinstance(x, Pong) and x.req == 0:
                    continue
                assert isinstance(x, Result | Fail), x
                got[x.id] = x
    return got


@pytest.fixture
def held() -> Held:
    return Held()


@contextmanager
def _replica(held: Held, pool: int, queue: int, overflow: str, transport: str,
             tmp_path: Path) -> Iterator[tuple[WorkerRuntime, Channel]]:
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"hold": held}, TOKEN, where,
                       options=ServeOptions(pool=pool, queue=queue, overflow=overflow)).start()
    ch: Channel | None = None
    try:
        ch = connect(rt.address, TOKEN, Codec())
        yield rt, ch
    finally:
        held.go.set()
        if ch is not None:
            ch.close()
        rt.stop()


def _settled(rt: WorkerRuntime, held: Held, pool: int, queue: int) -> None:
    """Every handler holds a call, and ``queue`` calls wait behind them."""
    assert _until(lambda: held.started == pool), (held.started, pool)
    with rt._lock:
        assert (rt._running, len(rt._queue)) == (pool, queue)


@pytest.mark.parametrize(("pool", "queue", "transport"),
                         [(4, 2, "tcp"), (8, 4, "tcp"), (1, 1, "tcp"), (4, 2, "shm")])
def test_under_reject_a_burst_fills_the_handlers_then_the_queue_before_any_is_refused(
        held: Held, pool: int, queue: int, transport: str, tmp_path: Path) -> None:
    with _replica(held, pool, queue, "reject", transport, tmp_path) as (rt, ch):
        for first in (0, BURST):  # twice: the second burst finds every count back at 0
            held.go.clear()
            held.started = 0
            ids = list(range(first, first + BURST))
            ch.send_many([Call(i, "hold", [i]) for i in ids])
            taken, refused = ids[:pool + queue], ids[pool + queue:]
            got = _answers(ch, len(refused))  # at once; the others wait for go
            assert sorted(got) == refused, sorted(got)
            assert all(isinstance(m, Fail) and m.kind == "busy" and m.type == "BusyError"
                       for m in got.values()), got
            _settled(rt, held, pool, queue)
            held.go.set()
            got = _answers(ch, len(taken))
            assert got == {i: Result(i, i) for i in taken}
            assert held.started == len(taken)  # a refused call never ran
            assert _until(lambda: rt._running == 0)


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_under_block_a_burst_fills_the_handlers_then_the_queue_then_is_held_back(
        held: Held, transport: str, tmp_path: Path) -> None:
    pool, queue = 4, 2
    with _replica(held, pool, queue, "block", transport, tmp_path) as (rt, ch):
        ch.send_many([Call(i, "hold", [i]) for i in range(BURST)])
        assert _until(lambda: bool(rt._paused)), "the client was never held back"
        _settled(rt, held, pool, queue)
        with rt._lock:
            assert len(rt._stash) == 1  # the next call, held undecoded till there is room
        held.go.set()
        got = _answers(ch, BURST)
        assert got == {i: Result(i, i) for i in range(BURST)}  # none refused, all run
        assert held.started == BURST


SERVER = """
    import os
    import time

    def slow(where, i):
        open(os.path.join(where, f"started-{i}"), "w").close()
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(where, "go")) and time.monotonic() < deadline:
            time.sleep(0.002)
        return i

    def other(x):
        return x
"""
CLIENT = """
    import os
    import time
    from polybus import use, wait
    from polybus.errors import BusyError

    slow = use("slow")

    def main(where, n):
        ps = [slow(where, i) for i in range(n)]
        while sum(p.done for p in ps) < n - 6:  # the refused are answered at once
            time.sleep(0.005)
        refused = []
        for i, p in enumerate(ps):
            if p.done:
                try:
                    wait(p)
                except BusyError:
                    refused.append(i)
        while len(os.listdir(where)) < 4:  # every handler holds a call
            time.sleep(0.005)
        running = len(os.listdir(where))  # (the calls waiting start only after go)
        open(os.path.join(where, "go"), "w").close()
        return {"refused": refused, "running": running,
                "values": [wait(p) for i, p in enumerate(ps) if i not in refused]}
"""
TOML = """
    [modules.server]
    source = "server.py"
    replication = 1
    define.slow = { pool = 4, queue = 2, overflow = "reject" }
    define.other = { queue = 2, overflow = "reject" }

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.slow = { callstyle = "async" }

    [bind]
    "client.slow" = "server.slow"
"""


@pytest.mark.timeout(120)
def test_the_new_users_program_gets_pool_plus_queue_of_its_burst(tmp_path: Path) -> None:
    """The report's setup, through its configuration: 16 async calls to ``slow``
    (``pool = 4, queue = 2, overflow = "reject"``) on one replica."""
    where = tmp_path / "marks"
    where.mkdir()
    app = write_app(tmp_path / "app", server=SERVER, client=CLIENT, toml=TOML)
    r = polybus.run(app, {"modules.client.args": [str(where), BURST]})
    assert r.result == {"refused": list(range(6, BURST)), "running": 4,
                        "values": list(range(6))}
