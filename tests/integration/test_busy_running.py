"""A replica's busy seconds, read while a call runs, count that call up to the read.

A replica's counters are read while its calls run: at a session's start and end on a
replica other clients use too, a call its client gave up on (its `timeout`) and left
running, `Session.stats` from the program. The busy seconds summed only the calls that
had ended, so a replica 10 s into a call read as idle. Here a call waits at a gate
(comm_harness's `gated_double`) while the figures are read, over tcp and shm, sync and
async: by whichever path it runs (inline, worker/socketserve.py and direct.py, or through
the queue). test_busy_under_way.py drives each path's steps by hand.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.worker.runtime import WorkerRuntime

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated_double = {{ callstyle = "{callstyle}" }}

[bind]
"client.gated_double" = "server.gated_double"
"""


def _until_running(rt: WorkerRuntime, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not rt._running:
        assert time.monotonic() < deadline, "the call never began"
        time.sleep(0.001)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("callstyle", "transport"), [
    ("sync", "tcp"), ("sync", "shm"), ("async", "tcp")])
def test_a_call_under_way_counts_in_busy_seconds_up_to_the_read(
        tmp_path: Path, callstyle: str, transport: str) -> None:
    flag = tmp_path / "flag"
    with cluster(tmp_path, TOML.format(callstyle=callstyle), transport=transport) as c:
        s = c.session()
        opened = tmp_path / "open"
        opened.touch()
        # (a call answered first: the next may be taken as a lone call, inline; its
        # busy time read where it lies, not asked for, which would take the replica out
        # of its inline serving)
        assert polybus.wait(s.call("gated_double", (1, str(opened)), {})) == 2
        before = c.runtimes[0].busy_s  # (a replica new to the run: its figure is the run's)
        got: list[Any] = []
        caller = threading.Thread(
            target=lambda: got.append(polybus.wait(s.call("gated_double", (3, str(flag)), {}))),
            daemon=True)  # (a sync call waits for its answer: not on the test's thread)
        caller.start()
        try:
            _until_running(c.runtimes[0])
            (rep,) = s.stats().replicas
            assert rep.busy_s is not None and rep.busy_s > before, (before, rep)
            assert rep.calls == 1, rep  # (the call under way is not among those it ran)
        finally:
            flag.touch()
            caller.join(20)
        assert got == [6]
        (rep,) = s.stats().replicas
        assert rep.calls == 2 and rep.busy_s is not None and rep.busy_s > before
