"""A run's time limit: ``run(..., timeout=S)``, ``polybus run --timeout S`` and
``polybus sweep --timeout S`` (one limit for each run of a combination).

Once the program has run ``S`` seconds (counted from its entrypoint's start; the
workers' start-up is not counted), `RunTimeout` is raised in the main thread, as Ctrl-C
raises KeyboardInterrupt: wherever the program is (waiting for a call, in a lock, in
its own loop; a long C call ends first, as for Ctrl-C), every ``finally`` on the way
out runs, the run's workers are stopped and its files removed. A program that catches
it is interrupted again every `AGAIN_S`, and one that returns all the same fails with
it: a run past its limit never counts as done. It is a KeyboardInterrupt so that no ``except Exception`` (the
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

__all__ = ["AGAIN_S", "MOST_S", "RunTimeout", "check_timeout", "time_limit"]

AGAIN_S = 1.0  # the limit passed: RunTimeout again this often while the program goes on
MOST_S = 1e9  # the longest limit (threading's waits take at most TIMEOUT_MAX, ~9.2e9 s)


class RunTimeout(KeyboardInterrupt):
    """The run's time limit passed before its program returned."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds

    def __reduce__(self) -> tuple[type[RunTimeout], tuple[float]]:
        return RunTimeout, (self.seconds,)  # (copied and pickled by its seconds)


def check_timeout(seconds: float | str | None, where: str = "timeout") -> float | None:
    """``seconds`` if it is a limit this thread can keep (None: no limit), written as a
    number or as the configuration writes a duration (``"500ms"``, ``"2m"``: as
    ``--timeout`` takes it); UsageError naming ``where`` (``--timeout``) otherwise."""
    if seconds is None:
        return None
    seconds = duration_seconds(seconds, where)
    if seconds > MOST_S:
        raise UsageError(f"{where} must be at most {MOST_S:g} s, got {seconds!r} (leave it "
                         "out for no limit)")
    if threading.current_thread() is not threading.main_thread():
        raise UsageError(f"{where} needs the main thread: it stops the program there as "
                         "Ctrl-C would; run from the main thread, or leave it out")
    return float(seconds)


def duration_seconds(value: object, where: str) -> float:
    """``value`` in seconds: a number, or a duration as the configuration writes one
    (``"500ms"``, ``"2m"``), above 0 and finite; UsageError naming ``where`` otherwise."""
    seconds = value
    if isinstance(value, str):
        from polybus.config.units import parse_duration
        from polybus.errors import ConfigError

        try:
            seconds = parse_duration(value)
        except ConfigError:
            pass  # (said below, as any other value that is not a duration)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
            or not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"{where} must be a duration above 0 (seconds, or written as "
                         f"'500ms' or '2m'), got {seconds!r}")
    return float(seconds)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise `RunTimeout` in the main thread once ``seconds`` have passed inside the
    block (None: no limit), and again each `AGAIN_S` while the block goes on (a program
    that catches the first goes on no further than its next wait). A block that ends
    normally after the limit passed (its program caught every one, or has a SIGINT
    handler of its own) raises it as it ends: a run past its limit never counts as done.
    On the way out, whatever ends the block, the watchdog is stopped and SIGINT's handler
    put back (a SIGINT the watchdog sent as the block ended is taken first: it must not
    reach that handler as a Ctrl-C)."""
    limit = check_timeout(seconds)
    if limit is None:
        yield
        return
    main = threading.get_ident()
    done = threading.Event()
    # SIGINTs the watchdog sent, and those the handler here took (each counter written by
    # one thread alone: the difference is what is still on its way)
    sent, taken = [0], [0]
    armed = True

    def handler(signum: int, frame: FrameType | None) -> None:
        if sent[0] == taken[0]:
            _pass_on(previous, signum, frame)  # a real Ctrl-C
            return
        taken[0] += 1
        if armed:
            raise RunTimeout(limit)

    def watch() -> None:
        wait = limit
        while not done.wait(wait):
            sent[0] += 1
            signal.pthread_kill(main, signal.SIGINT)
            wait = AGAIN_S

    previous = signal.signal(signal.SIGINT, handler)
    try:
        dog = threading.Thread(target=watch, daemon=True, name="polybus-time-limit")
        dog.start()
        try:
            yield
        finally:
            armed = False
            done.set()
            dog.join()
            give_up = time.monotonic() + 1.0
            while sent[0] != taken[0] and signal.getsignal(signal.SIGINT) is handler \
                    and time.monotonic() < give_up:
                time.sleep(0.001)  # (one is on its way: the handler here takes it)
    finally:
        signal.signal(signal.SIGINT, previous)
    if sent[0]:  # (the block ended normally all the same)
        late = RunTimeout(limit)
        late.add_note("it was past its limit when its entrypoint returned: it caught the "
                      "interrupt, or has a SIGINT handler of its own")
        raise late


def _pass_on(previous: Any, signum: int, frame: FrameType | None) -> None:
    """A SIGINT that is not the watchdog's, to the handler that was there before."""
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # (SIG_DFL, or one set outside Python)
        raise KeyboardInterrupt
