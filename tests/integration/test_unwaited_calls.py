"""Calls a program never waited for: run to their end before the run stops
(client/drain.py), and a failed one whose error the program never looked at is said when
its promise goes (client/unseen.py), not lost; one the program saw (raised to it, or
passed on to a call that consumed the value) is not said again."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import polybus
from polybus.client import unseen
from polybus.testing.apps import write_app

SERVER = """
    import time

    def fail(message):
        raise ValueError(message)

    def slow_fail(message):
        time.sleep(0.3)
        raise ValueError(message)

    def echo(x):
        return x

    def plus(x, y):
        return x + y

    def mark(path, i):
        time.sleep(0.02)
        with open(path, "a") as f:
            f.write(f"{i}\\n")
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 1

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.fail = {{ callstyle = "{style}"{extra} }}
    use.slow_fail = {{ callstyle = "async" }}
    use.echo = {{ callstyle = "{style}"{extra} }}
    use.plus = {{ callstyle = "async" }}
    use.mark = {{ callstyle = "{style}"{extra} }}

    [bind]
    "client.fail" = "server.fail"
    "client.slow_fail" = "server.slow_fail"
    "client.echo" = "server.echo"
    "client.plus" = "server.plus"
    "client.mark" = "server.mark"
"""

CLIENT = """
    import gc
    from polybus import use, wait
    from polybus.errors import RemoteException

    fail, slow_fail, echo, plus = use("fail"), use("slow_fail"), use("echo"), use("plus")
    mark = use("mark")

    def main(case, path=""):
        if case == "fire and forget":  # returns at once: nothing waited for
            for i in range(6):
                mark(path, i)
            fail("fired and forgotten")
            return "returned"
        if case == "dropped":
            p = fail("never looked at")
            wait(echo(1))  # (its answer came after fail's, on the one replica)
            del p
        elif case == "seen":
            try:
                wait(fail("looked at"))
            except RemoteException:
                pass
        elif case == "many":
            ps = [fail(f"one of many {i}") for i in range(8)]
            wait(echo(1))
            del ps
        elif case == "forwarded":
            # the producer still runs when the consumer is made: its value (here, its
            # error) goes replica to replica, and the consumer's error says it
            try:
                wait(plus(slow_fail("upstream"), 1))
            except RemoteException:
                pass
        gc.collect()
        return wait(echo("done"))
"""


STYLES = [("async", ""), ("async-demand(1)", ""), ("async", ", aggregate = 4, linger = \"1s\"")]


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "polybus.client.unseen"]


@pytest.mark.parametrize(("style", "extra"), STYLES)
def test_an_error_never_looked_at_is_said_with_its_interface(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, style: str, extra: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(style=style, extra=extra))
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        r = polybus.run(app, {"modules.client.args": ["dropped"]})
    assert r.result == "done"
    [line] = said(caplog)
    assert "a call to 'fail' failed and its error was never looked at" in line
    assert "RemoteException" in line and "never looked at" in line.split(": ", 2)[-1]


def test_errors_looked_at_or_passed_on_are_not_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(style="async", extra=""))
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        for case in ("seen", "forwarded"):
            assert polybus.run(app, {"modules.client.args": [case]}).result == "done"
    assert said(caplog) == []


def test_many_are_said_a_few_then_once_that_more_went(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(style="async", extra=""))
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        polybus.run(app, {"modules.client.args": ["many"]})
    lines = said(caplog)
    assert len(lines) == unseen.SHOWN_AT_MOST + 1
    assert all("one of many" in ln for ln in lines[:-1])
    assert lines[-1] == ("polybus: warning: more calls failed with their errors never "
                         "looked at; not shown")


@pytest.mark.parametrize(("style", "extra"), STYLES)
def test_calls_never_waited_for_run_before_the_run_stops(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, style: str, extra: str) -> None:
    """The program returns at once: every call it made still runs (only the first did,
    or none: the replicas were stopped under them), and the one that fails is said."""
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(style=style, extra=extra))
    marks = tmp_path / "marks.txt"
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        r = polybus.run(app, {"modules.client.args": ["fire and forget", str(marks)]})
    assert r.result == "returned"
    assert sorted(marks.read_text().split()) == [str(i) for i in range(6)]
    assert r.calls == 7
    [line] = said(caplog)
    assert "a call to 'fail' failed" in line and "fired and forgotten" in line
