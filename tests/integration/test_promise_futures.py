"""What a future has that a program ported from concurrent.futures, Dask or Ray reaches
for, on a promise (client/futurenames.py), and `polybus.wait`'s ``timeout``.

``p.result(timeout=0.5)`` of a call still running waited for its whole answer, then
failed with "AttributeError: 'float' object has no attribute 'result'" (the answer's
attribute); ``p.add_done_callback`` the same; ``polybus.wait(p, timeout=0.5)`` was refused (an
unexpected keyword). The calls here answer once the test makes a flag file (at most
10 s after they are made), so "not answered yet" holds without timing anything.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

import pytest

import polybus
from polybus.errors import RemoteException, UsageError

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
define.gated_double = {{ pool = 4 }}
define.throw = {{}}

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated_double = {{ callstyle = "async"{extra} }}
use.throw = {{ callstyle = "async" }}

[bind]
"client.gated_double" = "server.gated_double"
"client.throw" = "server.throw"
"""

STYLES = {"async": "", "aggregated": ', aggregate = 4, linger = "5ms"'}


@pytest.mark.parametrize("style", list(STYLES))
def test_result_with_a_timeout_gives_up_waiting_not_the_call(tmp_path: Path, style: str) -> None:
    flag = tmp_path / "go"
    with cluster(tmp_path, TOML.format(extra=STYLES[style])) as c:
        s = c.session()
        p = s.call("gated_double", (21, str(flag)), {})
        # (an aggregated call's said "the promise was not answered": of no call)
        with pytest.raises(TimeoutError, match=r"the promise of (gated_double\(21, '.*'\)|a "
                                               r"call to gated_double) was not answered within "
                                               r"0\.2 s; its call goes on") as e:
            p.result(timeout=0.2)
        assert not isinstance(e.value, RemoteException)
        with pytest.raises(TimeoutError):
            p.exception(0.2)  # (positional, as concurrent.futures takes it)
        assert not p.done  # (given up waiting before its answer: the call goes on)
        flag.touch()
        assert p.result() == 42 and p.result(timeout=0) == 42 and p.exception() is None
        assert p.done and type(p.done) is bool and not p.cancelled()


def test_exception_gives_the_calls_error_and_result_raises_it(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML.format(extra="")) as c:
        s = c.session()
        p = s.call("throw", ("ValueError", "bad"), {})
        e = p.exception(timeout=30)
        assert isinstance(e, RemoteException) and isinstance(e, ValueError)
        assert e.remote_message == "bad"
        with pytest.raises(ValueError, match="bad") as raised:
            p.result(timeout=30)
        assert raised.value is e
        # the function's own TimeoutError is its error, not a wait that gave up
        t = s.call("throw", ("TimeoutError", "late"), {})
        assert isinstance(t.exception(timeout=30), TimeoutError)


def test_a_done_callback_is_refused_at_once_and_a_running_call_is_not_cancelled(
        tmp_path: Path) -> None:
    flag = tmp_path / "go"
    with cluster(tmp_path, TOML.format(extra="")) as c:
        s = c.session()
        p = s.call("gated_double", (1, str(flag)), {})
        with pytest.raises(UsageError, match=r"no done callback.*polybus\.as_completed"):
            p.add_done_callback(print)
        # (running: a cancel says so, client/cancel.py; tests/integration/test_cancel.py)
        for _ in range(1000):
            if c.runtimes[0]._running:
                break
            time.sleep(0.01)
        assert p.cancel() is False
        assert not p.cancelled()
        assert not p.done  # (neither waited for the answer)
        flag.touch()
        assert polybus.wait(p) == 2


def test_running_is_refused_at_once_not_looked_up_on_the_answer(tmp_path: Path) -> None:
    # concurrent.futures' f.running() waited for the whole call, then failed with
    # "AttributeError: 'int' object has no attribute 'running'" (the answer's attribute)
    flag = tmp_path / "go"
    with cluster(tmp_path, TOML.format(extra="")) as c:
        s = c.session()
        p = s.call("gated_double", (1, str(flag)), {})
        with pytest.raises(UsageError, match=r"cannot tell whether its call is running.*"
                                             r"p\.done.*p\.cancel\(\)"):
            p.running()
        assert not p.done  # (refused without waiting for the answer)
        flag.touch()
        assert polybus.wait(p) == 2


def test_wait_with_a_timeout_says_how_many_were_not_answered(tmp_path: Path) -> None:
    flag = tmp_path / "go"
    with cluster(tmp_path, TOML.format(extra="")) as c:
        s = c.session()
        quick = s.call("gated_double", (0, str(tmp_path)), {})  # (its flag is there)
        assert polybus.wait(quick, timeout=30) == 0
        p = s.call("gated_double", (1, str(flag)), {})
        q = s.call("gated_double", (2, str(flag)), {})
        with pytest.raises(TimeoutError, match=r"^polybus\.wait: the promise of "
                                               r"gated_double\(1, '.*go'\) was not answered "
                                               r"within 0\.2 s"):
            polybus.wait(p, timeout=0.2)
        with pytest.raises(TimeoutError, match=r"^polybus\.wait: 2 of the 3 promises were not "
                                               r"answered within 0\.1 s \(the first: "
                                               r"gated_double\(1, "):
            polybus.wait({"a": [p, quick], "b": (q, 7), "c": deque([p])}, timeout=0.1)
        assert not p.done and not q.done
        flag.touch()
        assert polybus.wait([p, (q, 7)], timeout=30) == [2, (4, 7)]
        assert polybus.wait("no promise", timeout=0) == "no promise"
        # a failed call among them: its error, as a wait without a timeout gives it; the
        # function's own TimeoutError too, never taken for the wait's
        bad = s.call("throw", ("KeyError", "k"), {})
        with pytest.raises(KeyError):
            polybus.wait([p, bad], timeout=30)
        late = s.call("throw", ("TimeoutError", "the device did not answer"), {})
        with pytest.raises(TimeoutError, match="the device did not answer") as e:
            polybus.wait([p, late], timeout=30)
        assert isinstance(e.value, RemoteException) and e.value.remote_type == "TimeoutError"


@pytest.mark.parametrize("timeout", ["1", float("nan"), True, [1]])
def test_a_timeout_that_is_not_a_number_is_refused(tmp_path: Path, timeout: object) -> None:
    with pytest.raises(UsageError, match="wait: timeout must be a number of seconds or None"):
        polybus.wait(1, timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="as_completed: timeout must be a number"):
        polybus.as_completed([1], timeout=timeout)  # type: ignore[arg-type]
