"""``p.cancel()``: a call that has not started never runs (concurrent.futures' meaning).

Where the call is decides what a cancel does:

- answered, failed or cancelled already: nothing changes; True only if it was cancelled
  (a second cancel of a cancelled call says True, as concurrent.futures does). So is a
  call answered once whose value, kept on a replica since lost, is being made again
  (forwarding: client/fwdlost.py): it has run.
- waiting at the client: in its binding's ``async-demand`` backlog (also a call put back
  there after its replica was lost), waiting for the values of the promises passed to
  it (client/awaiting.py), or held to be written with the next calls for its replica
  (client/sending.py `hold`, and the general path's aggregation): taken out, never
  written; True.
- written to its replica: the replica is asked (``Revoke``) and its answer decides. It
  drops the call if no handler has taken it yet (still queued, or held there for
  forwarded values) and says so (``Released``): True. A handler took it first (it is
  running, or has run: its answer is on its way): False, and its answer comes as
  usual. The replica decides under the lock its handlers take calls with, so a cancel
  racing the call's start is one or the other, never both. The replica answers at once,
  whatever it is running (its standby thread reads control messages during long
  calls), so the wait is a round trip. It is bounded all the same (`CANCEL_WAIT_S`): a
  replica reads nothing more of a connection while its queue is full under ``overflow =
  "block"`` (until a call ends and makes room), and a silent replica may take a
  heartbeat or three to be found dead. Past it the cancel says False, as it cannot say
  True for certain, and False must hold: should the replica's answer come later
  saying it dropped the call, the call is placed again (client/giveback.py) and runs.

After a True, nothing of the call is left: it is out of its replica's queue (or never
reached it), of the link's calls and of its binding's count in flight (its place under
``async-demand(N)`` goes to the next call), and no answer is expected for it. Its
promise is done and `cancelled`; using its value raises `polybus.CancelledError`
(made seen: a cancelled call is never said as an error no one looked at,
client/unseen.py). Its binding counts it (``cancelled``: client/counts.py).

Forwarding (client/forward.py). A cancelled consumer is to its producers a consumer
given back by its replica that then ended (client/fwdmove.py): what they keep for it is
let go, and a value sent to its replica for it is dropped there; the producers and
their other consumers go on. A cancelled producer fails each consumer that needed its
value with a `CancelledError` naming it (`cancelled_upstream`), as a failed producer
fails them: at the client if the consumer waits there, else by its replica, told
that the value will never come. An aggregated call (client/batchcalls.py) can be
cancelled while its batch has not left the client: `cancel_slot`.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from typing import TYPE_CHECKING, Any

from polybus.client.calls import late, text_of, told
from polybus.client.fwdmove import moved
from polybus.client.giveback import place_again
from polybus.client.pump import enter, leave
from polybus.client.unseen import seen
from polybus.errors import CancelledError
from polybus.wire.messages import Call, Released, Revoke

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.reactor import Reactor

__all__ = ["CANCEL_WAIT_S", "Asked", "cancel_call", "cancelled_upstream", "is_cancelled",
           "released"]

# The longest `cancel_call` waits for a replica's answer to its Revoke (see above).
CANCEL_WAIT_S = 2.0
_TRIES = 3  # a call that moves while asked (given back, its replica lost) is asked again
_reqs = itertools.count(1 << 41)  # apart from the stats, fetch and steal requests
_lock = threading.Lock()  # a Revoke's answer against its waiter giving up


class Asked:
    """A Revoke sent for ``rec`` on ``link``, by its ``req``, in `Reactor.revoking` until
    answered. ``late``: the cancel stopped waiting; its answer is acted on when it comes.
    ``moved``: the replica gave the call back meanwhile (to a Steal, or to an earlier
    Revoke whose late answer places it again: `released`), so its answer, that it has
    no such call, says nothing of where the call is now."""

    __slots__ = ("late", "link", "moved", "rec")

    def __init__(self, link: ReplicaLink, rec: CallRecord) -> None:
        self.link, self.rec, self.late, self.moved = link, rec, False, False


def is_cancelled(error: object) -> bool:
    """``error`` says its call was cancelled itself (not a call it needed: upstream)."""
    return type(error) is CancelledError and not error.upstream


def cancel_call(rec: CallRecord, reactor: Reactor) -> bool:
    """Cancel ``rec``'s call if it has not started (see the module docstring)."""
    gate = reactor.gate
    enter(gate)  # (the pump does not move calls meanwhile: client/pump.py)
    try:
        for _ in range(_TRIES):
            if rec.done:
                return is_cancelled(rec.error)
            if reactor.closed or getattr(rec, "reran", False):
                return False  # (its run ended: it never will be answered; or it has run)
            link = rec.link
            aw = rec.dispatcher.awaiting
            if aw is not None and aw.withdraw(rec):
                return _cancelled(rec)
            if link is None or link.dead or link.outstanding.get(rec.id) is not rec:
                return _cancelled(rec)  # in the backlog (refill skips it: done)
            if _unhold(rec, link):
                return _given_back(rec, link)
            said = _revoke(rec, link, reactor)
            if said is not None:
                return said
        return False
    finally:
        leave(gate)


