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
is placed anew, and asked anew.

Once the batch is answered (or fails, or the call is given up on) the entry takes its
call's outcome (`settle`) and the Forwarder repairs what the replica did not send, as
for any producer. Unlike a single call's, a forwarded value whose replica dies keeping
it is not made again (the batch's other answers are in, and nothing re-runs one call
of a batch alone): the consumers still needing it fail with a WorkerDiedError.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polybus.client.calls import CallRecord
from polybus.wire.codec import Ref
from polybus.wire.messages import Cancel, Forward, Keep, Message

if TYPE_CHECKING:
    from polybus.client.batchcalls import BatchPromise, Pending
    from polybus.client.calls import ReplicaLink
    from polybus.client.forward import Edge, Forwarder

__all__ = ["EntryRecord", "cancel", "claim", "entry_of", "fetched", "forward_msg", "keep_msg",
           "placed", "running", "settle", "unsent"]


class EntryRecord(CallRecord):
    """Call ``index`` of aggregated batch ``batch`` as a producer (its promise passed to
    a forwarding call). Its outcome is set when its batch's is (`settle`); ``link`` is
    where its batch was last placed, ``bid`` the batch's id there."""

    __slots__ = ("batch", "bid", "index")

    def __init__(self, batch: Pending, index: int) -> None:
        from polybus.client.dispatch import _ids

        super().__init__(next(_ids), batch.batcher.d, [], None, 0.0)
        self.batch: Pending | None = batch  # (None once settled: no cycle left with it)
        self.bid = batch.id
        self.index = index
        self.link = batch.link


def entry_of(p: BatchPromise) -> EntryRecord:
    """The record of ``p``'s call as a producer (made on first use)."""
    b, i = p._rec, p._i
    entries = b.entries
    if entries is None:
        entries = b.entries = {}
    rec = entries.get(i)
    if rec is None:
        rec = entries[i] = EntryRecord(b, i)
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
        if link is None or link.dead or there is not b:
            return False
        p.link, p.bid = link, b.id
        return True
    link = p.link
    return link is not None and not link.dead and p.id in link.outstanding


def forward_msg(p: CallRecord, pkey: str, key: str, to: str, hold: bool = False) -> Forward:
    if type(p) is EntryRecord:
        return Forward(p.bid, pkey, key, to, p.index, hold=hold)
    return Forward(p.id, pkey, key, to, hold=hold)


def keep_msg(p: CallRecord, pkey: str, key: str, release: bool = False) -> Keep:
    if type(p) is EntryRecord:
        return Keep(p.bid, pkey, key, release, p.index)
    return Keep(p.id, pkey, key, release)


def cancel(p: CallRecord) -> Cancel | None:
    """The ``Cancel`` that makes ``p``'s replica forget what it was asked for ``p``
    (answered, by value or failed, before it read the request); None while ``p``'s
    batch still runs there (one of its calls given up on: a Cancel would drop the
    batch; the replica sends that value on when it comes, to a key taken already)."""
    if type(p) is EntryRecord:
        b = p.batch
        return Cancel([p.bid]) if b is None or b.done else None
    return Cancel([p.id])


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
    for rec in list((b.entries or {}).values()):
        if rec.done:
            continue
        rec.link, rec.bid = link, b.id
        rec.attempts = b.attempts
        f = getattr(rec.dispatcher.comm, "forwarder", None)
        if f is None:
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
                    out.append(Forward(b.id, pkey, e.key, to.channel.peer, rec.index,
                                       hold=e.hold))
                elif not e.kept:
                    e.asked = e.kept = True
                    f.keeps += 1
                    out.append(Keep(b.id, pkey, e.key, False, rec.index))
    return out


def settle(b: Pending) -> None:
    """``b`` was answered, failed, or some of its calls were given up on: each of its
    forwarded calls that now has its outcome takes it, and the Forwarder connects
    (or fails) its consumers (Forwarder.answered)."""
    entries = b.entries
    if not entries:
        return
    late, fails = b.late or {}, b.fails or {}
    for i, rec in list(entries.items()):
        if rec.done:
            if b.done:
                rec.batch = None  # (kept while its batch ran on: `cancel` looks at it)
            continue
        error = late.get(i) or b.error or fails.get(i)
        if error is not None:
            rec.set_error(error)  # (the same error: seen by one, seen by both)
        elif b.done:
            rec.set_value(b.values[i])
        else:
            continue
        if b.done:
            rec.batch = None  # (no cycle left between the batch and its entries)
        f = getattr(rec.dispatcher.comm, "forwarder", None)
        if f is not None:
            f.answered(rec)
