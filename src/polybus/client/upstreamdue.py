"""The deadlines of the calls a waited-for call needs the values of.

A pipeline program may wait for its last stage alone: ``wait(g(f(x)))``. ``g`` needs
``f``'s value (forwarded replica to replica, client/forward.py, or sent on through the
client, client/awaiting.py), so while ``f`` is unanswered, so is ``g``. A wait looks
at the deadline of the call it waits for; this is how it looks at those upstream of it
too (transitively: ``g(k(f(x)))``, ``k`` with no timeout of its own): a producer past
its interface's ``timeout`` is given up as a wait for it would give it up
(`calls.expire`: what has arrived is taken first), and its consumers then fail with
the upstream CallTimeoutError, as they do when the program waited for the producer.

Only a session with a binding that has a timeout, and consumers of promises, sets the
reactor's ``upstream`` (`watch_upstream`): other waits pay nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polybus.client.calls import CallRecord, expire

if TYPE_CHECKING:
    from polybus.client.session import Session

__all__ = ["LOOK_S", "give_up_due", "watch_upstream"]

LOOK_S = 0.25  # a wait with such calls upstream looks at them at least this often


def watch_upstream(session: Session) -> None:
    """Have ``session``'s waits look at the deadlines upstream of what they wait for,
    if any binding has a timeout and calls may wait for other calls' values."""
    forwarder = getattr(session, "forwarder", None)
    awaiting = session.awaiting
    if (forwarder is None and awaiting is None) or not any(
            d.timeout for d in session.dispatchers.values()):
        return

    def upstream(rec: CallRecord) -> list[Any]:
        """The unanswered calls ``rec`` needs the values of, to any depth, whose binding
        has a timeout: call records, or promises (an aggregated call's)."""
        found: list[Any] = []
        seen = {id(rec)}
        todo = [rec]
        while todo:
            r = todo.pop()
            above: list[Any] = []
            if forwarder is not None:
                above += [e.producer for e in forwarder.deps.get(r.id, ())]
            if awaiting is not None and (w := awaiting.calls.get(r.id)) is not None:
                above += [_record(p) for _, p in w.promises]
            for u in above:
                if id(u) in seen or _answered(u):
                    continue
                seen.add(id(u))
                if isinstance(u, CallRecord):
                    todo.append(u)
                    if u.dispatcher.timeout:
                        found.append(u)
                else:  # (an aggregated call's promise: its batch keeps the deadline)
                    found.append(u)
        return found

    session.reactor.upstream = upstream


def _record(p: Any) -> Any:
    """A call's promise as its record; an aggregated call's as itself."""
    r = getattr(p, "_rec", None)
    return r if isinstance(r, CallRecord) else p


def _answered(u: Any) -> bool:
    return bool(u.done) if isinstance(u, CallRecord) else bool(u._answered)


def give_up_due(ups: list[Any], poll: Callable[[], None],
                within: float | None = None) -> float | None:
    """Give up each of ``ups`` (from ``upstream``) past its deadline now; return how
    long a wait may sleep before looking again: ``within`` (None: for ever) or sooner,
    at the next of their deadlines, and at most LOOK_S while one has any (a call held
    at the client begins its count when written)."""
    now = time.monotonic()
    nearest = math.inf
    for u in ups:
        if _answered(u):
            continue
        if isinstance(u, CallRecord):
            expire(u, u.dispatcher.timeout, now, poll)
            if not u.done:
                nearest = min(nearest, LOOK_S, max(0.0, u.deadline - now)
                              if u.deadline and u.link is not None else LOOK_S)
        else:
            u._expire(now)
            nearest = min(nearest, LOOK_S)
    if nearest == math.inf:
        return within
    return nearest if within is None else min(within, nearest)
