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

A run that ends with an exception out of the program (its own, or an error of a call it
waited for: a BusyError) is different: the program had no chance to look at the calls
it had made, and their promises go only when that exception does, after it was said.
Said one by one then, they bury the error that ended the run under lines about its
siblings (five "never looked at" lines after one BusyError). So from the moment the
program raised (`hush`) until the next run (`reset`), they are not said one by one;
the run's exception carries one note that counts them instead (`note_hushed`), by error
type: "23 more calls failed the same way (BusyError), never looked at before the run
ended". A program that returns normally keeps every warning.
"""

from __future__ import annotations

import gc
import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from polybus.errors import PolybusError, RemoteException, reported_name
from polybus.plural import plural

if TYPE_CHECKING:
    from polybus.client.session import Session

__all__ = ["SHOWN_AT_MOST", "failed", "forgotten", "hush", "note_hushed", "raised",
           "raised_before", "reset", "restore", "saved", "seen", "settle"]

log = logging.getLogger("polybus.client.unseen")
SHOWN_AT_MOST = 5  # errors logged one by one in a process; then one line says more went
_MARK = "_polybus_seen"
_FAILED = "_polybus_failed"  # (a call's error, counted in _failed)
_RAISED = "_polybus_raised"  # (how many times `raised` gave it to the program)
_lock = threading.Lock()
_shown = 0
_failures = 0  # calls that failed since `reset` (the end of a run collects only then)
_failed: Counter[str] = Counter()   # calls' errors since `reset`, by type
_looked: Counter[str] = Counter()   # of those, the ones seen (raised, passed on, said)
_hushed: Counter[str] = Counter()   # errors not of a call's record (a batch's), hushed
_hush = False  # the program raised: nothing said one by one until the next run
# The last error said, and how many more the same (interface, type, first line but for
# the replica: `_alike`) came after it: said in one line when another comes, or the run
# ends (`settle`), not each
_last: tuple[str, str, str] | None = None
_again = 0


def reset() -> None:
    """Count from none again (each run says its own first few)."""
    global _shown, _failures, _hush, _last, _again
    with _lock:
        _shown = _failures = _again = 0
        _hush = False
        _last = None
        for c in (_failed, _looked, _hushed):
            c.clear()


@dataclass(frozen=True)
class Saved:
    """A run's counts as they were (`saved`), to be given back (`restore`)."""

    shown: int
    failures: int
    failed: Counter[str]
    looked: Counter[str]
    hushed: Counter[str]
    hush: bool
    last: tuple[str, str, str] | None
    again: int


def saved() -> Saved:
    """This run's counts as they are, for a run nested in it to give back (`restore`):
    the nested run counts its own from none (`reset`), and may end hushed."""
    with _lock:
        return Saved(_shown, _failures, Counter(_failed), Counter(_looked),
                     Counter(_hushed), _hush, _last, _again)


def restore(state: Saved) -> None:
    """The counts `saved` took, back (a nested run has ended: the outer run's again)."""
    global _shown, _failures, _hush, _last, _again
    with _lock:
        _shown, _failures, _hush, _last, _again = (state.shown, state.failures, state.hush,
                                                   state.last, state.again)
        for mine, then in ((_failed, state.failed), (_looked, state.looked),
                           (_hushed, state.hushed)):
            mine.clear()
            mine.update(then)


def failed(error: PolybusError) -> None:
    """A call failed with ``error`` (CallRecord.set_error): the end of the run collects
    before it looks, and a run ended by the program's exception counts it if unseen."""
    global _failures
    _failures += 1
    if getattr(error, _FAILED, False):
        return  # (one error of several calls is said once: counted once)
    kind = reported_name(error)
    with _lock:  # (looked at again, and marked, under it: `seen`)
        if getattr(error, _FAILED, False):
            return
        _failed[kind] += 1
        if getattr(error, _MARK, False):
            _looked[kind] += 1
        _mark(error, _FAILED)


def _mark(error: PolybusError, name: str) -> None:
    try:
        setattr(error, name, True)
    except AttributeError:  # pragma: no cover - (an error class with slots)
        pass


def seen(error: PolybusError) -> PolybusError:
    """``error`` reaches the program (or a consumer of the value): mark it; returned."""
    if getattr(error, _FAILED, False) and not getattr(error, _MARK, False):
        kind = reported_name(error)
        # Looked at again, and marked, under the lock: two threads raising one failed
        # promise's error at once each counted it seen (the GIL passed between the look
        # and the mark), and the count hid another error of its type never looked at.
        with _lock:
            if not getattr(error, _MARK, False):
                _looked[kind] += 1
                _mark(error, _MARK)
    _mark(error, _MARK)
    return error


def raised(error: PolybusError) -> PolybusError:
    """``error``, seen, to raise to the program, without the traceback of an earlier raise
    of it. A failed promise used twice raises its one error twice, and Python puts the
    second raise's frames before the first's: the program's line of the first use was
    then named as where the error came out (callsite.py takes the innermost)."""
    try:
        setattr(error, _RAISED, getattr(error, _RAISED, 0) + 1)  # (`raised_before`)
    except AttributeError:  # pragma: no cover - (an error class with slots)
        pass
    return seen(error).with_traceback(None)


