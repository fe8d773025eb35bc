"""`polybus.run` embedded in a longer-lived program (a notebook's kernel, a service):
several runs one after the other, a run nested in a client, and two threads that each
start one. Before: a nested run's end left the outer run without its session (its next
call failed with "called outside a polybus run"), and a run started in a second thread
while another was under way took over the first one's calls (they went to the second
run's replicas, and failed once it ended). Every worker a test starts is gone at its end.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import polybus
import polybus.runner as runner
from integration.conftest import descendants
from polybus.errors import UsageError
from polybus.testing.apps import write_bound_app

SERVER = """
    def square(x):
        return x * x
"""

NESTED_CLIENT = """
    import polybus
    from polybus import use

    square = use("square")

    def main():
        before = square(3) + 0
        inner = polybus.run("inner/app.toml", worker_output=False).result
        after = square(4) + 0              # the outer run's session again
        return before, inner, after
"""

INNER_CLIENT = """
    from polybus import use

    square = use("square")

    def main():
        return square(5) + 0
"""

GATED_CLIENT = """
    import embedded_runs_gate as gate
    from polybus import use

    square = use("square")

    def main():
        first = square(2) + 0
        gate.entered.set()
        gate.release.wait(30)              # meanwhile another thread starts a run
        return first, square(3) + 0
"""

PLAIN_CLIENT = """
    from polybus import use

    square = use("square")

    def main():
        return square(7) + 0
"""



def _app(where: Path, client: str) -> Path:
    return write_bound_app(where, server=SERVER, client=client, names=("square",),
                           client_keys='use.square = { callstyle = "async" }')


@pytest.mark.timeout(120)
def test_a_run_nested_in_a_client_gives_the_outer_run_its_session_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_worker_left: None) -> None:
    outer = _app(tmp_path, NESTED_CLIENT)
    _app(tmp_path / "inner", INNER_CLIENT)
    monkeypatch.chdir(tmp_path)
    assert polybus.run(outer, worker_output=False).result == (9, 25, 16)


BOOM_SERVER = """
    def square(x):
        if x < 0:
            raise ValueError("no square of a negative here")
        return x * x
"""

FAILING_INNER_CLIENT = """
    from polybus import use

    square = use("square")

    def main():
        return square(-1) + 0
"""

FORGETFUL_CLIENT = """
    import gc

    import polybus
    from polybus import use

    square = use("square")

    def main():
        try:
            polybus.run("inner/app.toml", worker_output=False)
        except Exception:
            pass                           # (the inner run's error, looked at)
        square(-2)                         # failed, and never looked at
        gc.collect()
        return square(4) + 0
"""


@pytest.mark.timeout(120)
def test_a_nested_run_that_raised_leaves_the_outer_runs_unseen_errors_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        no_worker_left: None) -> None:
    """The errors nobody looked at (client/unseen.py) are the outer run's own again once
    a nested run has ended. Before: a nested run that raised left them hushed (as its
    own were, its exception counting them), and the outer run, which went on and
    returned, said nothing of a call that failed unseen."""
    outer = write_bound_app(tmp_path, server=BOOM_SERVER, client=FORGETFUL_CLIENT,
                            names=("square",),
                            client_keys='use.square = { callstyle = "async" }')
    write_bound_app(tmp_path / "inner", server=BOOM_SERVER, client=FAILING_INNER_CLIENT,
                    names=("square",))
    monkeypatch.chdir(tmp_path)
    with caplog.at_level("WARNING", logger="polybus.client.unseen"):
        assert polybus.run(outer, worker_output=False).result == 16
    said = [r.getMessage() for r in caplog.records if r.name == "polybus.client.unseen"]
    assert any("a call to 'square' failed and its error was never looked at" in m
               and "no square of a negative here" in m for m in said), said


@pytest.fixture
def gate() -> Iterator[types.SimpleNamespace]:
    """What GATED_CLIENT imports to say it is inside its run, and waits on."""
    g = types.SimpleNamespace(entered=threading.Event(), release=threading.Event())
    sys.modules["embedded_runs_gate"] = g  # type: ignore[assignment]
    try:
        yield g
    finally:
        g.release.set()
        sys.modules.pop("embedded_runs_gate", None)


@pytest.mark.timeout(120)
def test_a_run_started_while_another_threads_run_is_under_way_is_refused(
        tmp_path: Path, gate: types.SimpleNamespace, no_worker_left: None) -> None:
    first = _app(tmp_path / "first", GATED_CLIENT)
    second = _app(tmp_path / "second", PLAIN_CLIENT)
    out: dict[str, Any] = {}

    def run_first() -> None:
        try:
            out["result"] = polybus.run(first, worker_output=False).result
        except BaseException as exc:  # (said by the assertion below)
            out["error"] = exc

    thread = threading.Thread(target=run_first)
    thread.start()
    try:
        assert gate.entered.wait(60), out
        before = descendants(os.getpid())
        with pytest.raises(UsageError) as info:
            polybus.run(second, worker_output=False)
        assert descendants(os.getpid()) <= before  # (refused before any worker started)
    finally:
        gate.release.set()
        thread.join(60)
    message = str(info.value)
    assert "another polybus run is under way in this process" in message, message
    assert f"thread {thread.name!r}" in message, message
    assert "error" not in out, out.get("error")
    assert out["result"] == (4, 9)
    # and once it has ended, a run from this thread is welcome
    assert polybus.run(second, worker_output=False).result == 49


@pytest.mark.timeout(120)
def test_a_run_let_in_as_another_threads_ends_leaves_no_session_behind(
        tmp_path: Path, gate: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch,
        no_worker_left: None) -> None:
    """A run started while another thread's is under way, and let in once that one has
    ended (its check made then), is a run of its own: before, it had read the session
    active as it started, the other run's, and gave it back as it ended, so the
    process's calls outside any run went to that closed session (``ValueError: I/O
    operation on closed epoll object``), and so did every later run's end."""
    first = _app(tmp_path / "first", GATED_CLIENT)
    second = _app(tmp_path / "second", PLAIN_CLIENT)
    first_ended = threading.Event()
    let_in = runner.one_run

    @contextmanager
    def once_the_first_has_ended() -> Iterator[Any]:
        if threading.current_thread().name == "second":
            gate.release.set()
            assert first_ended.wait(60)
        with let_in() as outer:
            yield outer

    monkeypatch.setattr(runner, "one_run", once_the_first_has_ended)
    out: dict[str, Any] = {}

    def run(name: str, app: Path) -> None:
        try:
            out[name] = polybus.run(app, worker_output=False).result
        finally:
            if name == "first":
                first_ended.set()

    threads = [threading.Thread(target=run, args=("first", first), name="first")]
    threads[0].start()
    assert gate.entered.wait(60)
    threads.append(threading.Thread(target=run, args=("second", second), name="second"))
    threads[1].start()
    for t in threads:
        t.join(60)
    assert out == {"first": (4, 9), "second": 49}
    with pytest.raises(UsageError, match="outside a polybus run"):
        polybus.use("square")(3)


