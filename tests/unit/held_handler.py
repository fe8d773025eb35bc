"""Shared by the unit tests of a replica whose one handler a call holds (Revoke's drop,
a Steal's give-back): wait until that call holds it."""

from __future__ import annotations

import time

from polybus.worker.runtime import WorkerRuntime


def running(rt: WorkerRuntime) -> None:
    """``wait`` holds the handler (it is not in the queue)."""
    deadline = time.monotonic() + 5.0
    while rt._running != 1 or len(rt._queue):
        assert time.monotonic() < deadline, "wait never started"
        time.sleep(0.001)
