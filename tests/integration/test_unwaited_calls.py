"""Calls a program never waited for: run to their end before the run stops
(client/drain.py), and a failed one whose error the program never looked at is said when
its promise goes (client/unseen.py), not lost; one the program saw (raised to it, or
passed on to a call that consumed the value) is not said again. Producers and
consumers of one another: test_unwaited_calls_forwarded.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import polybus
from integration.conftest import cli
from polybus.client import unseen
from polybus.testing.apps import write_app

SERVER = """
    import time

    def fail(message):
        raise ValueError(message)

    def slow_fail(message, seconds=0.3):
        time.sleep(seconds)
        raise ValueError(message)

    def echo(x):
        return x

    def plus(x, y):
        return x + y

    def hang(seconds):
        time.sleep(seconds)

    def die(x):
        import os
        os._exit(3)

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
    use.slow_fail_quick = {{ callstyle = "async", timeout = "0.2s" }}
    use.echo = {{ callstyle = "{style}"{extra} }}
    use.plus = {{ callstyle = "async" }}
    use.plus_quick = {{ callstyle = "async", timeout = "0.1s" }}
    use.mark = {{ callstyle = "{style}"{extra} }}
    use.hang = {{ callstyle = "async" }}
    use.die = {{ callstyle = "async-demand(1)" }}
    [modules.server.define]  # (a define table lists every interface served)
    hang = {{ timeout = "0.5s" }}
    die = {{ idempotent = false }}
    fail = {{}}
    slow_fail = {{}}
    echo = {{}}
    plus = {{}}
    mark = {{}}

    [bind]
    "client.fail" = "server.fail"
    "client.slow_fail" = "server.slow_fail"
    "client.slow_fail_quick" = "server.slow_fail"
    "client.echo" = "server.echo"
    "client.plus" = "server.plus"
    "client.plus_quick" = "server.plus"
    "client.mark" = "server.mark"
    "client.hang" = "server.hang"
    "client.die" = "server.die"
"""

CLIENT = """
    import gc
    import time

    from polybus import use, wait
    from polybus.errors import CallTimeoutError, NoReplicaError, RemoteException

    fail, slow_fail, echo, plus = use("fail"), use("slow_fail"), use("echo"), use("plus")
    plus_quick, slow_fail_quick = use("plus_quick"), use("slow_fail_quick")
    mark, hang, die = use("mark"), use("hang"), use("die")

    def main(case, path=""):
        if case == "hang":  # its interface's timeout bounds the wait for it
            hang(60)
            return "returned"
        if case == "every replica dies":  # three left in the backlog, none to take them
            for i in range(4):
                try:
                    die(i)
                except NoReplicaError:  # (its death already seen: no more are taken)
                    break
            return "returned"
        if case == "half seen":  # one failure of an aggregated batch raised, one not
            ps = [fail("raised"), fail("dropped")]
            try:
                wait(ps[0])
            except RemoteException:
                pass
            del ps
            return wait(echo("done"))
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
        elif case == "alike":
            ps = [fail("all alike") for i in range(8)]
            wait(echo(1))
            del ps
        elif case == "forwarded":
            # the producer still runs when the consumer is made: its value (here, its
            # error) goes replica to replica, and the consumer's error says it
            try:
                wait(plus(slow_fail("upstream"), 1))
            except RemoteException:
                pass
        elif case == "passed down":
            # an aggregated call's error passed on through two stages (forwarded: the
            # batch still lingers when plus is made) and seen in the last one's
            try:
                wait(plus(plus(fail("upstream of two"), 1), 1))
            except RemoteException:
                pass
        elif case == "consumer dropped":  # both never waited for: the drain gives up on it
            plus_quick(slow_fail("upstream of a dropped consumer", 1.5), 1)
            return "returned"
        elif case == "two producers":
            # the consumer's error says the first producer's; the second fails later,
            # on its own, and no error of the program's says it
            try:
                wait(plus(fail("the first"), slow_fail("the second", 0.3)))
            except RemoteException:
                pass
            time.sleep(0.5)
        elif case == "both given up":  # the drain gives up on both, the producer first
            plus_quick(slow_fail_quick("a producer given up", 1.0), 1)
            return "returned"
        elif case == "consumer gave up":
            # the consumer fails on its own (its timeout) before the producer does: no
            # error of the program's says the producer's, which is then said
            p = slow_fail("upstream, its consumer gone")
            try:
                wait(plus_quick(p, 1))
            except CallTimeoutError:
                pass
            del p
        gc.collect()
        return wait(echo("done"))
