"""The calls a program made and never waited for are run to their end when it returns.

A client's entrypoint may return with calls still under way: sent, held to be written
with the next ones, in an ``async-demand`` backlog or an open aggregated batch. Stopping
the replicas then would drop them without a word (a program that fires a call and
returns, ``log_event(x); return``, saw it run or not by luck). So the run takes in their
answers first, as ``concurrent.futures``' shutdown waits for its futures. An interface's
``timeout`` holds here as in a wait: a call not answered by its deadline (that long after
it was written to a replica) fails with CallTimeoutError (the replica may still run it;
its answer is dropped). Losing every replica fails what is left. An error nobody will look at is said (unseen.py), and
a drain that lasts says what it waits for, once.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from polybus.client.batchcalls import Pending, Slot
from polybus.client.calls import give_up, overdue
from polybus.client.pump import enter, leave

if TYPE_CHECKING:
    from polybus.client.session import Session

__all__ = ["SAY_AFTER_S", "arrived", "drain", "under_way"]

log = logging.getLogger("polybus.client")
STEP_S = 0.5  # one read at most, then look again (a backlog refills between reads)
SAY_AFTER_S = 2.0  # a drain still going this long says what it waits for


def _running(x: object) -> bool:
    """An outstanding entry still awaited: a call, or a batch with a call not given up on."""
    if isinstance(x, Pending):
        return not x.done and (x.late is None or len(x.late) < len(x.args or x.values))
    return not getattr(x, "done", False)


def under_way(session: Session) -> int:
    """Calls of ``session`` not answered yet: outstanding or held on a live replica,
    backlogged, in a batch not yet written, or waiting at the client for the values of
    the promises passed to them (awaiting.py)."""
    links = [lk for lk in session.reactor.links if not lk.dead]
    return (sum(sum(map(_running, lk.outstanding.values())) + len(lk.held) for lk in links)
            + sum(d.backlogged for d in session.dispatchers.values())
            + (len(session.awaiting) if session.awaiting is not None else 0)
            + sum(bt.unwritten for bt in session.batchers))


def _expire(session: Session, now: float) -> None:
    """Give up on the outstanding calls whose deadline is past at ``now``, as a wait
    would have (what has arrived taken first)."""
    due = [x for lk in session.reactor.links for x in list(lk.outstanding.values())
           if _running(x) and overdue(x, now)]
    if not due:
        return
    session.reactor.poll()
    now = time.monotonic()
    why = " (a call never waited for, when the program returned)"
    for x in due:
        limit = x.dispatcher.timeout
        if limit is None or not _running(x) or not overdue(x, now):
            continue
        if isinstance(x, Pending):  # (each call of a batch, as a wait's Slot is)
            for i in range(len(x.args)):
                give_up(Slot(x, i), limit, why)
        else:
            give_up(x, limit, why)


def arrived(session: Session) -> None:
    """The program raised, and its run ends: the answers already here are taken in
    (never waiting, nothing written), so that a call whose failure had come is counted
    as failed, not as still under way, in the notes on that exception (unseen.py)."""
    enter(session.gate)  # (the pump stands back)
    try:
        session.reactor.take_arrived()
    finally:
        leave(session.gate)


def drain(session: Session) -> None:
    """Write what is held and read answers until no call of ``session`` is under way."""
    enter(session.gate)  # (the pump stands back: this thread moves everything now)
    try:
        _drain(session)
    except KeyboardInterrupt as exc:  # (Ctrl-C, SIGTERM, --timeout: what it waited for)
        exc.add_note(f"it was waiting for {under_way(session)} call(s) the program made "
                     "and never waited for, after its entrypoint returned")
        raise
    finally:
        leave(session.gate)


def _drain(session: Session) -> None:
    reactor = session.reactor
    start = time.monotonic()
    said = False
    while True:
        reactor.flush_all()
        n = under_way(session)
        if not n:
            return
        now = time.monotonic()
        waited = now - start
        _expire(session, now)
        if waited >= SAY_AFTER_S and not said:
            said = True
            log.warning("polybus: the program returned with %d call(s) under way that it "
                        "never waited for; taking in their answers before the run ends "
                        "(an interface's timeout bounds this; Ctrl-C stops it)", n)
        reactor.step(None, STEP_S)
