"""Forwarding the promise of an aggregated call (client/forward.py, client/batching.py).

An aggregated call has no record of its own: it is call ``i`` of a batch (`Pending`),
and its promise a `BatchPromise`. Passed unanswered to a call whose binding forwards,
it gets an `EntryRecord`: the producer the Forwarder's edges name, as a single call's
record is. Its replica is asked by ``Forward(batch id, pkey, key, to, index=i)`` (or
``Keep``, for a consumer still at the client) to send the value on, and answers
``Ref("fwd", [...])`` in that call's slot of the ``BatchResult``.

The consumer's call goes at once, whatever its producer's batch is doing; the program
never waits for the batch. While the batch is open, queued or held back at the client,
its replica is unknown: the request goes when it is placed (`placed`, from the
Batcher's `_place`, which writes it with the batch), or, if the consumer is placed after
that, from the consumer's side (`claim`), as for a single call; each edge is asked once
per placing (`_marks`, the Forwarder's lock: the linger timer may place a batch while
the program makes the call that consumes it). A batch that runs again (its replica lost)
is placed anew, and asked anew (`requeued`).

A batch with a call that cannot be sent carries only the others (``Pending.only``): a
request names its call by its place among the rows sent (`row`), and none goes for a
call not sent (batchsend.py's `write` re-maps those written with the batch, `remapped`).
What the consumer's side asks of a placed batch's replica goes through its Batcher
(`ask`): after the batch, if it is still held back at the client, and never from the
linger timer's thread, which only writes (client/linger.py). One that waits to be
written (the timer writing) while the batch is given back by a Steal and moves whole
is not written to the replica it left (`_still`): the move asks the new one.

Once the batch is answered (or fails, or the call is given up on) the entry takes its
call's outcome (`settle`) and the Forwarder repairs what the replica did not send, as
for any producer (never on the linger timer's thread: a batch it refuses is settled by
the program's next read or the pump's turn). A call given up on while its batch runs
has what its replica keeps for it let go (`undo`). Unlike a single call's, a forwarded value whose replica dies keeping
it is not made again (the batch's other answers are in, and nothing re-runs one call
of a batch alone): the consumers still needing it fail with a WorkerDiedError.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from polybus.client.calls import CallRecord
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Cancel, Forward, Keep, Message

if TYPE_CHECKING:
    from polybus.client.batchcalls import BatchPromise, Pending
    from polybus.client.batching import Batcher
    from polybus.client.calls import ReplicaLink
    from polybus.client.forward import Edge, Forwarder

__all__ = ["EntryRecord", "ask", "claim", "entry_of", "fetched", "forward_msg", "keep_msg",
           "listed", "placed", "remapped", "requeued", "running", "settle", "trailing", "undo",
           "unsent"]

# Who makes an entry, and who gives it its outcome: the thread that files its batch's
# answer may do so while a program thread makes the entry (`entry_of`), and each entry
# is settled once, by whichever comes second (`settle`).
_lock = threading.Lock()


class EntryRecord(CallRecord):
    """Call ``index`` of aggregated batch ``batch`` as a producer (its promise passed to
    a forwarding call). Its outcome is set when its batch's is (`settle`); ``link`` is
    where its batch was last placed, ``bid`` the batch's id there."""

    __slots__ = ("batch", "batcher", "bid", "index", "sent_as")

    def __init__(self, batch: Pending, index: int) -> None:
        from polybus.client.dispatch import _ids

        super().__init__(next(_ids), batch.batcher.d, [], None, 0.0)
        self.batch: Pending | None = batch  # (None once settled: no cycle left with it)
        self.batcher: Batcher = batch.batcher
        self.bid = batch.id
        self.index = index
        self.sent_as: int | None = index  # its row once settled (`row`)
        self.link = batch.link


def row(rec: EntryRecord) -> int | None:
    """The place of ``rec``'s call among the rows its batch's CallBatch carries (the
    index a Forward or Keep names on the wire), or None if it is not sent (it could not
    be: batchsend.py's `refuse`, which leaves ``only`` the rows sent)."""
    b = rec.batch
    if b is None:
        return rec.sent_as
    return _row(b, rec.index)


def _row(b: Pending, i: int) -> int | None:
    only = b.only
    if only is None:
        return i
    k = bisect_left(only, i)  # (in order: refuse keeps them so)
    return k if k < len(only) and only[k] == i else None


def entry_of(p: BatchPromise) -> EntryRecord:
    """The record of ``p``'s call as a producer (made on first use)."""
    b, i = p._rec, p._i
    with _lock:
        entries = b.entries
        if entries is None:
            entries = b.entries = {}
        rec = entries.get(i)
        if rec is None:
            rec = entries[i] = EntryRecord(b, i)
        # Answered (or given up on) since the caller found it unanswered, by a thread
        # that did not see this entry: settled here (once: `settle`).
        late = b.done or (b.late is not None and i in b.late)
    if late and not rec.done:
        settle(b)
    return rec


