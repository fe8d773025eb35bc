"""Waiting for a stop signal (SIGTERM, SIGINT) in a process's main thread, safely.

A Python signal handler runs in the main thread between two of its bytecodes, which may
be inside ``threading.Event.wait`` while that thread holds the event's own lock. A
handler that calls ``Event.set`` then waits for that lock forever: a ``polybus worker``
SIGTERMed by its run's death went on serving, now and then, until it was killed (54 of
100 processes hung when the signal was sent during a tight ``Event.wait`` loop). The
handler here takes no lock: it notes the signal and writes a byte to a pipe, which the
waiting thread selects on.

Within `StopSignals.raising` a signal also raises `Stopping` in the main thread, to end
a blocking call there that has no stop of its own to look at: a worker's first
registration with a registry that accepted the connection and never answers held a
Ctrl-C for the handshake's 5 s, then ended with its error (status 2, not 130).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType

from polybus.transport.ready import ready

__all__ = ["StopSignals", "Stopping", "as_python_would"]

# The longest one select in `wait` blocks. The kernel gives a signal to the main thread
# only when that thread does not block it; given to another thread, it interrupts no
# select, and its handler runs when the main thread next runs Python code.
_SLICE = 0.5


class Stopping(BaseException):  # (a stop, as KeyboardInterrupt is: not an Exception)
    """A stop signal came within `StopSignals.raising` (its ``signum`` is noted)."""


def as_python_would(signum: int) -> None:
    """In a child forked after polybus's handlers were set, ``signum`` as Python's own
    handling would take it: KeyboardInterrupt for SIGINT, else the default action."""
    if signum == signal.SIGINT:
        signal.signal(signum, signal.default_int_handler)
        raise KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


class StopSignals:
    """Handlers for ``signals`` that end `wait`; ``signum`` is the first that came."""

    def __init__(self, signals: Iterable[signal.Signals]) -> None:
        self.signum: int | None = None
        self._raising = False  # (within `raising`)
        self.requested = False  # `request` was called: a stop asked for without a signal
        self._pid = os.getpid()
        self._r, self._w = os.pipe()  # (close-on-exec: no child inherits them)
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._open = True
        try:
            for sig in signals:
                if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                    continue  # (started under nohup: closing the terminal must not stop it)
                signal.signal(sig, self._handle)
        except BaseException:  # (ValueError outside the main thread): no pipe left open
            self.close()
            raise

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # A child forked after the handlers were set (multiprocessing's "fork" context, in
        # a served function) runs this handler too, and holds this very pipe: its signal
        # is not this process's, and must not wake this process's wait. The child gets
        # what Python's own handling would do (terminate() of a forked child ends it).
        if os.getpid() != self._pid:
            as_python_would(signum)
            return
        if self.signum is None:
            self.signum = signum
        if self._open:  # (a closed descriptor's number may belong to another file now)
            try:
                os.write(self._w, b"\0")
            except OSError:  # (the pipe is full: the flag is what counts)
                pass
        if self._raising:  # (once: the way out is not interrupted again)
            self._raising = False
            raise Stopping

    @contextmanager
    def raising(self) -> Iterator[None]:
        """Within: a signal (noted as ever) also raises `Stopping` in the main thread,
        where the handler runs, ending what it was blocked in; one that came before
        raises it at once. A `request` raises nothing (it comes from another thread)."""
        if self.signum is not None:
            raise Stopping
        self._raising = True
        try:
            yield
        finally:
            self._raising = False

    def request(self) -> None:
        """Stop `wait` as a signal would, from any thread (an engine's own stop: the
        mpi engine's ranks are told to stop by a message, not a signal)."""
        self.requested = True
        self._wake()

    def _wake(self) -> None:
        """A byte for `wait`'s select (it looks at the flags before it blocks)."""
        if self._open:
            try:
                os.write(self._w, b"\0")
            except OSError:  # (the pipe is full: the flag is what counts)
                pass

    def came(self, signum: int) -> None:
        """Note ``signum`` as if it had come now (it came before these handlers were in:
        a worker's start, worker/startstop.py); it comes first only if none did."""
        if self.signum is None:
            self.signum = signum
        self._wake()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a signal has come or `request` was called (True), or ``timeout``
        seconds pass (False). A byte in the pipe with neither noted wakes nothing."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.signum is None and not self.requested and self._open:
            left = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
            if left <= 0:
                break
            if ready([self._r], [], left)[0]:  # (a poll: select() takes no fd past 1,023)
                try:
                    os.read(self._r, 4096)
                except OSError:  # (BlockingIOError: another holder of the pipe read it)
                    pass
        return self.signum is not None or self.requested

    def close(self) -> None:
        """Close the pipe; the handlers stay, and still note a signal. A `wait` after
        this does not block."""
        if not self._open:
            return
        self._open = False
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> StopSignals:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
