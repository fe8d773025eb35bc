"""Errors never looked at that differ only in the replica that raised them are the same
error: a new user's 64 calls ``mc_sample(s, -1)`` over two replicas, every one failing
with the same ValueError, were said in eleven lines, five of them in full, because each
replica's name in the message broke the run of "the same again" (client/unseen.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from polybus.client import unseen
from polybus.errors import BusyError, RemoteException


@pytest.fixture(autouse=True)
def _counts_from_none() -> Iterator[None]:
    unseen.reset()
    yield
    unseen.reset()


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "polybus.client.unseen"]


def failure(replica: str, message: str = "negative dimensions are not allowed"
            ) -> RemoteException:
    return RemoteException("ValueError", message, '  File "tiles.py", line 3, in f\n',
                           interface="mc_sample", replica=replica)


def test_the_same_error_from_alternating_replicas_is_said_once_and_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        for i in range(64):
            unseen.forgotten(failure(f"worker-{i % 2}"), "mc_sample")
        unseen.settle(type("S", (), {"batchers": []})())  # type: ignore[arg-type]
    lines = said(caplog)
    assert len(lines) == 2, lines
    assert "a call to 'mc_sample' failed" in lines[0]
    assert "negative dimensions are not allowed (raised in mc_sample on worker-0)" in lines[0]
    assert lines[1] == ("polybus: warning: 63 more calls to 'mc_sample' failed the same "
                        "way (RemoteException), never looked at")


def test_a_refusal_of_another_replica_is_the_same_refusal(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        for i in range(4):
            r = f"worker-{i % 2}"
            unseen.forgotten(BusyError(f"{r}: queue of 4 calls is full", interface="f",
                                       replica=r), "f")
        unseen.settle(type("S", (), {"batchers": []})())  # type: ignore[arg-type]
    assert len(said(caplog)) == 2, said(caplog)


def test_different_messages_are_still_said_apart(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        unseen.forgotten(failure("worker-0", "one"), "mc_sample")
        unseen.forgotten(failure("worker-1", "two"), "mc_sample")
    lines = said(caplog)
    assert len(lines) == 2 and "one" in lines[0] and "two" in lines[1], lines
