"""The rudy benchmark's parts: its servers answer the load generator, and are gone after."""

from __future__ import annotations

import os

import pytest

from integration.conftest import descendants, wait_gone
from polybus.bench import b_rudy
from polybus.bench.httpload import load


@pytest.mark.parametrize("start", [b_rudy.polybus_server, b_rudy.peer_server],
                         ids=["polybus", "asyncio_http"])
def test_server_answers_every_request_then_nothing_is_left(start: b_rudy.Server) -> None:
    before = descendants(os.getpid())
    with start(4) as port:
        started = descendants(os.getpid()) - before
        assert started
        seq = load("127.0.0.1", port, "/work?ms=1", 6, 1)
        many = load("127.0.0.1", port, "/work?ms=0", 20, 5)
    assert not seq.failures and not many.failures
    assert len(seq.done_at) == 6 and seq.seconds_for(3) <= seq.seconds_for(6) <= seq.seconds
    assert len(many.done_at) == 20
    assert not wait_gone(started)


def test_a_server_that_fails_is_reaped_too() -> None:
    before = descendants(os.getpid())
    with pytest.raises(ZeroDivisionError), b_rudy.polybus_server(1):
        started = descendants(os.getpid()) - before
        1 / 0  # noqa: B018
    assert started and not wait_gone(started)
