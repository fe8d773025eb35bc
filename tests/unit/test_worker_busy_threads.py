"""A replica's busy time (``busy_s``, the summary's per-replica busy share) while a call
answered inline (worker/direct.py) and a call of the pool (WorkerRuntime._run) end at
the same time: each call's time is added, none lost between the two threads."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from polybus.wire.messages import Call
from polybus.worker import direct, runtime
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime
from polybus.worker.servicing import Job

CALLS = 20_000  # per thread and round
ROUNDS = 6  # (a round loses none about 4 times in 10, before the fix)


class _Gone:
    """A connection whose client has gone: the call is counted, no answer written."""

    closed = True


class _Ticks:
    """``time`` with a ``perf_counter`` that counts its own calls in each thread: every
    call then takes exactly one tick (its start and its end), so the busy time of ``n``
    calls is exactly ``n``, whatever the machine's load."""

    def __init__(self) -> None:
        self._local = threading.local()

    def perf_counter(self) -> float:
        n = getattr(self._local, "n", 0) + 1
        self._local.n = n
        return float(n)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _nothing() -> None:
    return None


@pytest.fixture
def replica(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerRuntime]:
    """A replica not started (no thread of its own): the test's threads run its steps."""
    rt = WorkerRuntime("w", {"nothing": _nothing}, b"k" * 32, "tcp://127.0.0.1:0",
                       ServeOptions(pool=2))
    ticks = _Ticks()
    monkeypatch.setattr(direct, "time", ticks)
    monkeypatch.setattr(runtime, "time", ticks)
    try:
        yield rt
    finally:
        monkeypatch.undo()
        rt.stop()


def test_busy_time_of_an_inline_call_and_a_pool_call_is_all_counted(
        replica: WorkerRuntime) -> None:
    """The inline path's ``busy_s += clock() - t0`` read the total, then called the
    clock, where the GIL may pass to another thread, and wrote the total back: what a
    pool thread added meanwhile was lost (a short switch interval makes the GIL change
    hands often: a round of 2 x 20,000 calls lost up to a quarter of them, and about
    6 rounds in 10 lost some)."""
    rt = replica
    gone = _Gone()

    def inline(both: threading.Barrier) -> None:
        both.wait()
        for i in range(CALLS):
            direct._answer(rt, gone, Call(i, "nothing", []), _nothing)  # type: ignore[arg-type]

    def pooled(both: threading.Barrier) -> None:
        both.wait()
        for i in range(CALLS):
            rt._run(Job(Call(i, "nothing", []), gone, 0.0))

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(ROUNDS):
            both = threading.Barrier(2, timeout=60.0)  # (started together, to overlap)
            threads = [threading.Thread(target=inline, args=(both,)),
                       threading.Thread(target=pooled, args=(both,))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120.0)
            assert not any(t.is_alive() for t in threads)
    finally:
        sys.setswitchinterval(before)
    assert rt.calls == 2 * CALLS * ROUNDS
    assert rt.busy_s == rt.calls, f"{rt.calls - rt.busy_s:g} calls' busy time lost"
