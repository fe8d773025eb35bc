"""A run's time limit: ``run(..., timeout=S)``, ``polybus run --timeout S`` and
``polybus sweep --timeout S`` (one limit for each run of a combination).

Once the program has run ``S`` seconds (counted from its entrypoint's start; the
workers' start-up is not counted), `RunTimeout` is raised in the main thread, as Ctrl-C
raises KeyboardInterrupt: wherever the program is (waiting for a call, in a lock, in
its own loop), every ``finally`` on the way out runs, the run's workers are stopped and
its files removed. It is a KeyboardInterrupt so that no ``except Exception`` (the
program's, or polybus's own around a step that must not fail) swallows it; the wait it
cuts short says what it was waiting for in a note, as for Ctrl-C (client/calls.py
``waiting_for``). A sweep reports it in the combination's cell and goes on.

A watchdog thread keeps the time; at the limit it sends SIGINT to the main thread
alone (``pthread_kill``: no other thread, no other process), which wakes it from any
blocking wait, and the handler this block put in place raises RunTimeout there. A real
Ctrl-C meanwhile goes to the handler that was there before, as ever. No interval timer
is used: SIGALRM stays the program's, or pytest-timeout's.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from polybus.errors import UsageError

__all__ = ["RunTimeout", "check_timeout", "time_limit"]


class RunTimeout(KeyboardInterrupt):
    """The run's time limit passed before its program returned."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds


def check_timeout(seconds: float | None, where: str = "timeout") -> float | None:
    """``seconds`` if it is a limit this thread can keep (None: no limit); UsageError
    naming ``where`` (``--timeout``) otherwise."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
            or not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"{where} must be a number of seconds above 0, got {seconds!r}")
    if threading.current_thread() is not threading.main_thread():
        raise UsageError(f"{where} needs the main thread: it stops the program there as "
                         "Ctrl-C would; run from the main thread, or leave it out")
    return float(seconds)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise `RunTimeout` in the main thread once ``seconds`` have passed inside the
    block (None: no limit). On the way out, whatever ends the block, the watchdog is
    stopped and SIGINT's handler put back (a SIGINT the watchdog sent as the block
    ended is taken first: it must not reach that handler as a Ctrl-C)."""
    limit = check_timeout(seconds)
    if limit is None:
        yield
        return
    main = threading.get_ident()
    done = threading.Event()
    sent = threading.Event()     # the watchdog sent its SIGINT
    taken = threading.Event()    # and the handler here has run for it
    armed = True

    def handler(signum: int, frame: FrameType | None) -> None:
        if not sent.is_set() or taken.is_set():
            _pass_on(previous, signum, frame)  # a real Ctrl-C
            return
        taken.set()
        if armed:
            raise RunTimeout(limit)

    def watch() -> None:
        if not done.wait(limit):
            sent.set()
            signal.pthread_kill(main, signal.SIGINT)

    previous = signal.signal(signal.SIGINT, handler)
    dog = threading.Thread(target=watch, daemon=True, name="polybus-time-limit")
    dog.start()
    try:
        yield
    finally:
        armed = False
        done.set()
        dog.join()
        give_up = time.monotonic() + 1.0
        while sent.is_set() and not taken.is_set() and time.monotonic() < give_up:
            time.sleep(0.001)  # (the signal is on its way: the handler here takes it)
        signal.signal(signal.SIGINT, previous)


def _pass_on(previous: Any, signum: int, frame: FrameType | None) -> None:
    """A SIGINT that is not the watchdog's, to the handler that was there before."""
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # (SIG_DFL, or one set outside Python)
        raise KeyboardInterrupt
