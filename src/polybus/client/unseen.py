"""Errors nobody looked at: an overlapped call that failed, whose promise goes without
its error ever reaching the program, is said on the ``polybus.client.unseen`` logger.

An async call's error is raised where its value is used; a program that never uses it
(``boom(0); return "done"``) finished as if nothing had failed. Now, when such a promise
(or the last promise of an aggregated batch) is freed, its error is logged as a warning:
the first few one by one, then once that more are not shown (as a thread's uncaught
exception or an unretrieved asyncio task's is said rather than lost). An error is
*seen* once it was raised to the program, or passed on to a call that consumed its
value (a forwarded promise: the consumer's error says it). A program that means to
drop failures silences the logger:
``logging.getLogger("polybus.client.unseen").setLevel(logging.ERROR)``.
"""

from __future__ import annotations

import gc
import logging
import threading
from typing import TYPE_CHECKING

from polybus.errors import PolybusError

if TYPE_CHECKING:
    from polybus.client.session import Session

__all__ = ["SHOWN_AT_MOST", "failed", "forgotten", "reset", "seen", "settle"]

log = logging.getLogger("polybus.client.unseen")
SHOWN_AT_MOST = 5  # errors logged one by one in a process; then one line says more went
_MARK = "_polybus_seen"
_lock = threading.Lock()
_shown = 0
_failures = 0  # calls that failed since `reset` (the end of a run collects only then)


def reset() -> None:
    """Count from none again (each run says its own first few)."""
    global _shown, _failures
    with _lock:
        _shown = _failures = 0


def failed() -> None:
    """A call failed (CallRecord.set_error): the end of the run collects before it looks."""
    global _failures
    _failures += 1


def seen(error: PolybusError) -> PolybusError:
    """``error`` reaches the program (or a consumer of the value): mark it; returned."""
    try:
        setattr(error, _MARK, True)
    except AttributeError:  # pragma: no cover - (an error class with slots)
        pass
    return error


def forgotten(error: PolybusError | None, interface: str) -> None:
    """A promise of a call to ``interface`` is freed: say ``error`` if no one saw it."""
    global _shown
    if error is None or getattr(error, _MARK, False):
        return
    seen(error)  # (said once, whatever else held it)
    with _lock:
        _shown += 1
        n = _shown
    try:
        if n <= SHOWN_AT_MOST:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            log.warning("polybus: warning: a call to %r failed and its error was never "
                        "looked at (its promise was freed unused): %s: %s", interface,
                        type(error).__name__, first)
        elif n == SHOWN_AT_MOST + 1:
            log.warning("polybus: warning: more calls failed with their errors never "
                        "looked at; not shown")
    except Exception:  # pragma: no cover - (at interpreter exit, logging may be gone)
        pass


def settle(session: Session) -> None:
    """At the end of a run (its calls drained): free what only the collector frees (a
    promise kept by a raised error's traceback), then say every error of an aggregated
    batch still alive that no one saw; such a batch may never be freed (batchcalls.py)."""
    failed = [b for bt in session.batchers for b in bt.failed]
    if failed or _failures:
        gc.collect()
    for bt in session.batchers:
        for b in list(bt.failed):
            b.say_unseen()
