"""A call past its own interface's ``pool`` waits in the replica's queue, not on a thread.

``define.slow = { pool = 1 }`` beside an interface of ``pool = 2`` gives the replica two
threads, and ``slow`` a limit of one (worker/limits.py). A second ``slow`` call used to
be taken by the other thread and held there at a gate until the first ended: counted
running, not waiting, it kept that thread from every other interface's calls, escaped
the queue's bound (``reject`` refused another interface's call instead, the burst to
``slow`` got past pool + queue), and no priority could reorder it any more. Now it
waits in the queue, and a free thread takes the next call that may run.

Each ``slow`` call here holds its thread until the test lets it go, so what runs and
what waits is exact, not a matter of timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Fail, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

from .test_queue_free_handlers import TOKEN, Held, _answers, _until

FAST = 100  # the fast calls' ids


class Ordered(Held):
    """`Held`, and the order in which its calls started."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[int] = []

    def __call__(self, i: int) -> int:
        with self.lock:
            self.order.append(i)
        return super().__call__(i)


@pytest.fixture
def slow() -> Ordered:
    return Ordered()


@contextmanager
def _replica(slow: Ordered, queue: int, overflow: str, transport: str, tmp_path: Path,
             clients: int = 1, pool: int = 2) -> Iterator[tuple[WorkerRuntime, list[Channel]]]:
    """``pool`` threads; ``slow`` (held) runs one call at a time, ``fast`` ``pool``."""
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"slow": slow, "fast": lambda x: x}, TOKEN, where,
                       options=ServeOptions(pool=pool, queue=queue, overflow=overflow,
                                            limits=((("slow",), 1),))).start()
    chs: list[Channel] = []
    try:
        for _ in range(clients):
            chs.append(connect(rt.address, TOKEN, Codec()))
        yield rt, chs
    finally:
        slow.go.set()
        for ch in chs:
            ch.close()
        rt.stop()


def _counts(rt: WorkerRuntime) -> tuple[int, int]:
    """(running, waiting) as the replica's stats say them."""
    s = rt.stats()
    return s.running, s.queued


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_call_past_its_interfaces_pool_leaves_the_other_thread_to_other_calls(
        slow: Ordered, transport: str, tmp_path: Path) -> None:
    with _replica(slow, 10, "block", transport, tmp_path) as (rt, [ch]):
        ch.send_many([Call(0, "slow", [0]), Call(1, "slow", [1])])
        assert _until(lambda: slow.started == 1 and rt._running + len(rt._queue) == 2)
        # (a lower priority than the waiting slow call's: that one may not run yet)
        ch.send(Call(FAST, "fast", [7], None, -1.0))
        assert _answers(ch, 1) == {FAST: Result(FAST, 7)}  # while slow 0 still runs
        assert slow.started == 1
        assert _until(lambda: _counts(rt) == (1, 1)), _counts(rt)  # slow 1 waits, and says so
        slow.go.set()
        assert _answers(ch, 2) == {0: Result(0, 0), 1: Result(1, 1)}
        assert slow.order == [0, 1]
        assert _until(lambda: _counts(rt) == (0, 0))


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_reject_counts_a_call_past_its_interfaces_pool_as_waiting(
        slow: Ordered, transport: str, tmp_path: Path) -> None:
    """``queue = 1``: of a burst of three ``slow`` calls and one ``fast``, one ``slow``
    runs and one waits (the queue is full for ``slow``), the third is refused, and
    ``fast`` runs on the thread ``slow`` may not use (it used to be the one refused)."""
    with _replica(slow, 1, "reject", transport, tmp_path) as (rt, [ch]):
        for first in (0, 10):  # twice: the second burst finds every count back at 0
            slow.go.clear()
            slow.started = 0
            ch.send_many([Call(first + i, "slow", [first + i]) for i in range(3)]
                         + [Call(FAST + first, "fast", [first])])
            got = _answers(ch, 2)  # at once; the others wait for go
            assert got.get(FAST + first) == Result(FAST + first, first), got
            refused = got.get(first + 2)
            assert isinstance(refused, Fail) and refused.kind == "busy", got
            assert _until(lambda: slow.started == 1)
            assert _until(lambda: _counts(rt) == (1, 1)), _counts(rt)
            slow.go.set()
            assert _answers(ch, 2) == {first: Result(first, first),
                                       first + 1: Result(first + 1, first + 1)}
            assert slow.started == 2  # the refused call never ran
            assert _until(lambda: _counts(rt) == (0, 0))