def raised_before(error: PolybusError, times: int = 0) -> bool:
    """Whether ``error`` was raised to the program more than ``times`` times
    (`raised`): a failed promise whose failure the program has seen come out."""
    return bool(getattr(error, _RAISED, 0) > times)


def forgotten(error: PolybusError | None, interface: str, passed: bool = False) -> None:
    """A promise of a call to ``interface`` is freed: say ``error`` if no one saw it.
    ``passed``: the promise went to another call (forwarded), whose outcome did not say
    ``error`` (it named another producer's failure, or failed on its own): said so, not
    as a promise freed unused, which the program would look for in vain."""
    global _shown
    if error is None or getattr(error, _MARK, False):
        return
    if _hush:  # counted by `note_hushed`, not said (a call's error: as not seen)
        if not getattr(error, _FAILED, False):
            with _lock:
                _hushed[reported_name(error)] += 1
        _mark(error, _MARK)
        return
    seen(error)  # (said once, whatever else held it)
    first = str(error).splitlines()[0] if str(error) else reported_name(error)
    said = (interface, reported_name(error), _alike(error, first))
    global _last, _again
    with _lock:
        if said == _last:  # the same again: counted, said in one line (`_say_again`)
            _again += 1
            return
        again, _again = _again, 0
        before, _last = _last, said
        _shown += 1
        n = _shown
    if n <= SHOWN_AT_MOST + 1:  # (the one before was said one by one: its count too)
        _say_again(before, again)
    try:
        if n <= SHOWN_AT_MOST:
            how = ("its promise went to another call, whose outcome did not say it"
                   if passed else "its promise was freed unused")
            log.warning("polybus: warning: a call to %r failed and its error was never "
                        "looked at (%s): %s: %s", interface, how, reported_name(error), first)
        elif n == SHOWN_AT_MOST + 1:
            log.warning("polybus: warning: more calls failed with their errors never "
                        "looked at; not shown")
    except Exception:  # pragma: no cover - (at interpreter exit, logging may be gone)
        pass


def _alike(error: PolybusError, first: str) -> str:
    """What makes ``error`` (its message's first line, ``first``) the same as another:
    its text without the replica that raised it, so that one failure of a loop of calls
    spread over replicas is said once and counted, not once a replica in turn."""
    if isinstance(error, RemoteException):
        return f"{error.remote_type}: {error.remote_message}"
    replica = getattr(error, "replica", "")
    if not isinstance(replica, str) or not replica:
        return first
    return re.sub(rf"(?<![\w.-]){re.escape(replica)}(?![\w-])", "<replica>", first)


def _say_again(said: tuple[str, str, str] | None, again: int) -> None:
    """One line for ``again`` more errors the same as ``said`` (a loop of calls that all
    failed alike was five identical lines, then "more ... not shown")."""
    if said is None or not again:
        return
    calls = f"call{'' if again == 1 else 's'}"
    try:
        log.warning("polybus: warning: %d more %s to %r failed the same way (%s), never "
                    "looked at", again, calls, said[0], said[1])
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
    global _again
    with _lock:
        again, _again = _again, 0
    if _shown <= SHOWN_AT_MOST:  # (past it, "more ... not shown" said them)
        _say_again(_last, again)


def hush() -> None:
    """The program raised: the run ends with that exception. Errors no one looked at are
    counted, not said, until the next run (`note_hushed` says them in one line)."""
    global _hush
    _hush = True


def note_hushed(exc: BaseException, session: Session, running: int = 0) -> None:
    """At the end of a run the program's ``exc`` ended (`hush`; the session closed, so no
    call fails after): add to ``exc`` one note that counts the calls that failed and that
    no one looked at, by type ("the same way" when all are of ``exc``'s type), and one
    that counts the ``running`` calls, still under way then, whose outcome no one will
    know, unless the logger is silenced."""
    if running and log.isEnabledFor(logging.WARNING):
        outcomes = ("its outcome, a failure included, is" if running == 1 else
                    "their outcomes, failures included, are")
        exc.add_note(f"{plural(running, 'call')} the program made "
                     f"{'was' if running == 1 else 'were'} still under way when it ended "
                     f"and went unfinished ({outcomes} not known)")
    for bt in session.batchers:  # (a batch's errors: counted in _hushed, as said)
        for b in list(bt.failed):
            b.say_unseen()
    global _again
    with _lock:
        left = (_failed - _looked) + _hushed
        if _again and _last is not None:  # (the same error again, counted, not yet said)
            left[_last[1]] += _again
        _again = 0
    n = sum(left.values())
    if not n or not log.isEnabledFor(logging.WARNING):
        return
    calls = f"call{'' if n == 1 else 's'}"
    if set(left) == {reported_name(exc)}:
        exc.add_note(f"{n} more {calls} failed the same way ({reported_name(exc)}), never "
                     "looked at before the run ended")
        return
    kinds = next(iter(left)) if len(left) == 1 else ", ".join(
        f"{k} {t}" for t, k in left.most_common())
    exc.add_note(f"{n} {calls} failed with errors never looked at before the run ended "
                 f"({kinds})")
