"""A worker taken for dead (silent while holding calls) and then taken back as the same
process is counted in the run's figures once: its lost row has the calls answered before,
its row after the calls answered since (its own counters, which ran on, less what they
were when it was taken back). Its row had shown every call of its life, so the rows
summed to more calls than the run made."""

from __future__ import annotations

import os
import signal
import time

from polybus.client.session import Session

from .conftest import Harness


def test_a_worker_taken_back_counts_each_call_once(harness: Harness) -> None:
    app = harness.app("modules.server.replication=2", 'cluster.heartbeat="0.2s"')
    harness.embedded_registry(ttl=5.0)
    harness.workers(2, heartbeat=0.2)
    session = Session(app, harness.registry, harness.token, rejoin=True)  # (as --registry)
    harness.sessions.append(session)  # (closed by the harness, whatever happens)
    made = 0
    for i in range(20):  # (both replicas answer some)
        assert session.call("square", (i, 0.0), {}) == i * i
        made += 1
    pid = harness.procs["w0"].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        # Calls go on: one placed on w0 waits, w0 is taken for dead, it runs on w1
        while not any(lk.dead for lk in session.links["server"]):
            assert session.call("square", (made, 0.0), {}) == made * made
            made += 1
    finally:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 40
    while not any(lk.name == "w0" and lk.before is not None and not lk.dead
                  for lk in session.links["server"]):
        assert time.monotonic() < deadline, "w0 was never taken back"
        assert session.call("square", (made, 0.0), {}) == made * made
        made += 1
        time.sleep(0.02)
    for _ in range(20):
        assert session.call("square", (made, 0.0), {}) == made * made
        made += 1
    stats = session.stats()
    rows = {(r.name, r.lost): r.calls for r in stats.replicas}
    assert stats.calls == made
    assert sum(rows.values()) == made, rows
    [back] = [lk for lk in session.links["server"] if lk.name == "w0"]
    assert rows["w0", False] == back.calls and rows["w0", True] == back.before.calls, rows
