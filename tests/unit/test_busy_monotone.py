"""A replica's busy seconds never go back between two reads (worker/busy.py): a run's
figure is its end's less its start's (client/stats.py), so a read that counted a call
under way must not be followed by one that counts less. Two ways it went back: a call
failed by polybus's own steps (`WorkerRuntime.fault`) dropped the seconds it had been
under way, and a read whose clock was taken before a call's start was stored counted
that call's seconds below zero.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polybus.wire.messages import Call, CallBatch
from polybus.worker import batching, busy, direct, runtime
from polybus.worker.runtime import WorkerRuntime
from polybus.worker.servicing import Job

TOKEN = b"busy-monotone-token-0123456789abcd"


class _Gone:
    """A connection whose client has gone: nothing is written to it."""

    closed = True


class _Going:
    """A connection whose client goes once a batch's first call has begun: that call
    runs, the rest do not, and no answer is written (a batch stops at a closed
    connection: worker/batching.py)."""

    def __init__(self) -> None:
        self.looks = 0

    @property
    def closed(self) -> bool:
        self.looks += 1
        return self.looks > 1



class _Failing:
    """A function that waits at a gate, then raises (its failure is then built)."""

    def __init__(self) -> None:
        self.entered, self.open = threading.Event(), threading.Event()

    def __call__(self) -> int:
        self.entered.set()
        assert self.open.wait(30), "the gate was never opened"
        raise ValueError("the function's own error")


def _steps_fail(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("polybus's own steps failed")  # (building the call's failure)


@pytest.fixture
def fn() -> _Failing:
    return _Failing()


@pytest.fixture
def rt(fn: _Failing) -> Iterator[WorkerRuntime]:
    r = WorkerRuntime("w", {"fails": fn}, TOKEN)
    try:
        yield r
    finally:
        fn.open.set()
        r.stop()


def _faulted(run: Callable[[WorkerRuntime, _Failing], None]) -> Callable[..., None]:
    def go(rt: WorkerRuntime, fn: _Failing) -> None:
        try:
            run(rt, fn)
        except BaseException as exc:  # (as the runtime's callers: the call fails alone)
            rt.fault(_Gone(), 1, exc)  # type: ignore[arg-type]
    return go


# each path, and the module whose `failure` it calls
RUNS: dict[str, tuple[Any, Callable[[WorkerRuntime, _Failing], None]]] = {
    "pool": (runtime, lambda rt, f: rt._run(Job(Call(1, "fails", []), _Gone(), 0.0))),
    "batch": (batching, lambda rt, f: batching.run(
        rt, Job(CallBatch(1, "fails", [[]]), _Going(), 0.0))),
    "inline": (direct, lambda rt, f: direct._answer(rt, _Gone(), Call(1, "fails", []), f)),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("path", sorted(RUNS))
def test_a_fault_keeps_the_seconds_a_read_counted(rt: WorkerRuntime, fn: _Failing,
                                                  path: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    module, run = RUNS[path]
    monkeypatch.setattr(module, "failure", _steps_fail)
    runner = threading.Thread(target=_faulted(run), args=(rt, fn), daemon=True)
    runner.start()
    try:
        assert fn.entered.wait(30), "the call never began"
        under_way = rt.stats().busy_s
        assert under_way > 0.0
    finally:
        fn.open.set()
        runner.join(30)
    assert not runner.is_alive()
    after = rt.stats().busy_s
    assert after >= under_way, (after, under_way)
    assert all(t0 == 0.0 for _, t0 in rt._threads_busy.values())  # (none under way)


class _BeginsAtTheRead(dict[int, tuple[float, float]]):
    """Another thread's call begins just as a read is taken: its clock read and its
    entry stored between the reader's steps (a thread switch there)."""

    def values(self) -> Any:
        self[-1] = (0.0, time.perf_counter())
        return super().values()


def test_a_call_beginning_at_a_read_counts_no_less_than_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    r = WorkerRuntime("w", {}, TOKEN)
    try:
        r._threads_busy = _BeginsAtTheRead({1: (2.0, 0.0)})
        ticks = itertools.count(100.0, 0.5)  # (a clock that goes on at each read of it)
        monkeypatch.setattr(time, "perf_counter", lambda: next(ticks))
        assert busy.now(r) >= 2.0
    finally:
        r.stop()
