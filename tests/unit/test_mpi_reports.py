"""Rank 0's reading of the mpi engine's ranks' reports (engines/mpireports.py), on a
stand-in for MPI: a report taken while the replicas serve is said at once and kept for
the replica's loss and the run's error; one taken before (another's start failed
first) is taken, not said."""

from __future__ import annotations

import logging
from collections import deque

import pytest

from polybus.engines.mpireports import TAG_FAILED, Reports, stopped_text


class _Status:
    def __init__(self) -> None:
        self.source = -1

    def Get_source(self) -> int:
        return self.source


class _Message:
    def __init__(self, payload: str) -> None:
        self.payload = payload

    def recv(self) -> str:
        return self.payload


class _Comm:
    """Reports as (rank, text), matched in the order they were sent."""

    def __init__(self) -> None:
        self.sent: deque[tuple[int, str]] = deque()

    def improbe(self, source: int, tag: int, status: _Status) -> _Message | None:
        assert tag == TAG_FAILED
        if not self.sent:
            return None
        status.source, payload = self.sent.popleft()
        return _Message(payload)


class _MPI:
    ANY_SOURCE = -1
    Status = _Status


NAMES = {1: "server-0", 2: "server-1"}
WHY = ("worker server-1 stopped: its thread polybus-server-1-0 ended by RuntimeError: "
       "boom (a fault in polybus; its log above says where)")


def _reports() -> tuple[Reports, _Comm]:
    comm = _Comm()
    return Reports(comm, _MPI, NAMES), comm


def test_a_replica_that_stops_while_serving_is_said_and_kept(
        caplog: pytest.LogCaptureFixture) -> None:
    reports, comm = _reports()
    reports.watch()
    try:
        with caplog.at_level(logging.WARNING, logger="polybus.engine"):
            comm.sent.append((2, WHY))
            how = reports.how_ended("server-1", settle=10.0)  # (waits for the report)
    finally:
        reports.unwatch()
    said = ("(mpi rank 2) stopped: its thread polybus-server-1-0 ended by RuntimeError: "
            "boom (a fault in polybus; its log above says where)")
    assert how == said
    assert [r.getMessage() for r in caplog.records] == [
        f"polybus: warning: worker server-1 {said}"]
    assert reports.ended() == [f"worker server-1 {said}"]
    assert reports.how_ended("server-0", settle=0.0) is None


def test_a_replica_not_reported_is_not_waited_for_once_unwatched() -> None:
    reports, _ = _reports()
    reports.watch()
    reports.unwatch()
    assert reports.how_ended("server-0") is None and reports.ended(settle=5.0) == []


def test_reports_taken_at_the_last_barrier_before_serving_are_taken_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    """Another rank's start failed first, and rank 0 raised that one (as the local
    engine says the first worker that could not start): the rest are taken, so that
    their ranks go on to the barrier, and not said again."""
    reports, comm = _reports()
    comm.sent.append((1, "module 'server' (server.py) failed to import: nope"))
    with caplog.at_level(logging.WARNING, logger="polybus.engine"):
        reports.settle()
    assert not comm.sent and caplog.records == []
    assert reports.ended() == []


@pytest.mark.parametrize(("why", "said"), [
    (WHY, WHY.removeprefix("worker server-1 ")),
    ("PolybusError: the registry went", "stopped: PolybusError: the registry went"),
    ("worker server-1 was odd", "stopped: worker server-1 was odd"),
])
def test_stopped_text_keeps_the_error_from_its_verb(why: str, said: str) -> None:
    assert stopped_text("server-1", why) == said

