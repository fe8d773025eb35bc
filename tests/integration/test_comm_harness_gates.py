"""A test that fails while its replicas' calls wait at gates leaves none waiting.

The communication tests gate their producers on a file or an event the test opens
(comm_harness.py). A test that failed before opening one left its call waiting in a
replica thread of the test process until the gate's own limit (10 s, 60 s for
``until``), polling all the while, after the test had ended: the cluster's close now
opens every gate of its replicas' module, and waits for their threads; one still running
then (a call no gate ends) fails a test that passed, naming it, rather than be left
behind the next tests.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from . import comm_harness
from .comm_harness import cluster

EVENT = '''
import threading
HELD = threading.Event()  # a gate the test opens

def held_on(x):
    HELD.wait(10)
    return x
'''

NAMES = ("slow_double", "gated_double", "until", "nap", "held_on")

TOML = "\n".join([
    "[modules.server]", 'source = "server.py"',
    *(f"define.{n} = {{ pool = {len(NAMES)} }}" for n in NAMES),
    "[modules.client]", 'source = "client.py"', 'entrypoint = "main"',
    *(f'use.{n} = {{ callstyle = "async" }}' for n in NAMES),
    "[bind]", *(f'"client.{n}" = "server.{n}"' for n in NAMES), ""])


class Failed(Exception):
    """What the test raises as a failing test would."""


def test_a_failing_test_leaves_no_replica_thread_waiting_at_a_gate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + EVENT)
    never = str(tmp_path / "never")  # (a gate no one opens)
    with pytest.raises(Failed), cluster(tmp_path, TOML) as c:
        s = c.session()
        x = np.ones(4)
        for name in NAMES[:-1]:
            s.call(name, (x, never), {})
        s.call("held_on", (x,), {})
        rt = c.runtimes[0]
        deadline = time.monotonic() + 10
        while rt._running < len(NAMES):  # (each call waits at its gate)
            assert time.monotonic() < deadline, rt._running
            s.reactor.flush_all()
            time.sleep(0.005)
        raise Failed
    left = [t.name for rt in c.runtimes for t in rt._threads if t.is_alive()]
    assert not left, f"replica threads still running after the cluster closed: {left}"


STUCK = '''
STUCK = [threading.Event()]  # (in a list: not a gate the cluster's close opens)

def stuck(x):
    STUCK[0].wait(30)
    return x
'''


def test_a_replica_thread_left_running_at_close_is_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A call that no gate ends outlives the close's wait for the replicas' threads: it
    # is said, naming the thread, not left running behind the next tests.
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + STUCK)
    monkeypatch.setattr(comm_harness, "CLOSE_S", 0.2)
    toml = "\n".join([
        "[modules.server]", 'source = "server.py"', "define.stuck = {}",
        "[modules.client]", 'source = "client.py"', 'entrypoint = "main"',
        'use.stuck = { callstyle = "async" }', "[bind]", '"client.stuck" = "server.stuck"', ""])
    c: comm_harness.Cluster | None = None
    try:
        with pytest.raises(AssertionError, match="still running") as err, \
                cluster(tmp_path, toml) as c:
            s = c.session()
            s.call("stuck", (1,), {})
            rt = c.runtimes[0]
            deadline = time.monotonic() + 10
            while rt._running < 1:  # (it runs)
                assert time.monotonic() < deadline, rt._running
                s.reactor.flush_all()
                time.sleep(0.005)
        assert "polybus" in str(err.value), err.value  # (the thread, by name)
    finally:
        if c is not None:
            c.module.STUCK[0].set()
            for rt in c.runtimes:
                for t in rt._threads:
                    t.join(10)
