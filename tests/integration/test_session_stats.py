"""A run's per-replica figures are that run's, though its replicas served runs before
(workers started by hand live on between runs)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import polybus
from polybus.client import dispatch

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = { callstyle = "sync" }

[bind]
"client.double" = "server.double"
"""


def test_a_second_session_counts_only_its_own_calls(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=1) as c:
        first = c.session()
        assert [polybus.wait(first.call("double", (i,), {})) for i in range(5)] == \
            [0, 2, 4, 6, 8]
        (one,) = first.stats().replicas
        assert one.calls == 5
        second = c.session()  # the same replica, which has served 5 calls already
        for i in range(3):
            assert polybus.wait(second.call("double", (i,), {})) == 2 * i
        (two,) = second.stats().replicas
        assert two.calls == 3 and two.busy_s >= 0.0 and two.queue_wait_s >= 0.0
        (again,) = first.stats().replicas  # (the replica's: the second run's calls count)
        assert again.calls == 8


def test_a_binding_with_its_own_transport_does_not_count_a_replica_twice(
        tmp_path: Path) -> None:
    # Its own connections to the same replica made a second row with the same counters
    # (8 calls shown as 4 + 4 twice over).
    toml = TOML.replace('use.double = { callstyle = "sync" }',
                        'use.double = { callstyle = "sync" }\n'
                        'use.echo = { callstyle = "sync", transport = "ipc" }') + (
        '"client.echo" = "server.echo"\n')
    with cluster(tmp_path, toml, replicas=1) as c:
        s = c.session()
        for i in range(3):
            assert polybus.wait(s.call("double", (i,), {})) == 2 * i
            assert polybus.wait(s.call("echo", (i,), {})) == i
        (one,) = s.stats().replicas
        assert one.name == "server-0" and one.calls == 6


def test_a_session_that_makes_no_call_reports_no_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The bytes are what the calls and their answers carried: the request for each
    # replica's counters at the start of a run (to report that run's own) is not one
    # (a program of no calls reported 15 B sent, 54 B received per replica).
    # Call ids come from one counter per process and travel as msgpack ints, whose
    # width grows at 128, 256 and 65,536: the three calls compared here take ids that
    # encode alike, wherever the tests run before left the counter (from 127 or 255
    # the second session's calls were a byte longer each way, and this failed).
    monkeypatch.setattr(dispatch, "_ids", itertools.count(1000))
    with cluster(tmp_path, TOML.replace("replication = 1", "replication = 2"),
                 replicas=2) as c:
        idle = c.session().stats()
        assert (idle.calls, idle.bytes_sent, idle.bytes_received) == (0, 0, 0)
        s = c.session()
        assert polybus.wait(s.call("double", (1,), {})) == 2
        one = s.stats()
        s2 = c.session()
        for i in range(2):
            assert polybus.wait(s2.call("double", (i,), {})) == 2 * i
        two = s2.stats()
        assert one.bytes_sent > 0 and one.bytes_received > 0
        assert (two.bytes_sent, two.bytes_received) == (2 * one.bytes_sent,
                                                        2 * one.bytes_received)
