"""Placing an aggregating binding's closed batch (client/batching.py): which replica it
goes to, what it is written as, and whether it is written now.

Under ``async-demand(N)`` a batch goes to the live replica with the fewest batches in
flight, below N; under plain async the binding's balance policy picks. With operand
caching the binding's Comm names the batch's cached operands for that replica, after a
Put of each it lacks (client/operands.py); what the batch's calls' consumers ask of the
replica goes just before it (fwdbatch.py). While the replica still has two sent
batches to answer, the batch is held and written with up to ``HOLD`` - 1 others: fewer
writes, and fewer wake-ups of a replica that is busy anyway. Writing, and a batch that
cannot be sent as it is, are batchsend.py's.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from polybus.client.batchsend import refuse, unplace, write
from polybus.client.fwdbatch import placed
from polybus.errors import ConnectionLostError
from polybus.wire.messages import Message

if TYPE_CHECKING:
    from polybus.client.batchcalls import Pending
    from polybus.client.batching import Batcher
    from polybus.client.operands import Pushes

__all__ = ["BYTES_CALLS", "HOLD", "place", "place_queued", "wait_for_room"]

HOLD = 4  # batches written together at most, while their replica is busy anyway
BYTES_CALLS = 1024  # the calls a batch closed by bytes is counted as (`wait_for_room`)


def wait_for_room(bt: Batcher) -> None:
    """Bounded as a single call's demand backlog is (dispatch.py, ``BACKLOG_BOUND``
    calls): a program's call that leaves more batches waiting for room than that many
    calls make (a batch counted as its ``aggregate`` calls, one closed by bytes as
    ``BYTES_CALLS``) waits for answers to make room. Called without ``bt``'s lock: the
    read that takes answers in places queued batches under it."""
    from polybus.client import dispatch

    most = max(1, dispatch.BACKLOG_BOUND // min(bt.count, BYTES_CALLS))
    while len(bt.backlog) > most:
        bt.reactor.step()


def _pick(bt: Batcher) -> int | None:
    """The replica ``bt``'s next batch goes to: under async-demand the live one with
    fewest batches in flight, below its window; else the balance policy's pick."""
    links, inflight = bt.links, bt.inflight
    if bt.demand:
        best = None
        for i, lk in enumerate(links):
            n = inflight[i]
            if not lk.dead and n < bt.window and (best is None or n < inflight[best]):
                best = i
        return best
    return bt.d.policy.pick([not lk.dead for lk in links])


def place(bt: Batcher, b: Pending, send: bool = True) -> bool:
    """Send ``b`` to a replica with room; False (nothing done) if none has room, or none
    is live where lost replicas are looked for again (it waits: client/rejoin.py).
    ``send`` False (the linger timer): what is to be written is left in ``bt.held``."""
    i = _pick(bt)
    if i is None:
        if not any(not lk.dead for lk in bt.links):
            if bt.d.rejoins:  # (it waits for one to come back: client/rejoin.py)
                return False
            b.set_error(ConnectionLostError(f"every replica of {bt.interface} is gone"))
            return True
        return False
    link = bt.links[i]
    b.link = link
    bt.d.counts.tried(b, len(b.rows()))  # (sent again after a loss: each of its calls)
    b.placed = time.monotonic()  # (its calls' timeout counts from here)
    link.outstanding[b.id] = b  # type: ignore[assignment]
    bt.inflight[i] += 1
    h = bt.held[i]
    msgs: list[Message]
    # From the linger timer (send False) prefetch's Puts to the other replicas are
    # held with their batches, not sent: a send through the reactor may read, and
    # find a replica lost, whose batches this timer cannot requeue (lost() waits for
    # the timer to step aside: it waited for itself, for ever).
    pushes: Pushes | None = None if send else []
    if bt.comm is None or b.by_value(bt.room, bt.most):
        msgs = [b.message()]
    else:
        try:
            msgs = bt.comm.batch_messages(b, link, pushes)
        except (TypeError, ValueError) as exc:  # an operand that cannot be hashed
            if not refuse(bt, b, link, exc):
                raise
            if b.done:  # (none of its calls could be sent)
                unplace(bt, b, link)
                _hold(bt, pushes)
                return True
            msgs = bt.comm.batch_messages(b, link, pushes)
    _hold(bt, pushes)
    alone = len(msgs) == 1  # (with Puts or Drops it is written now)
    if b.entries is not None:
        # What its calls' consumers ask of it, just before it (fwdbatch.py): read by
        # the replica before the batch runs (and answers: worker/forwarding.py).
        h.extend(placed(b, link))
    h.extend(msgs)
    # While the replica has two sent batches still to answer, this one waits to be
    # written with up to HOLD-1 others: fewer writes (and wake-ups of the replica).
    if not send or (alone and len(h) < HOLD and bt.inflight[i] - len(h) >= 2):
        return True
    bt.held[i] = []
    write(bt, link, h)
    return True


def place_queued(bt: Batcher) -> None:
    """(The lock held) queued batches to replicas with room, oldest first."""
    while bt.backlog:
        b = bt.backlog[0]
        if not place(bt, b):
            return
        # (by identity: placing may read answers, and a batch given back by a steal or
        # lost with its replica may have been put first meanwhile)
        if bt.backlog[0] is b:
            bt.backlog.popleft()
        else:
            bt.backlog.remove(b)


def _hold(bt: Batcher, pushes: Pushes | None) -> None:
    """Prefetch's Puts to other replicas, written with what is held for them."""
    if pushes:
        for other, put in pushes:
            j = bt._index.get(id(other))
            if j is not None:
                bt.held[j].append(put)