def _unhold(rec: CallRecord, link: ReplicaLink) -> bool:
    """``rec``'s call taken out of what is held to be written to ``link``, if there."""
    with link.lock:  # (against a write or an ask on another thread: calls.py)
        held = link.held
        for j, m in enumerate(held):
            if type(m) is Call and m.id == rec.id:
                del held[j]
                if link.trail:  # (nothing is asked of it there now: fwdbatch.py's `ask`)
                    link.trail = [t for t in link.trail if t[0] is not rec]
                break
        else:
            return False
    rec.dispatcher.uncount(rec, link)
    return True


def _revoke(rec: CallRecord, link: ReplicaLink, reactor: Reactor) -> bool | None:
    """Ask ``link``'s replica to drop ``rec`` and wait for its answer: whether it did;
    None if the call moved meanwhile (its replica lost, or it was given back and placed
    again): asked again, where it is now."""
    req = next(_reqs)
    asked = Asked(link, rec)
    with _lock:
        for r in [r for r, a in reactor.revoking.items() if a.link.dead]:
            del reactor.revoking[r]  # (a late answer that never came: its replica went)
        reactor.revoking[req] = asked
    try:
        msg = reactor.request(link, Revoke([rec.id], req), req, CANCEL_WAIT_S)
    except BaseException:  # (Ctrl-C while it waits: the cancel said nothing, so the call
        _give_up(reactor, link, req, asked)  # runs, as after a False)
        raise
    with _lock:
        if msg is None:
            msg = reactor.replies.pop(req, None)
        if msg is None and not link.dead:
            asked.late = True  # (the call runs after all, if its replica drops it: `released`)
            return False
        reactor.revoking.pop(req, None)
    if msg is None:
        return None
    if type(msg) is not Released or rec.id not in msg.ids:
        # Given back meanwhile (a Steal's answer, or an earlier Revoke's late one, came
        # first) and placed again: in the backlog (its link as it was), or written anew,
        # to this replica or another.
        if not rec.done and (asked.moved or link.outstanding.get(rec.id) is not rec):
            return None  # (asked again, where it is now)
        return False  # (running, or answered: its answer comes as usual)
    late(link, rec.id)  # (given up on meanwhile: no answer will come, its place is free)
    if link.outstanding.get(rec.id) is not rec:  # (its replica lost since it answered:
        return None if not rec.done else is_cancelled(rec.error)  # put back, asked again)
    rec.dispatcher.uncount(rec, link)
    return _given_back(rec, link)


def _give_up(reactor: Reactor, link: ReplicaLink, req: int, asked: Asked) -> None:
    """The cancel stops waiting for the answer to Revoke ``req`` without a word (the
    wait raised): its answer, come already or to come, is acted on as a late one."""
    with _lock:
        if reactor.revoking.get(req) is not asked:
            return
        asked.late = True
        got = reactor.replies.pop(req, None)
    if type(got) is Released:
        released(reactor, link, got)