def test_block_holds_a_burst_back_past_its_interfaces_pool_plus_queue(
        slow: Ordered, tmp_path: Path) -> None:
    """``queue = 1``: one ``slow`` call runs, one waits, the client's next is held
    back at its connection; another client's ``fast`` call runs meanwhile."""
    with _replica(slow, 1, "block", "tcp", tmp_path, clients=2) as (rt, [ch, other]):
        ch.send_many([Call(i, "slow", [i]) for i in range(6)])
        assert _until(lambda: bool(rt._paused)), "the client was never held back"
        assert _until(lambda: slow.started == 1)
        assert _until(lambda: _counts(rt) == (1, 1)), _counts(rt)
        other.send(Call(FAST, "fast", [3]))
        assert _answers(other, 1) == {FAST: Result(FAST, 3)}
        assert slow.started == 1
        slow.go.set()
        assert _answers(ch, 6) == {i: Result(i, i) for i in range(6)}  # none lost
        assert slow.order == list(range(6))  # first come, first served


def test_priority_reorders_calls_waiting_for_their_interfaces_pool(
        slow: Ordered, tmp_path: Path) -> None:
    """Three threads, so that the calls of priority 1 and 5 used to be taken each by a
    thread of its own, to wait at the gate, in the order they came: the one of 1 went
    first, or the one of 3 (left in the queue, taken by the first thread) cut in."""
    with _replica(slow, 10, "block", "tcp", tmp_path, pool=3) as (rt, [ch]):
        ch.send(Call(0, "slow", [0]))
        assert _until(lambda: slow.started == 1)
        ch.send(Call(1, "slow", [1], None, 1.0))
        assert _until(lambda: rt._running + len(rt._queue) == 2)  # read, and waiting
        ch.send(Call(2, "slow", [2], None, 5.0))
        assert _until(lambda: rt._running + len(rt._queue) == 3)
        ch.send(Call(3, "slow", [3], None, 3.0))
        assert _until(lambda: rt._running + len(rt._queue) == 4)
        slow.go.set()
        assert _answers(ch, 4) == {i: Result(i, i) for i in range(4)}
        assert slow.order == [0, 2, 3, 1]  # highest priority first, among those waiting


SERVER = """
    import os
    import time

    def slow(where, i):
        deadline = time.monotonic() + 20
        while not os.path.exists(os.path.join(where, "go")) and time.monotonic() < deadline:
            time.sleep(0.002)
        return os.path.exists(os.path.join(where, "go"))  # False: it was never let go

    def fast(x):
        return x
"""
CLIENT = """
    import os
    from polybus import use, wait

    slow = use("slow")
    fast = use("fast")

    def main(where):
        ps = [slow(where, i) for i in range(2)]
        x = fast(5)  # (sync: it waits for its answer, the slow calls still held)
        open(os.path.join(where, "go"), "w").close()
        return {"fast": x, "slow": wait(ps)}
"""
TOML = """
    [modules.server]
    source = "server.py"
    replication = 1
    define.slow = { pool = 1 }
    define.fast = { pool = 2 }

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.slow = { callstyle = "async" }

    [bind]
    "client.slow" = "server.slow"
    "client.fast" = "server.fast"
"""


@pytest.mark.timeout(120)
def test_through_the_configuration_a_fast_call_runs_beside_a_slow_one_and_its_waiting_twin(
        tmp_path: Path) -> None:
    """It used to wait until the first slow call gave up waiting (20 s)."""
    where = tmp_path / "marks"
    where.mkdir()
    app = write_app(tmp_path / "app", server=SERVER, client=CLIENT, toml=TOML)
    r = polybus.run(app, {"modules.client.args": [str(where)]})
    assert r.result == {"fast": 5, "slow": [True, True]}
