"""A worker started by hand, stopped while it starts: before it serves (its module
importing, its process pool starting), a stop signal ends it as one does later.

The signal's handler raises `StartStopped` in the main thread, where it runs between two
bytecodes of whatever Python code runs there. In a callback whose exceptions Python
prints and drops (a ``__del__``, a weakref's callback: importlib's own module locks
have one, run in every import), it was printed as "Exception ignored in ..." and lost:
the worker imported on, registered and served. So the signal is also noted; one dropped
so is not printed (it is no fault of the callback's, and the stop is said as any) and
is raised again at the next line of the code the callback interrupted (a trace on the
frames below it, as a debugger's: a module whose time goes to callbacks met every
signal in one); and a thread of this module sends it again to the main thread every
`REPEAT_S` until the stop has been taken (`close`), for a module that caught it and
went on. None is raised where a `StartStopped` is being handled already (an ``except``
or ``finally`` on its way out, a process pool's start ending its children): that
clean-up is not cut short, by the repeat or by a second signal. Nor is one raised
where it would come out of the caller's ``try`` (serve's): as the handlers go in, in
`close` before it disarms, or by the trace at a line of the caller's own frame (its
own end, or its ``except``). Once closed, a signal is noted and raises nothing; the
caller passes what was noted on to the handlers that take over (`signum`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from polybus.stopsignals import as_python_would

__all__ = ["REPEAT_S", "StartStopped", "StartStops"]

REPEAT_S = 0.1  # how often a stop not yet taken is sent again to the main thread


class StartStopped(KeyboardInterrupt):
    """A stop signal came while the worker started (`StartStops.signum` says which).
    A KeyboardInterrupt, as `Terminated` is: a module's failure to import is said at its
    line (worker/module.py), this is not."""


class StartStops:
    """Handlers for ``signals`` while a worker starts (the main thread's), in at once;
    the thread that repeats a signal runs from `repeat` to `close` (the handlers stay)."""

    def __init__(self, signals: Iterable[signal.Signals],
                 untraced: FrameType | None = None) -> None:
        """``untraced``: the caller's frame (serve's), which goes on past the start to
        its end or its clean-up, neither to be cut short: it and those that called it
        are not traced (`_at_next_line`), a stop lost in a callback that interrupted
        it comes with the repeat. A signal while this is made is noted; it raises
        nothing until this is made (it would have come out of the caller's ``try``)."""
        self.signum: int | None = None
        self._armed = False
        self._pid = os.getpid()
        self._main = threading.get_ident()
        self._over = threading.Event()
        self._repeater: threading.Thread | None = None
        # (`_at_next_line`: each frame traced, with its own trace of before)
        self._traced: dict[int, tuple[FrameType, Any]] = {}
        self._trace_of_before: Any = None
        self._raised = False  # (at a line: CPython has since taken every trace off)
        self._untraced = untraced
        self._hook: Callable[[sys.UnraisableHookArgs], object] = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        self._before: dict[signal.Signals, signal._HANDLER] = {}
        try:
            for sig in signals:
                if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                    continue  # (under nohup: as StopSignals leaves it)
                self._before[sig] = signal.signal(sig, self._handle)
        except BaseException:  # (ValueError outside the main thread): nothing left of it
            self.put_back()
            sys.unraisablehook = self._hook
            raise
        self._armed = True  # (last: no call after it here, where a handler could run)

    def repeat(self) -> None:
        """Start the thread that repeats a signal not taken (by the caller, once this
        process may start threads: a replica sets its CPUs and allocator first; never by
        the handler, which may interrupt the main thread where it held a lock that
        starting a thread takes)."""
        self._repeater = threading.Thread(target=self._repeat, daemon=True,
                                          name="polybus-start-stop")
        self._repeater.start()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._pid:  # (a child the module forked: Python's own handling)
            as_python_would(signum)
            return
        if self.signum is None:
            self.signum = signum
        if self._armed and not _handling(sys.exc_info()[1]) \
                and (frame is None or frame.f_code is not _CLOSE):
            raise StartStopped  # (not in `close`, before its first line disarms)

    def _unraisable(self, unraisable: sys.UnraisableHookArgs) -> None:
        """A `StartStopped` lost in a callback is dropped unsaid, and raised again at
        the next line of the code the callback interrupted (`_at_next_line`); any other
        exception of a callback is said as ever."""
        if not isinstance(unraisable.exc_value, StartStopped):
            self._hook(unraisable)
        elif self._armed and threading.get_ident() == self._main:
            self._at_next_line(sys._getframe(1))

    def _at_next_line(self, frame: FrameType | None) -> None:
        """`StartStopped` raised at the next line any of ``frame`` and those below it
        runs (as a debugger stops there: their own trace, a frame called later traced
        by none). A module whose time goes mostly to callbacks (objects with a
        ``__del__`` dropped in a loop) met every signal, the repeats too, in one.
        A trace of before (coverage, a debugger) still sees every event meanwhile."""
        if self._traced:
            if not self._raised:
                return  # (one is waiting for its line already)
            self._untrace()  # (the traces the last raise took off back, then again)
        if frame is None or frame is self._untraced:
            return  # (the caller's own: the repeat raises it)
        self._raised = False
        self._trace_of_before = sys.gettrace()
        while frame is not None and frame is not self._untraced:
            self._traced[id(frame)] = (frame, frame.f_trace)
            frame.f_trace = self._line
            frame = frame.f_back
        sys.settrace(_untraced if self._trace_of_before is None else self._trace_of_before)

    def _line(self, frame: FrameType, event: str, arg: object) -> object:
        traced = self._traced.get(id(frame))
        if traced is not None and traced[0] is frame and traced[1] is not None:
            # (the frame's own trace of before is given the event first, as ever)
            self._traced[id(frame)] = (frame, traced[1](frame, event, arg))
        if not self._armed or os.getpid() != self._pid:  # (or a child forked meanwhile:
            self._untrace()  # the stop was its parent's, as `_handle` leaves it)
            return None
        if event != "line" or _handling(sys.exc_info()[1]):
            return self._line
        # Raised by a trace function, it makes CPython take every trace off (its
        # sys.settrace(None), this frame's f_trace): `_untrace` puts them back, at
        # `close` or the next one lost in a callback
        self._raised = True
        raise StartStopped

    def _untrace(self) -> None:
        """No frame traced by this any more: each frame's trace of before back, and the
        thread's (coverage's, a debugger's), unless one was set since."""
        if not self._traced:
            return
        for frame, before in self._traced.values():
            if frame.f_trace == self._line or (self._raised and frame.f_trace is None):
                frame.f_trace = before
        self._traced.clear()
        now = sys.gettrace()
        if now is _untraced or now is self._trace_of_before or (self._raised and now is None):
            sys.settrace(self._trace_of_before)
        self._trace_of_before = None
        self._raised = False

    def _repeat(self) -> None:
        """Send the noted signal to the main thread again, until the stop is taken."""
        while not self._over.wait(REPEAT_S):
            signum = self.signum
            if signum is not None and self._armed:
                try:
                    signal.pthread_kill(self._main, signum)
                except OSError:  # (the main thread is ending)
                    return

    def put_back(self) -> None:
        """The handlers of before back (the start failed: its error is said as ever,
        and a signal meanwhile does as it did)."""
        for sig, handler in self._before.items():
            if handler is not None:  # (None: one set outside Python, not to be put back)
                signal.signal(sig, handler)

    def close(self) -> None:
        """Disarm (the stop is taken, or the worker started: a signal from now on is
        noted only, and none is sent again), and end the repeating thread."""
        self._armed = False
        self._over.set()
        if threading.get_ident() == self._main:
            self._untrace()
        if sys.unraisablehook == self._unraisable:  # (else someone set theirs since)
            sys.unraisablehook = self._hook
        if self._repeater is not None and self._repeater is not threading.current_thread():
            self._repeater.join()


# A signal that lands in `close` (its call's first bytecode, before it disarms: a start
# that failed or ended, its clean-up about to begin) raises nothing
_CLOSE = StartStops.close.__code__


def _handling(exc: BaseException | None) -> bool:
    """``exc`` (what the interrupted code is handling: ``sys.exc_info``, as the handler
    sees it) is a `StartStopped`, or one raised while one was handled."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, StartStopped):
            return True
        seen.add(id(exc))
        exc = exc.__context__
    return False


def _untraced(frame: FrameType, event: str, arg: object) -> None:
    """The trace of every frame called while `StartStops._at_next_line` waits: none."""
    return None