@pytest.mark.timeout(120)
def test_runs_from_a_thread_one_after_the_other(tmp_path: Path, no_worker_left: None) -> None:
    app = _app(tmp_path, PLAIN_CLIENT)
    results: list[Any] = []

    def runs() -> None:
        for _ in range(2):
            results.append(polybus.run(app, worker_output=False).result)

    thread = threading.Thread(target=runs)
    thread.start()
    thread.join(100)
    assert results == [49, 49]
    assert polybus.run(app, worker_output=False).result == 49  # (and from this one)



ASYNC_CLIENT = """
    import asyncio
    from polybus import use

    square = use("square")

    async def two():
        return 2

    def main():
        coro = two()
        try:
            return square(asyncio.run(coro)) + 0
        finally:
            coro.close()                   # (refused: never awaited, no warning of it)
"""


@pytest.mark.timeout(120)
def test_a_run_inside_a_running_event_loop(tmp_path: Path, no_worker_left: None) -> None:
    """As in a notebook, whose kernel runs an event loop: a run works there, and a client
    that starts an event loop of its own (asyncio.run, fine under `polybus run`) fails
    with a note that says why, and what to do."""
    plain = _app(tmp_path / "plain", PLAIN_CLIENT)
    loops = _app(tmp_path / "loops", ASYNC_CLIENT)

    async def cell(app: Path) -> Any:
        return polybus.run(app, worker_output=False).result

    assert asyncio.run(cell(plain)) == 49
    with pytest.raises(RuntimeError, match="running event loop") as info:
        asyncio.run(cell(loops))
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "polybus.run was called in a thread whose asyncio event loop is running" in notes
    assert "asyncio.to_thread(polybus.run" in notes
    assert polybus.run(loops, worker_output=False).result == 4  # (with no loop running)


SLOW_SERVER = """
    import time

    def square(x):
        time.sleep(x)
        return x * x
"""

SLOW_CLIENT = """
    from polybus import use, wait

    square = use("square")

    def main():
        return wait([square(30), square(30)])
"""


@pytest.mark.timeout(120)
def test_an_interrupt_while_calls_are_in_flight_stops_the_run_and_the_next_one_works(
        tmp_path: Path, request: pytest.FixtureRequest, no_worker_left: None) -> None:
    """A notebook's interrupt is SIGINT to its kernel, while the program waits for calls:
    the run raises KeyboardInterrupt saying what it waited for, stops its workers, and
    the process runs the next one."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # (a shell
    # that started the tests in the background has it ignored)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    slow = write_bound_app(tmp_path / "slow", server=SLOW_SERVER, client=SLOW_CLIENT,
                           names=("square",), server_keys="replication = 2",
                           client_keys='use.square = { callstyle = "async" }')
    main = threading.get_ident()
    started = descendants(os.getpid())

    def interrupt_once_waiting() -> None:
        while True:  # (the main thread inside polybus's wait: the calls are in flight)
            frame = sys._current_frames().get(main)
            while frame is not None and frame.f_code.co_name != "_wait":
                frame = frame.f_back
            if frame is not None:
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.01)

    threading.Thread(target=interrupt_once_waiting, daemon=True).start()
    with pytest.raises(KeyboardInterrupt) as info:
        polybus.run(slow, worker_output=False)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "it was waiting for a call to square on server-" in notes, notes
    assert descendants(os.getpid()) <= started
    assert polybus.run(_app(tmp_path / "plain", PLAIN_CLIENT),
                       worker_output=False).result == 49