def unsent(p: BatchPromise) -> bool:
    """``p``'s value is not at the client: its call is unanswered (and its binding's
    answers may be forwarded), or answered ``Ref`` (forwarded)."""
    b, i = p._rec, p._i
    if not b.done and not (b.late is not None and i in b.late):
        return b.batcher.d.forwards_answers
    if b.error is not None or (b.late is not None and i in b.late) or (
            b.fails is not None and i in b.fails):
        return False
    return type(b.values[i]) is Ref


def fetched(b: Pending, i: int) -> Any:
    """The value of call ``i`` of ``b``, answered ``Ref`` (forwarded): fetched from its
    replica on first use (CallRecord.outcome), then held in its slot."""
    entries = b.entries
    if entries is None or i not in entries:  # (never: only an entry is answered Ref)
        return b.values[i]
    value = entries[i].outcome()
    b.values[i] = value
    return value


def running(p: CallRecord) -> bool:
    """Whether producer ``p`` is unanswered on a live replica, where a Forward for it
    goes (a batch's call: its batch is placed; ``p.link`` is then its replica)."""
    if type(p) is EntryRecord:
        b = p.batch
        if b is None or b.done:
            return False
        link = b.link
        there: Any = link.outstanding.get(b.id) if link is not None else None
        if link is None or link.dead or there is not b or _row(b, p.index) is None:
            return False
        p.link, p.bid = link, b.id
        return True
    link = p.link
    return link is not None and not link.dead and p.id in link.outstanding


def forward_msg(p: CallRecord, pkey: str, key: str, to: str,
                hold: bool = False) -> Forward | None:
    """The ``Forward`` of ``p``'s value; None for a batch's call that is not sent."""
    if type(p) is EntryRecord:
        k = row(p)
        return None if k is None else Forward(p.bid, pkey, key, to, k, hold=hold)
    return Forward(p.id, pkey, key, to, hold=hold)


def keep_msg(p: CallRecord, pkey: str, key: str, release: bool = False) -> Keep | None:
    """The ``Keep`` of ``p``'s value; None for a batch's call that is not sent."""
    if type(p) is EntryRecord:
        k = row(p)
        return None if k is None else Keep(p.bid, pkey, key, release, k)
    return Keep(p.id, pkey, key, release)


def undo(p: CallRecord, pkey: str, keys: list[str]) -> list[Message]:
    """What makes ``p``'s replica forget what it was asked for ``p``'s edges ``keys``,
    once ``p`` has its outcome (answered by value or failed before it read the
    request): ``Cancel``. While ``p``'s batch still runs there (a call of it given up
    on: a Cancel would drop the batch) the Keeps of ``keys`` are released instead, so
    the value is not pinned for consumers that will never take it (one the replica
    pinned already is let go); what it was asked to forward goes to keys taken already."""
    if type(p) is EntryRecord:
        b = p.batch
        if b is None or b.done:
            return [Cancel([p.bid])]
        return [m for key in keys if (m := keep_msg(p, pkey, key, release=True)) is not None]
    return [Cancel([p.id])]


def ask(f: Forwarder, p: CallRecord, link: ReplicaLink,
        make: Callable[[], Message | list[Message] | None]) -> None:
    """Send ``p``'s replica (``link``) what ``make`` builds, after ``p``'s call: a single
    call's now, or, if the call is held to be written with the next ones (aggregated,
    or ``async-demand``'s company), right after it whenever it is written
    (``link.trail``: sending.py's `flush`), so the calls held with it still go together;
    a batch's call's by its Batcher, after the batch (`Batcher.after`), built then (its
    rows final: `row`). A release or a Cancel follows what was asked of the call before
    it too (a release written before the Keep it releases released nothing, and the
    Keep then pinned the value for no one). The look and the addition are one step
    under ``link.lock``: a write of the held calls on another thread meanwhile would
    leave the request behind, for a next write that may never come."""
    if type(p) is EntryRecord:
        b = p.batch
        p.batcher.after(link, make if b is None else lambda: _still(b, link, make))
        return
    if link.held:
        with link.lock:
            if _held(link, p.id):
                link.trail.append((p, make))
                return
    for m in listed(make()):
        f.reactor.send(link, m)


def _held(link: ReplicaLink, cid: int) -> bool:
    """Call ``cid`` is held to be written to ``link`` with the next ones (looked for
    from the end: a call is asked of soon after it is made)."""
    return any(type(m) is Call and m.id == cid for m in reversed(link.held))


def trailing(link: ReplicaLink, trail: list[tuple[CallRecord, Callable[[], Any]]]
             ) -> list[Message]:
    """What is asked of the calls held for ``link`` (``trail``, taken from it: `ask`),
    to be written right after them: none for a call no longer held there (cancelled,
    or failed unwritten)."""
    out: list[Message] = []
    for p, make in trail:
        if not p.done and p.link is link:
            out += listed(make())
    return out


