"""A replica's busy seconds count a call under way up to the read (worker/busy.py), by
each path a call runs: the pool's (`WorkerRuntime._run`), an aggregated batch's
(batching.run) and the inline one (direct._answer). The replica is not started: a
thread of the test runs the call, which waits at a gate while `stats` is read.
(Over a plain socket, socketserve.py's inline steps: test_busy_running.py.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from test_busy_monotone import _Going  # (tests/unit on the path: no __init__)

from polybus.wire.messages import Call, CallBatch
from polybus.worker import batching, direct
from polybus.worker.runtime import WorkerRuntime
from polybus.worker.servicing import Job

TOKEN = b"busy-under-way-token-0123456789ab"


class _Gone:
    """A connection whose client has gone: the call is counted, no answer written."""

    closed = True



class _Gate:
    def __init__(self) -> None:
        self.entered, self.open = threading.Event(), threading.Event()

    def __call__(self) -> int:
        self.entered.set()
        assert self.open.wait(30), "the gate was never opened"
        return 1


@pytest.fixture
def gate() -> _Gate:
    return _Gate()


@pytest.fixture
def rt(gate: _Gate) -> Iterator[WorkerRuntime]:
    r = WorkerRuntime("w", {"gated": gate}, TOKEN)
    try:
        yield r
    finally:
        gate.open.set()
        r.stop()


RUNS: dict[str, Callable[[WorkerRuntime, _Gate], None]] = {
    "pool": lambda rt, g: rt._run(Job(Call(1, "gated", []), _Gone(), 0.0)),  # type: ignore[arg-type]
    "batch": lambda rt, g: batching.run(rt, Job(CallBatch(1, "gated", [[], []]),
                                                 _Going(), 0.0)),  # type: ignore[arg-type]
    "inline": lambda rt, g: direct._answer(rt, _Gone(), Call(1, "gated", []), g),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("path", sorted(RUNS))
def test_a_call_under_way_is_busy_up_to_the_read(rt: WorkerRuntime, gate: _Gate,
                                                 path: str) -> None:
    runner = threading.Thread(target=RUNS[path], args=(rt, gate), daemon=True)
    runner.start()
    try:
        assert gate.entered.wait(30), "the call never began"
        under_way = rt.stats()
        assert under_way.calls == 0 and rt.busy_s == 0.0  # (none has ended)
        assert under_way.busy_s > 0.0, under_way
        again = rt.stats()
        assert again.busy_s >= under_way.busy_s
    finally:
        gate.open.set()
        runner.join(30)
    assert not runner.is_alive()
    ended = rt.stats()
    assert ended.calls >= 1 and ended.busy_s == rt.busy_s >= under_way.busy_s
    assert all(t0 == 0.0 for _, t0 in rt._threads_busy.values())  # (none under way)
