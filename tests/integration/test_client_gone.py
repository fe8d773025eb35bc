"""A client whose connection ends without a goodbye (its process killed, its run
ended by an error or a time limit) leaves no call to run for nobody: the replica drops
the calls of that connection it has not started, those it had stopped reading for
(its queue full, ``overflow = "block"``) too. A running call runs to its end.

The replica runs one call at a time; ``until`` runs until the test makes a flag file,
so the calls behind it wait without timing anything."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

import polybus

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
define.until = { pool = 1, queue = 2 }

[modules.client]
source = "client.py"
entrypoint = "main"
use.until = { callstyle = "async" }

[bind]
"client.until" = "server.until"
"""


def _until(cond: Callable[[], bool], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.005)
    return cond()


@pytest.mark.parametrize("transport", ["tcp", "ipc", "shm"])
def test_a_client_that_goes_while_paused_has_its_calls_dropped(tmp_path: Path,
                                                               transport: str) -> None:
    """One call runs, two wait in the queue (its bound), and the replica stops reading
    the connection for the rest: the client goes. Before, the replica looked at that
    connection again only once its queue had room, so the two queued calls ran (and
    then every call left unread), for nobody."""
    hang = tmp_path / "hang"
    with cluster(tmp_path, TOML, transport=transport) as c:
        rt = c.runtimes[0]
        try:
            s = c.session()
            ps = [s.call("until", (i, str(hang)), {}) for i in range(8)]
            s.reactor.poll()  # (written)
            assert _until(lambda: bool(rt._paused)), "the replica never held the client back"
            # (the poller holds a client back as it reads, and takes the first call to
            # run only after: wait, bounded, for that call to start)
            assert _until(lambda: rt._running == 1 and len(rt._queue) == 2), (
                rt._running, len(rt._queue))
            s.close()  # (its connections closed, no goodbye: as a process that ends)
            assert _until(lambda: not rt._channels and not len(rt._queue)), (
                len(rt._channels), len(rt._queue))
            assert not rt._paused and not rt._stash
        finally:
            hang.touch()
        assert _until(lambda: not rt._running)
        assert rt.calls == 1  # (the one running ran on: nothing else)
        del ps


def test_the_replica_serves_the_next_client_after_one_went_while_paused(
        tmp_path: Path) -> None:
    hang, go = tmp_path / "hang", tmp_path / "go"
    go.touch()
    with cluster(tmp_path, TOML) as c:
        rt = c.runtimes[0]
        try:
            s = c.session()
            for i in range(8):
                s.call("until", (i, str(hang)), {})
            s.reactor.poll()
            assert _until(lambda: bool(rt._paused))
            s.close()
            assert _until(lambda: not rt._channels)
        finally:
            hang.touch()
        s2 = c.session()
        ps = [s2.call("until", (i, str(go)), {}) for i in range(6)]
        assert polybus.wait(ps) == list(range(6))  # (held back and read again in turn)
        assert rt.calls == 7
