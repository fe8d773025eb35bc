"""A run that ends with an exception out of the program does not follow it with one
"never looked at" warning per call the program had no chance to look at: one note on
that exception counts them (client/unseen.py, `hush`). A program that returns keeps
every warning (test_unwaited_calls.py).

Found by a new-user trial: ``define.hits = {pool = 1, queue = 5, overflow = "reject"}``,
a client that made many async calls and waited on one that was refused; the BusyError
was followed by five "a call to 'hits' failed and its error was never looked at" lines
and "more ... not shown".
"""

from __future__ import annotations

import gc
import logging
import re
from pathlib import Path

import pytest

import polybus
from integration.conftest import cli
from polybus.errors import BusyError, RemoteException
from polybus.testing.apps import write_app

SERVER = """
    import time

    def hits(i):
        time.sleep(0.2)
        return i

    def fail(i):
        raise ValueError(f"bad {i}")
"""
CLIENT = """
    from polybus import use, wait
    from polybus.errors import RemoteException

    hits, fail = use("hits"), use("fail")

    def main(case):
        if case == "busy":
            ps = [hits(i) for i in range(30)]
            return wait(ps[-1])  # refused: its queue was full
        ps = [fail(i) for i in range(10)]
        while not all(p.done for p in ps):  # every one answered, none looked at (the
            pass  # replica runs them in order, but its answers may come in another)
        if case == "last":
            return wait(ps[-1])  # raises the last one's error; nine are left unseen
        try:
            wait(ps[-1])
        except RemoteException:
            pass
        if case == "returns":
            return "returned"
        raise KeyError("the program's own")
"""
TOML = """
    [modules.srv]
    source = "server.py"
    define.hits = { pool = 1, queue = 5, overflow = "reject" }

    [modules.bad]
    source = "server.py"
    define.fail = {}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = ["busy"]
    use.hits = { callstyle = "async" }
    use.fail = { callstyle = "async" }

    [bind]
    "client.hits" = "srv.hits"
    "client.fail" = "bad.fail"
"""
ONE_BY_ONE = "its error was never looked at (its promise was freed unused)"


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "polybus.client.unseen"]


@pytest.mark.timeout(60)
def test_a_busy_error_that_ends_the_run_is_followed_by_one_line_not_five(
        tmp_path: Path) -> None:
    write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    p = cli("run", "app.toml", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    # (a slow start is said first on a loaded machine: "polybus: worker srv-0 not
    # registered after 2 s: ...", a line of its own, not the run's ending)
    told = "".join(ln for ln in p.stderr.splitlines(keepends=True)
                   if not (ln.startswith("polybus: worker") and "not registered after" in ln))
    assert told.startswith("polybus run: error: BusyError: srv-0: queue of 5 calls is full\n"), \
        p.stderr
    assert ONE_BY_ONE not in p.stderr and "not shown" not in p.stderr, p.stderr
    # (how many were refused is the replica's timing: 24 of 30, unless a call ended
    # before the last was read)
    assert re.search(r"\n  \d+ more calls failed the same way \(BusyError\), never looked "
                     r"at before the run ended\n", p.stderr), p.stderr


@pytest.mark.timeout(60)
def test_the_note_counts_the_calls_the_program_left_failed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """From Python the note is on the run's exception, and the promises freed with it
    (when the caller drops it) say nothing."""
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        with pytest.raises(RemoteException) as e:
            polybus.run(app, {"modules.client.args": ["last"]})
        assert "bad 9" in str(e.value)
        assert e.value.__notes__ == ["9 more calls failed the same way (RemoteException), "
                                     "never looked at before the run ended"]
        del e
        gc.collect()  # (the traceback's frames held the promises: gone now)
    assert said(caplog) == []


@pytest.mark.timeout(60)
def test_the_programs_own_exception_gets_the_note_too(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        with pytest.raises(KeyError) as e:
            polybus.run(app, {"modules.client.args": ["own"]})
        assert e.value.__notes__ == ["9 calls failed with errors never looked at before the "
                                     "run ended (RemoteException)"]
        del e
        gc.collect()
    assert said(caplog) == []


@pytest.mark.timeout(60)
def test_a_silenced_logger_silences_the_note(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A program that means to drop failures sets the logger to ERROR: no note either."""
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    with caplog.at_level(logging.ERROR, logger="polybus.client.unseen"):
        with pytest.raises(BusyError) as e:
            polybus.run(app)
        assert not getattr(e.value, "__notes__", None)


@pytest.mark.timeout(60)
def test_a_run_after_one_that_raised_says_its_own_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The hush lasts until the next run: there a call left failed is said as before."""
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    with pytest.raises(RemoteException):
        polybus.run(app, {"modules.client.args": ["last"]})
    gc.collect()
    with caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        r = polybus.run(app, {"modules.client.args": ["returns"]})
    assert r.result == "returned"
    lines = said(caplog)
    assert len(lines) == 6 and all(ONE_BY_ONE in ln for ln in lines[:5]), lines
