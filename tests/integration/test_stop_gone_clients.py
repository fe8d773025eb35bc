"""A replica told to stop gives the calls it is running a grace to end, so that their
answers reach their clients; not when no client is left to read them (the run that
started it gave up: its time limit, an error), so such a stop is prompt.

``until`` runs until the test makes a flag file; the flag is made a while after the
stop begins, so a stop that waits for the call sees it end (nothing unanswered), and a
stop that does not leaves it unanswered. Where the stop must not wait, the flag comes
late enough (10 s) that a prompt stop on a loaded machine is over before it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from polybus.worker.runtime import WorkerRuntime

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
define.until = { pool = 2 }

[modules.client]
source = "client.py"
entrypoint = "main"
use.until = { callstyle = "async" }

[bind]
"client.until" = "server.until"
"""


def _running(rt: WorkerRuntime, n: int) -> None:
    deadline = time.monotonic() + 10
    while rt._running < n:
        assert time.monotonic() < deadline, "the calls never started"
        time.sleep(0.005)


def test_a_stop_with_no_client_left_does_not_wait_for_running_calls(tmp_path: Path) -> None:
    hang = tmp_path / "hang"
    later = threading.Timer(10.0, hang.touch)  # (well after a prompt stop; cancelled)
    with cluster(tmp_path, TOML) as c:
        rt = c.runtimes[0]
        try:
            s = c.session()
            for i in range(2):
                s.call("until", (i, str(hang)), {})
            s.reactor.poll()
            _running(rt, 2)
            s.close()  # (the run gave up: its connections closed)
            later.start()
            assert rt.stop(grace=30) == 2  # (not waited for: nobody reads their answers)
        finally:
            later.cancel()
            hang.touch()


def test_a_stop_gives_calls_a_live_client_waits_for_their_grace(tmp_path: Path) -> None:
    hang = tmp_path / "hang"
    later = threading.Timer(0.2, hang.touch)
    with cluster(tmp_path, TOML) as c:
        rt = c.runtimes[0]
        try:
            s = c.session()
            s.call("until", (0, str(hang)), {})
            s.reactor.poll()
            _running(rt, 1)
            later.start()
            assert rt.stop(grace=30) == 0  # (it ended within its grace, answered)
        finally:
            later.cancel()
            hang.touch()