def released(reactor: Reactor, link: ReplicaLink, msg: Released) -> bool:
    """A replica's answer to a Revoke (False: not one; a Steal's). While the cancel waits
    for it, it is the cancel's (`_revoke`); after, a call it says dropped is placed
    again, as the cancel said it could not cancel it. A call given back either way that
    another cancel is asking this replica about has moved (`Asked.moved`)."""
    with _lock:
        asked: Asked | None = reactor.revoking.get(msg.req)
        if asked is None:
            _moved(reactor, link, msg.ids)
            return False
        if not asked.late:
            reactor.replies[msg.req] = msg
            return True
        del reactor.revoking[msg.req]
        if asked.rec.id in msg.ids:  # (placed again below: a cancel asking it again
            _moved(reactor, link, [asked.rec.id])  # looks where it went)
    rec = asked.rec
    again = []
    for cid in msg.ids:
        # Taken out first, as an answer takes its call (migrate.py `released`): one
        # given up on meanwhile by another thread is freed here, its give-up finding
        # it gone; one the give-up took out first is freed as abandoned (`late`).
        if cid == rec.id and link.outstanding.get(cid) is rec and rec.dispatcher.uncount(
                rec, link):
            if not rec.done:
                again.append(rec)
            elif rec.dispatcher._backlog:  # (its place is free for the next, as `freed`)
                rec.dispatcher.reactor.work_left()
        else:
            late(link, cid)
    place_again(link, again)
    return True


def _moved(reactor: Reactor, link: ReplicaLink, ids: list[int]) -> None:
    """(``_lock`` held) ``link``'s replica gave calls ``ids`` back: a cancel asking it
    about one of them is told so (`Asked.moved`)."""
    for a in reactor.revoking.values():
        if a.link is link and a.rec.id in ids:
            a.moved = True


def _given_back(rec: CallRecord, link: ReplicaLink) -> bool:
    """``rec``, placed on ``link`` and taken back unrun (its count there taken back),
    ends cancelled: as a call its replica gave back, for its forwarding edges."""
    f = getattr(rec.dispatcher.comm, "forwarder", None)
    if f is not None:
        moved(f, rec, link, None)
    return _cancelled(rec)


def _cancelled(rec: CallRecord) -> bool:
    """``rec`` ends cancelled, never run: its consumers and what it asked of others are
    settled as for a call given up on before it was sent."""
    d = rec.dispatcher
    said = text_of(rec)
    error = seen(CancelledError(f"the call {said} was cancelled before it ran",
                                interface=d.interface, call=said))
    if rec.done:
        return is_cancelled(rec.error)
    rec.error = error
    rec._let_go()
    d.counts.cancelled += 1
    told(d, rec)  # (its consumers waiting at the client: client/awaiting.py)
    d.forget(rec, sent=False)  # (its forwarding edges, what its replica keeps)
    if d._suspects:  # (lost with a replica, and waiting to run again: client/backlog.py;
        d._suspects.pop(rec.id, None)  # left, every answer after looked it up)
    backlog = d._backlog
    while backlog and backlog[0][2].done:  # (the rest as refill meets them)
        heapq.heappop(backlog)
    if backlog:
        d.refill()  # (a place freed: the next call takes it)
    return True


def cancelled_upstream(interface: str, call: str, cause: Any) -> CancelledError:
    """The error of a call to ``interface`` (``call``: it as text) that needed the value
    of a cancelled call: ``cause``, that call's CancelledError, or the text naming it
    (a consumer's replica says it so: worker/fwdheld.py)."""
    root = (cause.upstream or cause.call or str(cause)) if isinstance(cause, CancelledError) \
        else str(cause)
    error = CancelledError(
        f"the call {call or interface} was not run: it needed the value of the call "
        f"{root}, which was cancelled", interface=interface, call=call, upstream=root)
    seen(error)  # (never said as unseen: the program cancelled what it needed)
    return error
