"""Calls a program never waited for whose values it passed on to other calls (forwarded
replica to replica, or aggregated and passed down a pipeline): an error the program saw
in a consumer's is not said again, and a producer whose consumer failed on its own or
was given up on is said (client/unseen.py). The program and its cases are
test_unwaited_calls.py's."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

from .test_unwaited_calls import CLIENT, SERVER, STYLES, run_case, said

PIPELINE = """
    [modules.up]
    source = "server.py"
    define.fail = {}

    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.fail = { callstyle = "async", aggregate = 4, linger = "1s" }
    use.plus = { callstyle = "async" }
    use.echo = { callstyle = "async" }

    [bind]
    "client.fail" = "up.fail"
    "client.plus" = "server.plus"
    "client.echo" = "server.echo"
    "client.slow_fail" = "server.slow_fail"  # (the other cases' bindings: unused here)
    "client.slow_fail_quick" = "server.slow_fail"
    "client.plus_quick" = "server.plus"
    "client.mark" = "server.mark"
    "client.hang" = "server.hang"
    "client.die" = "server.die"
"""


@pytest.mark.timeout(60)
def test_waiting_on_a_consumer_of_a_lingering_batch_closes_the_batch(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # One replica, the producer's batch lingering (1 s, short of its 4 calls) and the
    # program waiting on the last consumer: the one-read wait path kept the reactor's
    # lock while it slept on the replica's socket, so neither it nor the linger timer
    # (which only tries that lock) ever sent the batch, and the run hung.
    style, extra = STYLES[2]
    assert run_case(tmp_path, caplog, "passed down", style=style, extra=extra) == ("done", [])


@pytest.mark.parametrize("case", ["passed down", "dropped"])
def test_an_aggregated_calls_error_seen_in_a_later_stage_is_not_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, case: str) -> None:
    # A new user's pipeline, aggregate on its first stage: the program caught the last
    # stage's error, which named the first stage's call, and was still told that call
    # failed "and its error was never looked at" (its batch's answer came before its
    # consumer's failure, and the batch's promise had gone unused). Its stages are
    # modules of their own, as the user's were: a batch's answer comes straight from its
    # replica, a consumer's failure after a Deliver to another.
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=PIPELINE)
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        r = polybus.run(app, {"modules.client.args": [case]})
    lines = said(caplog)
    assert r.result == "done"
    if case == "passed down":
        assert lines == []
    else:  # (an error no one saw is still said, aggregated as it is)
        assert len(lines) == 1 and "a call to 'fail' failed" in lines[0], lines


def test_a_producer_whose_consumer_failed_on_its_own_is_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    result, [line] = run_case(tmp_path, caplog, "consumer gave up")
    assert result == "done"
    assert "a call to 'slow_fail' failed" in line and "upstream, its consumer gone" in line


def test_a_consumer_the_run_gave_up_on_and_its_producer_are_both_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    result, lines = run_case(tmp_path, caplog, "consumer dropped")
    assert result == "returned"
    assert len(lines) == 2, lines
    assert any("a call to 'plus' failed" in ln and "CallTimeoutError" in ln
               for ln in lines)
    assert any("a call to 'slow_fail' failed" in ln and "upstream of a dropped consumer" in ln
               for ln in lines)


def test_a_second_producer_that_failed_on_its_own_is_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The consumer's error says one producer's (the program saw it); the other's failure
    came later, and was taken as said by that consumer too (found by review)."""
    result, [line] = run_case(tmp_path, caplog, "two producers")
    assert result == "done"
    assert "a call to 'slow_fail' failed" in line and "the second" in line
    # Its promise was passed to a call, not freed unused (a new user's word count, its
    # first stage refused by a full queue, was told so of a promise it had passed on).
    assert "freed unused" not in line, line
    assert "(its promise went to another call, whose outcome did not say it)" in line, line


def test_a_producer_given_up_while_its_consumer_waits_is_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Given up first, while its consumer still waited: taken as said by the consumer,
    which then timed out on its own (found by review)."""
    result, lines = run_case(tmp_path, caplog, "both given up")
    assert result == "returned"
    assert len(lines) == 2, lines
    assert any("a call to 'slow_fail' failed" in ln and "CallTimeoutError" in ln
               for ln in lines)
    assert any("a call to 'plus' failed" in ln and "CallTimeoutError" in ln for ln in lines)
