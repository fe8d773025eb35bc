"""worker/startstop.py, in this process, with SIGUSR2 (not a signal pytest itself
heeds): a stop signal while a worker starts raises `StartStopped`; one lost in a
callback whose exceptions Python drops comes again, unsaid; once closed, a signal is
only noted; the handlers of before can be put back."""

from __future__ import annotations

import operator
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest

from polybus.worker.startstop import StartStopped, StartStops

SIG = signal.SIGUSR2


@pytest.fixture
def handlers() -> Iterator[list[object]]:
    """SIGUSR2's handler and the unraisable hook as they were, put back after; what
    the hook of before was given meanwhile."""
    before = signal.getsignal(SIG)
    hook = sys.unraisablehook
    seen: list[object] = []
    sys.unraisablehook = seen.append
    try:
        yield seen
    finally:
        sys.unraisablehook = hook
        signal.signal(SIG, before)


def _until_raised(limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_signal_raises_start_stopped_and_is_noted(handlers: list[object]) -> None:
    s = StartStops([SIG])
    try:
        with pytest.raises(StartStopped):
            os.kill(os.getpid(), SIG)
            _until_raised()
        assert s.signum == SIG
    finally:
        s.close()


def test_one_lost_in_a_del_is_raised_at_the_next_line_unsaid(handlers: list[object]) -> None:
    """Dropped in the ``__del__`` (a callback), it is raised at the next line of the
    code the callback interrupted, not in the next callback; no trace is left."""
    inside: list[object] = []

    class Dropped:
        def __del__(self) -> None:
            try:
                os.kill(os.getpid(), SIG)
                time.sleep(0.05)  # (the handler runs here: its exception is dropped)
            finally:
                inside.append(sys.exc_info()[1])

    tracing = sys.gettrace()
    s = StartStops([SIG])
    past: list[bool] = []
    try:
        with pytest.raises(StartStopped):
            Dropped()
            past.append(True)  # (raised here: the line after the one that dropped it)
        assert s.signum == SIG and past == []
        assert len(inside) == 1 and isinstance(inside[0], StartStopped)
        assert sys.gettrace() is tracing or tracing is not None
        for _ in range(3):  # (no trace left to raise again, at a line or a call)
            past.append(bool(sum(range(10))))
    finally:
        s.close()
    assert handlers == []  # (the lost one was not given to the hook of before)
    assert sys.unraisablehook == handlers.append  # (put back by close)


def test_once_closed_a_signal_is_noted_only_and_the_old_handlers_go_back(
        handlers: list[object]) -> None:
    got: list[int] = []
    signal.signal(SIG, lambda signum, frame: got.append(signum))
    s = StartStops([SIG])
    s.close()
    os.kill(os.getpid(), SIG)
    time.sleep(0.01)
    assert s.signum == SIG and got == []
    s.put_back()
    os.kill(os.getpid(), SIG)
    time.sleep(0.01)
    assert got == [SIG]


def test_the_handling_of_a_stop_is_not_cut_short_by_its_repeat_or_a_second_signal(
        handlers: list[object]) -> None:
    """Where a `StartStopped` is handled already (a process pool's start ending its
    children, a ``finally`` on its way out), neither the repeat (every 0.1 s) nor
    another signal raises again; once that is over and the module goes on, it does."""
    s = StartStops([SIG])
    s.repeat()
    done: list[bool] = []
    try:
        with pytest.raises(StartStopped):
            try:
                os.kill(os.getpid(), SIG)
                _until_raised()
            finally:  # (the clean-up: 0.3 s, three repeats, and a second signal)
                os.kill(os.getpid(), SIG)
                time.sleep(0.3)
                done.append(True)
        assert done == [True]
        with pytest.raises(StartStopped):  # (caught and gone on: it comes again)
            try:
                os.kill(os.getpid(), SIG)
                _until_raised()
            except StartStopped:
                pass
            _until_raised()
    finally:
        s.close()


def test_a_trace_of_before_sees_the_lines_meanwhile_and_after(handlers: list[object]) -> None:
    """A trace of the process's own (coverage, a debugger) is kept: CPython takes every
    trace off when one raises, as the line's raising `StartStopped` does; it and each
    frame's own come back (it went for good, and the frames it traced saw no line)."""
    seen: list[tuple[str, int]] = []

    def mine(frame: FrameType, event: str, arg: object) -> object:
        if event == "line" and frame.f_code.co_name in ("outer", "called"):
            seen.append((frame.f_code.co_name, frame.f_lineno))
        return mine

    class Dropped:
        def __del__(self) -> None:
            os.kill(os.getpid(), SIG)
            time.sleep(0.05)

    def called() -> int:
        return 1

    def outer() -> tuple[bool, list[str]]:
        s = StartStops([SIG])
        try:
            with pytest.raises(StartStopped) as info:
                Dropped()
                called()  # (raised at this line, which the trace of before saw)
        finally:
            s.close()
        meanwhile = ("outer", info.tb.tb_lineno) in seen
        del seen[:]
        called()  # (a frame after: the trace of before's call)
        return meanwhile, [name for name, _ in seen]  # (a line of outer's own after it)

    coverage = sys.gettrace()  # (pytest-cov's, if any: put back after)
    sys.settrace(mine)
    try:
        meanwhile, names = outer()
        after = sys.gettrace()
    finally:
        sys.settrace(coverage)
    assert after is mine
    assert meanwhile and names == ["outer", "called", "outer"]


FORKED = """
import os, signal, time
from polybus.worker.startstop import StartStopped, StartStops
armed = []
def before():  # (an at-fork hook's exception is dropped, as a callback's)
    if armed:
        armed.clear()
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.05)
os.register_at_fork(before=before)
me = os.getpid()
s = StartStops([signal.SIGUSR2])
try:
    armed.append(1)
    pid = os.fork()
    x = 1
    outcome = "went on"
except StartStopped:
    outcome = "StartStopped"
if os.getpid() != me:
    os.write(1, f"child: {outcome}\\n".encode())
    os._exit(0)
s.close()
os.waitpid(pid, 0)
print("parent:", outcome, flush=True)
"""


def test_a_child_forked_while_a_lost_stop_waits_for_its_line_goes_on() -> None:
    """The stop lost in the fork's own hook is the parent's: raised at its next line
    there; the child, which has the parent's traced frames, is not stopped (it raised
    `StartStopped` at its first line, as if the signal had been its own)."""
    out = subprocess.run([sys.executable, "-c", FORKED], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert sorted(out.split("\n")) == ["", "child: went on", "parent: StartStopped"]


def test_made_outside_the_main_thread_it_fails_and_leaves_the_hook_and_handlers_as_were(
        handlers: list[object]) -> None:
    """Signals are the main thread's: made in another, it fails (ValueError) with the
    unraisable hook of before in place (it was left its own) and no handler set."""
    failed: list[BaseException] = []

    def make() -> None:
        try:
            StartStops([SIG])
        except ValueError as exc:
            failed.append(exc)

    before = signal.getsignal(SIG)
    t = threading.Thread(target=make)
    t.start()
    t.join(30)
    assert len(failed) == 1
    assert sys.unraisablehook == handlers.append and signal.getsignal(SIG) == before


def test_a_signal_while_it_is_made_is_noted_and_raises_nothing_yet(
        handlers: list[object]) -> None:
    """One that comes as its handlers go in (here between two of them) raised out of
    the making, before the caller's ``try`` (serve's): now it is noted, and raised once
    it is made and armed (here by the repeat)."""

    def signals() -> Iterator[signal.Signals]:
        yield SIG
        os.kill(os.getpid(), SIG)  # (its handler is in: it runs here)
        time.sleep(0.05)
        yield signal.SIGUSR1

    before = signal.getsignal(signal.SIGUSR1)
    try:
        s = StartStops(signals())
        try:
            assert s.signum == SIG
            s.repeat()
            with pytest.raises(StartStopped):
                _until_raised()
        finally:
            s.close()
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_a_signal_that_lands_as_close_is_entered_is_noted_only(handlers: list[object]) -> None:
    """Its handler runs at close's first bytecode, before close disarms (the start
    ended or failed, its clean-up next): it raised there, and nothing was closed."""
    s = StartStops([SIG])
    go, held = threading.Lock(), threading.Lock()
    go.acquire()
    held.acquire()

    def trip() -> None:  # (its handler waits for the main thread's next bytecode)
        with go:
            signal.pthread_kill(threading.get_ident(), SIG)
            held.release()

    t = threading.Thread(target=trip)
    t.start()
    try:  # (C calls alone, up to close's first bytecode)
        list(map(operator.call, [go.release, held.acquire, s.close]))
    finally:
        t.join(30)
        s.close()
    assert s.signum == SIG