"""


STYLES = [("async", ""), ("async-demand(1)", ""), ("async", ", aggregate = 4, linger = \"1s\"")]


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "polybus.client.unseen"]


def run_case(tmp_path: Path, caplog: pytest.LogCaptureFixture, *args: str,
             style: str = "async", extra: str = "", client: str = CLIENT
             ) -> tuple[object, list[str]]:
    """The client's ``main(*args)`` in a run of its own: its result, and what was said."""
    app = write_app(tmp_path, server=SERVER, client=client,
                    toml=TOML.format(style=style, extra=extra))
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        r = polybus.run(app, {"modules.client.args": list(args)})
    return r.result, said(caplog)


@pytest.mark.parametrize(("style", "extra"), STYLES)
def test_an_error_never_looked_at_is_said_with_its_interface(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, style: str, extra: str) -> None:
    result, [line] = run_case(tmp_path, caplog, "dropped", style=style, extra=extra)
    assert result == "done"
    assert "a call to 'fail' failed and its error was never looked at" in line
    assert "RemoteException" in line and "never looked at" in line.split(": ", 2)[-1]


def test_errors_looked_at_or_passed_on_are_not_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for case in ("seen", "forwarded"):
        assert run_case(tmp_path, caplog, case) == ("done", [])


def test_many_are_said_a_few_then_once_that_more_went(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, lines = run_case(tmp_path, caplog, "many")
    assert len(lines) == unseen.SHOWN_AT_MOST + 1
    assert all("one of many" in ln for ln in lines[:-1])
    assert lines[-1] == ("polybus: warning: more calls failed with their errors never "
                         "looked at; not shown")


def test_many_failing_alike_are_said_once_and_counted(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # (a new user's 8 calls inv(0) were five identical lines, then "more ... not shown")
    _, lines = run_case(tmp_path, caplog, "alike")
    assert len(lines) == 2, lines
    assert "a call to 'fail' failed" in lines[0] and "all alike" in lines[0]
    assert lines[1] == ("polybus: warning: 7 more calls to 'fail' failed the same way "
                        "(RemoteException), never looked at")


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


def test_a_call_never_waited_for_is_bounded_by_its_interfaces_timeout(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The drain gives up on it as a wait would (it took the call's whole 60 s, and a
    call that never ends hung the run), and says its CallTimeoutError."""
    result, [line] = run_case(tmp_path, caplog, "hang")
    assert result == "returned"
    assert "a call to 'hang' failed" in line and "CallTimeoutError" in line
    assert "within 0.5s" in line or "within 0.5 s" in line, line


def test_losing_every_replica_fails_the_backlog_rather_than_wait_for_it(
        tmp_path: Path) -> None:
    """async-demand(1): the first call ends the only replica, three wait in the backlog
    for a replica that will never come: they fail (the run hung for ever)."""
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(style="async", extra=""))
    p = cli("run", app, "--set", 'modules.client.args=["every replica dies"]', "--quiet",
            timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "returned"
    assert "replica server-0 of module 'server' was lost" in p.stderr
    assert "a call to 'die' failed and its error was never looked at" in p.stderr, p.stderr


def test_the_unseen_error_of_a_batch_whose_other_error_was_raised_is_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A raised error's traceback keeps its batch alive (through promises the collector
    does not track), so its other call's error was never said; the run's end says it."""
    result, [line] = run_case(tmp_path, caplog, "half seen", extra=", aggregate = 2")
    assert result == "done"
    assert "ValueError: dropped" in line, line


def test_a_call_as_completed_gave_up_on_and_the_program_dropped_is_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """as_completed fails a call past its interface's timeout without raising it (it
    marked the error seen, so a program that dropped it heard nothing)."""
    client = CLIENT.replace('''        if case == "dropped":''', '''        if case == "given up on":
            from polybus import as_completed
            for p in as_completed([hang(60)]):
                del p
            return "returned"
        if case == "dropped":''')
    result, [line] = run_case(tmp_path, caplog, "given up on", client=client)
    assert result == "returned"
    assert "a call to 'hang' failed" in line and "CallTimeoutError: no answer from hang " \
        "within 0.5 s" in line, line


def test_failures_counted_alike_are_said_when_the_program_raises(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # (the count of the same error again was said only when the program returned: a
    # program that raised lost it, found by a review)
    from polybus.testing.apps import write_bound_app

    app = write_bound_app(tmp_path, server="""
        def fail(m):
            raise ValueError(m)
    """, client="""
        import time
        from polybus import use

        fail = use("fail")

        def main():
            ps = [fail("alike") for _ in range(8)]
            while not all(p.done for p in ps):
                time.sleep(0.01)
            del ps
            raise RuntimeError("the program's own")
    """, names=("fail",), client_keys='use.fail = { callstyle = "async" }')
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"), \
            pytest.raises(RuntimeError) as info:
        polybus.run(app)
    said = [r.getMessage() for r in caplog.records if r.name == "polybus.client.unseen"]
    assert len(said) == 1 and "alike" in said[0], said
    assert info.value.__notes__ == ["7 calls failed with errors never looked at before the "
                                    "run ended (RemoteException)"], info.value.__notes__
