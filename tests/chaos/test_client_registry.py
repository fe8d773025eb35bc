"""The client dies; the registry dies and comes back."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from polybus.registry.client import RegistryClient
from polybus.wire.messages import Ping, Pong, Stats, StatsRequest

from .conftest import Harness, free_port

HERE = Path(__file__).parent


def _stats(harness: Harness, app_overrides: tuple[str, ...] = ()) -> Stats:
    session = harness.session(harness.app(*app_overrides))
    link = session.links["server"][0]
    reply = session.reactor.request(link, StatsRequest(99), 99)
    assert isinstance(reply, Stats)
    return reply


def test_dead_client_calls_are_dropped(harness: Harness) -> None:
    harness.app("modules.server.replication=1")
    harness.embedded_registry()
    harness.workers(1)
    client = harness.start("client", [sys.executable, str(HERE / "app" / "doomed_client.py"),
                                      harness.registry, "100"])
    assert client.stdout is not None
    assert client.stdout.readline().strip() == b"sent"
    deadline = time.monotonic() + 10
    while not harness.executions() and time.monotonic() < deadline:
        time.sleep(0.01)
    harness.kill("client")
    time.sleep(1.0)  # well within twice the heartbeat interval (0.5 s here)
    after_kill = sum(harness.executions().values())
    stats = _stats(harness, ("modules.server.replication=1",))
    assert stats.queued == 0, stats
    time.sleep(0.5)
    assert sum(harness.executions().values()) == after_kill  # nothing more runs for it
    assert after_kill <= 15, after_kill  # of 100 calls of 100 ms, only those already started


def test_registry_restart(harness: Harness) -> None:
    port = free_port()
    app = harness.app()
    reg = harness.registry_process(port, ttl=1.5)
    names = harness.workers(2, heartbeat=0.2)
    session = harness.session(app)
    assert [session.call("square", (i, 0.0), {}) for i in range(10)] == [i * i for i in range(10)]
    harness.kill("registry")
    assert reg.poll() is not None
    # Calls to the replicas already known go on with no registry at all.
    assert [session.call("square", (i, 0.0), {}) for i in range(100)] == [i * i for i in range(100)]
    harness.registry_process(port, ttl=1.5)  # (its own start is not timed: a loaded
    # machine starts a Python process in seconds)
    harness.wait_registered(names, timeout=5.0)  # workers re-register; look-ups work again
    fresh = RegistryClient(harness.registry, harness.token)
    try:
        assert sorted(r.name for r in fresh.resolve(module="server")) == names
    finally:
        fresh.close()
    # Two workers never hold one name: a second "w0" is refused while the first lives.
    dup = harness.worker("w0", heartbeat=0.2)
    assert dup.wait(20) != 0
    assert "refused w0" in harness.stderr("w0")
    assert [session.call("square", (i, 0.0), {}) for i in range(10)] == [i * i for i in range(10)]
    link = session.links["server"][0]
    assert isinstance(session.reactor.request(link, Ping(5), 5), Pong)


def test_a_worker_the_registry_dropped_while_stopped_registers_again(harness: Harness) -> None:
    """SIGSTOP a worker past the registry's ttl: the registry drops it while its
    connection stays open. Once resumed, its next heartbeat is answered "not registered"
    and it registers again (saying so once), and look-ups find it again."""
    app = harness.app("modules.server.replication=1")
    harness.embedded_registry(ttl=0.5)
    worker = harness.workers(1, heartbeat=0.1)[0]
    pid = harness.procs[worker].pid
    look = RegistryClient(harness.registry, harness.token)
    try:
        os.kill(pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 5
            while worker in {r.name for r in look.resolve()}:
                assert time.monotonic() < deadline, "the registry never dropped the worker"
                time.sleep(0.05)
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        look.close()
    harness.wait_registered([worker], timeout=5.0)
    # (the registry may list it a moment before the worker has said so)
    deadline = time.monotonic() + 5
    while "registered again" not in harness.stderr(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert harness.stderr(worker).count("registered again") == 1, harness.stderr(worker)
    session = harness.session(app)
    assert session.call("square", (7, 0.0), {}) == 49
