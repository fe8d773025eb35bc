"""deadline.py: a run's time limit, raised in the main thread as Ctrl-C is."""

from __future__ import annotations

import math
import os
import signal
import threading
import time

import pytest

from polybus.deadline import RunTimeout, check_timeout, time_limit
from polybus.errors import UsageError


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "soon", "0ms", "-2s", [5]])
def test_a_limit_that_is_not_a_positive_duration_is_a_usage_error(bad: object) -> None:
    with pytest.raises(UsageError, match=r"^--timeout must be a duration above 0 \(seconds, "
                                         r"or written as '500ms' or '2m'\), got "):
        check_timeout(bad, "--timeout")  # type: ignore[arg-type]


@pytest.mark.parametrize(("given", "seconds"), [("500ms", 0.5), ("2m", 120.0), ("5", 5.0),
                                                (1.5, 1.5)])
def test_a_limit_is_written_as_the_configuration_writes_a_duration(given: object,
                                                                   seconds: float) -> None:
    # (`--timeout 500ms` was taken, `polybus.run(timeout="500ms")` refused)
    assert check_timeout(given) == seconds  # type: ignore[arg-type]


def test_no_limit_is_none_and_a_limit_is_float() -> None:
    assert check_timeout(None) is None
    assert check_timeout(2) == 2.0


def test_the_limit_stops_a_block_that_runs_past_it_with_run_timeout() -> None:
    before = signal.getsignal(signal.SIGINT)
    t0 = time.monotonic()
    with pytest.raises(RunTimeout) as got, time_limit(0.2):
        threading.Event().wait(30)  # (a wait in a lock: interrupted all the same)
    assert time.monotonic() - t0 < 20
    assert str(got.value) == "timed out after 0.2 s" and got.value.seconds == 0.2
    assert isinstance(got.value, KeyboardInterrupt)  # (no `except Exception` takes it)
    assert signal.getsignal(signal.SIGINT) is before  # (left as found)


def test_a_block_that_ends_in_time_is_not_stopped_later() -> None:
    with time_limit(0.3):
        pass
    time.sleep(0.5)  # (past the limit: nothing is raised)
    assert not [t for t in threading.enumerate() if t.name == "polybus-time-limit"]


def test_the_limit_needs_the_main_thread() -> None:
    got: list[BaseException] = []

    def elsewhere() -> None:
        try:
            with time_limit(1):
                pass
        except BaseException as exc:  # (what the thread met, looked at below)
            got.append(exc)

    t = threading.Thread(target=elsewhere)
    t.start()
    t.join()
    assert len(got) == 1 and isinstance(got[0], UsageError)
    assert "needs the main thread" in str(got[0])


def test_a_real_ctrl_c_inside_the_limit_is_still_a_keyboard_interrupt() -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt) as got, time_limit(30):
        os.kill(os.getpid(), signal.SIGINT)  # (this test's own process)
        time.sleep(5)
    assert type(got.value) is KeyboardInterrupt
    assert signal.getsignal(signal.SIGINT) is before


def test_the_limit_leaves_sigalrm_and_the_interval_timer_alone() -> None:
    """pytest-timeout (and a program) may use them: the limit keeps its own time."""
    alarm = signal.getsignal(signal.SIGALRM)
    timer = signal.getitimer(signal.ITIMER_REAL)
    with pytest.raises(RunTimeout), time_limit(0.1):
        assert signal.getsignal(signal.SIGALRM) is alarm
        time.sleep(10)
    assert signal.getsignal(signal.SIGALRM) is alarm
    assert (signal.getitimer(signal.ITIMER_REAL)[0] > 0) == (timer[0] > 0)


def test_a_block_that_catches_the_interrupt_is_interrupted_again_and_fails_at_its_end() -> None:
    caught = 0
    with pytest.raises(RunTimeout) as got, time_limit(0.2):
        for _ in range(3):
            try:
                time.sleep(30)
            except RunTimeout:
                caught += 1  # (a program that goes on after one)
    assert caught == 3  # (again each AGAIN_S, not once)
    assert any("past its limit when its entrypoint returned" in n
               for n in getattr(got.value, "__notes__", ()))


def test_a_block_with_a_sigint_handler_of_its_own_fails_at_its_end() -> None:
    interrupted: list[int] = []
    with pytest.raises(RunTimeout), time_limit(0.2):
        mine = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
        try:
            deadline = time.monotonic() + 30
            while not interrupted and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            signal.signal(signal.SIGINT, mine)
    assert interrupted == [signal.SIGINT]  # (its handler had the watchdog's SIGINT)


def test_a_limit_past_what_a_thread_can_wait_is_refused() -> None:
    with pytest.raises(UsageError, match=r"^--timeout must be at most 1e\+09 s"):
        check_timeout(1e10, "--timeout")


def test_run_timeout_copies_and_pickles() -> None:
    import copy
    import pickle

    for again in (copy.copy(RunTimeout(1.5)), pickle.loads(pickle.dumps(RunTimeout(1.5)))):
        assert type(again) is RunTimeout and again.seconds == 1.5
        assert str(again) == "timed out after 1.5 s"