def _still(b: Pending, link: ReplicaLink, make: Callable[[], Message | list[Message] | None]
           ) -> Message | list[Message] | None:
    """What ``make`` builds about batch ``b`` for ``link``, when the Batcher writes it;
    nothing if ``b`` has left ``link`` since (given back by a Steal, it moved whole:
    client/migrate.py). That replica was sent ``Cancel([b.id])`` when it left, and a
    request written after it waited there for a batch that never came; where ``b`` went
    it is asked anew (fwdmove.py's `moved_batch`)."""
    return make() if b.link is link else None


def listed(m: Message | list[Message] | None) -> list[Message]:
    return [] if m is None else m if isinstance(m, list) else [m]


def claim(f: Forwarder, e: Edge) -> bool:
    """``e``'s consumer is placed and its producer is a batch's unanswered call: whether
    a Forward is to go now, from the consumer's side (its batch placed, and not asked
    for this placing already: `placed`)."""
    p, to = e.producer, e.to
    with f._marks:
        if to is None or not running(p) or e.told == (p.link, to):
            return False
        e.asked, e.told = True, (p.link, to)  # type: ignore[assignment]
        return True


def placed(b: Pending, link: ReplicaLink) -> list[Message]:
    """``b`` was just placed on ``link`` (its Batcher's lock held): the Forwards (and
    Keeps, for consumers still at the client) its forwarded calls need, to be written
    with it. Each edge once per placing (`claim`)."""
    out: list[Message] = []
    with _lock:
        entries = list((b.entries or {}).values())
    for rec in entries:
        if rec.done:
            continue
        rec.link, rec.bid = link, b.id
        rec.attempts = b.attempts
        f = getattr(rec.dispatcher.comm, "forwarder", None)
        k = _row(b, rec.index)
        if f is None or k is None:  # (not sent: settled when it can be)
            continue
        pkey = f.pkey(rec)
        with f._marks:
            for e in list(f.edges.get(rec.id, ())):
                to = e.to
                if e.consumer.done:
                    continue
                if to is not None:
                    if to.dead or e.told == (link, to):
                        continue
                    e.asked, e.told = True, (link, to)
                    e.pinned = e.pinned or e.hold  # (its consumer may move: fwdmove.py)
                    out.append(Forward(b.id, pkey, e.key, to.channel.peer, k, hold=e.hold))
                    rec.dispatcher.counts.forwarded += 1  # (the run's report: counts.py)
                elif not e.kept:
                    e.asked = e.kept = True
                    f.keeps += 1
                    out.append(Keep(b.id, pkey, e.key, False, k))
    return out


def remapped(msgs: list[Message], before: dict[int, tuple[Pending, list[int] | None]]
             ) -> list[Message]:
    """The Forwards and Keeps among ``msgs`` (written with batches placed, `placed`), of
    which some calls were refused since (``before``: each batch by id, and the rows it
    was to send when they were made): each names its call by its place among the rows
    sent now, and none is left for a call not sent, or a batch not sent at all."""
    out: list[Message] = []
    for m in msgs:
        if type(m) is not Forward and type(m) is not Keep:
            continue
        got = before.get(m.id) if m.index >= 0 else None
        if got is None:
            out.append(m)
            continue
        b, only = got
        i = m.index if only is None else only[m.index]
        k = None if b.done else _row(b, i)
        if k is not None:
            out.append(msgspec.structs.replace(m, index=k))
    return out


def requeued(b: Pending) -> None:
    """``b`` runs again elsewhere (its replica lost): what its calls' consumers asked of
    the old replica is asked of the new one when it is placed (`placed`)."""
    with _lock:
        entries = list((b.entries or {}).values())
    for rec in entries:
        f = getattr(rec.dispatcher.comm, "forwarder", None)
        if f is None:
            continue
        with f._marks:
            for e in f.edges.get(rec.id, ()):
                e.kept = False  # (kept there, and lost with it)


def settle(b: Pending) -> None:
    """``b`` was answered, failed, or some of its calls were given up on: each of its
    forwarded calls that now has its outcome takes it, and the Forwarder connects
    (or fails) its consumers (Forwarder.answered)."""
    if not b.entries:
        return
    bt = b.batcher
    if threading.current_thread() is bt._timer:
        # The linger timer refused it (or found no replica left): what the Forwarder
        # then sends goes from the program's next read or the pump's turn.
        bt.unsettled.append(b)
        return
    late, fails = b.late or {}, b.fails or {}
    now: list[EntryRecord] = []
    with _lock:
        for i, rec in list((b.entries or {}).items()):
            if not rec.done:
                error = late.get(i) or b.error or fails.get(i)
                if error is not None:
                    rec.set_error(error)  # (the same error: seen by one, seen by both)
                elif b.done:
                    rec.set_value(b.values[i])
                else:
                    continue
                now.append(rec)
            if b.done and rec.batch is not None:
                # (kept while its batch ran on: `undo` and `row` look at it; then no
                # cycle is left between the batch and its entries)
                rec.sent_as, rec.batch = row(rec), None
    for rec in now:
        f = getattr(rec.dispatcher.comm, "forwarder", None)
        if f is not None:
            f.answered(rec)
