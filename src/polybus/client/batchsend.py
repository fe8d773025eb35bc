"""Writing an aggregating binding's placed batches, and what is done with a batch that
cannot be sent as it is, or whose replica is lost (client/batching.py places them).

A batch that cannot be named or encoded is not failed whole: each of its calls that
cannot be sent on its own fails alone, with the error the unaggregated call would give
(unsendable.py), and the batch goes on with the others, or is taken back from its
replica (``unplace``) if none is left.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import Pending
from polybus.client.calls import told
from polybus.client.fwdbatch import listed, remapped, requeued, settle
from polybus.client.lostnotes import suspect_note
from polybus.client.unsendable import named, too_large
from polybus.errors import (
    ConnectionLostError,
    MessageTooLarge,
    PoisonCallError,
    PolybusError,
    UnsendableError,
    WorkerDiedError,
)
from polybus.plural import plural
from polybus.transport.channel import LATER
from polybus.wire.codec import Codec
from polybus.wire.messages import CallBatch, Drop, Forward, Keep, Message

if TYPE_CHECKING:
    from polybus.client.batching import Batcher
    from polybus.client.calls import ReplicaLink
    from polybus.client.operands import Pushes


def write(bt: Batcher, link: ReplicaLink, msgs: list[Message], direct: bool = False) -> None:
    """Write ``msgs`` (batches placed on ``link``, and the Puts and Drops they need);
    if they cannot be encoded, each call that cannot be sent fails alone (as on the
    unaggregated path: unsendable.py) and the rest of its batch goes. ``direct``:
    from the linger timer, on the connection itself, never reading and never waiting
    for room (LATER: what the connection cannot take now stays in it, client/linger.py)."""
    try:
        if direct:
            link.channel.send_many(msgs, LATER)
        elif len(msgs) == 1:
            bt.reactor.send(link, msgs[0])
        else:
            bt.reactor.send_many(link, msgs)
    except (TypeError, ValueError, OverflowError) as exc:  # (MessageTooLarge is one)
        _refused(bt, link, msgs, exc, direct)
    except BaseException:  # (RecursionError, MemoryError, Ctrl-C): raised as it is
        i = bt._index.get(id(link))
        if i is not None and not link.dead:
            with bt.lock:  # held back again, the batches still placed there: written
                bt.held[i][:0] = msgs  # by the next flush, not left in flight unwritten
        raise


def _refused(bt: Batcher, link: ReplicaLink, msgs: list[Message], exc: Exception,
             direct: bool) -> None:
    """`write`'s ``msgs`` could not be encoded (``exc``): each call of theirs that
    cannot be sent fails alone, the rest are written (or ``exc`` raised on, if every
    call can be sent: the fault is elsewhere)."""
    batches: list[Pending] = []
    for m in msgs:
        if type(m) is CallBatch:
            p: Any = link.outstanding.get(m.id)
            if type(p) is Pending and p.batcher is bt:
                batches.append(p)
    before = {b.id: (b, b.only) for b in batches}  # (the rows their requests count)
    refused = [refuse(bt, b, link, exc) for b in batches]
    if not any(refused):
        raise
    # Nothing was written (a frame is encoded whole before it is written): the
    # batches are named again for what is left of them, their Puts too.
    # What the batches' forwarded calls ask of the replica (fwdbatch.py) goes first,
    # for the calls still sent, each named by its place among them now.
    out: list[Message] = remapped(msgs, before)
    out.extend(m for m in msgs if type(m) is Drop)
    known = bt.comm.known.of(link) if bt.comm is not None else None
    if known is not None:
        known.unput(msgs)
    pushes: Pushes | None = [] if direct else None
    for b in batches:
        if b.done:  # (none of its calls could be sent)
            unplace(bt, b, link)
        elif bt.comm is None or b.by_value(bt.room, bt.most):
            out.append(b.message())
        else:
            out.extend(bt.comm.batch_messages(b, link, pushes))
    for other, put in pushes or ():  # (from the timer: on the connection itself)
        try:
            other.channel.send_many([put], LATER)
        except PolybusError:
            pass  # the reactor finds the connection dead
    if out:
        write(bt, link, out, direct)


def settle_owed(bt: Batcher) -> None:
    """Re-run or fail the batches of replicas lost, place again those a steal gave back,
    and write what was asked of placed batches (Batcher.after; not while the linger
    timer writes what it took from ``held``), if the Batcher's lock is free (else its
    holder does it when it lets go); then settle the batches the timer refused. Never
    on the timer's thread."""
    if threading.current_thread() is bt._timer:
        return
    while ((bt._lost_later or bt._back_later or (bt._after and not bt._writing))
           and bt.lock.acquire(blocking=False)):
        try:
            while bt._lost_later:
                bt._requeue(*bt._lost_later.popleft())
            while bt._back_later:
                bt._back_later.popleft()()
            while bt._after and not bt._writing:
                link, make = bt._after.popleft()
                write_after(bt, link, listed(make()))
        finally:
            bt.lock.release()
    while bt.unsettled:
        settle(bt.unsettled.popleft())


def write_after(bt: Batcher, link: ReplicaLink, msgs: list[Message]) -> None:
    """(The lock held) ``msgs``, about a batch placed on ``link`` (Batcher.after): after
    it, with it, if it is still held back at the client; else now."""
    if link.dead or not msgs:
        return
    i = bt._index.get(id(link))
    held = bt.held[i] if i is not None else None
    ids = {m.id for m in msgs if type(m) is Forward or type(m) is Keep}
    if held and any(type(m) is CallBatch and m.id in ids for m in held):
        held.extend(msgs)
    elif len(msgs) == 1:
        bt.reactor.send(link, msgs[0])
    else:
        bt.reactor.send_many(link, msgs)


def refuse(bt: Batcher, b: Pending, link: ReplicaLink, exc: Exception) -> bool:
    """``b`` could not be named or encoded (``exc``): each of its calls that cannot be
    sent on its own fails alone, with the error the unaggregated call would give
    (UnsendableError naming the argument); the batch goes on with the others, or is
    done if none is left. False if every call can be sent (the fault is elsewhere)."""
    codec = Codec(allow_pickle=link.channel.codec.allow_pickle,
                  max_frame=link.channel.codec.max_frame)
    keep: list[int] = []
    bad: dict[int, PolybusError] = {}
    # (as the frame carries them: a batch by value carries its cached operands too)
    inline = bt.comm is None or b.by_value(bt.room, bt.most)
    for j in (range(len(b.args)) if b.only is None else b.only):
        args = b.args[j]
        try:
            if bt.comm is not None:
                bt.comm.named_inline(args, link)  # its operands' names (hashing)
            # (alone over the frame limit: it fails, as a call would; its cached
            # operands go named, not in this frame)
            codec.encode(CallBatch(0, bt.interface, [_unnamed(bt, args, inline)]))
        except (TypeError, ValueError, OverflowError) as why:
            bad[j] = (_too_large(bt, b, why, inline) if isinstance(why, MessageTooLarge)
                      else named(bt.interface, args, None, why, codec.allow_pickle,
                                 link.module)
                      if isinstance(why, TypeError | OverflowError)
                      else why if isinstance(why, PolybusError) else UnsendableError(
                          f"{bt.interface}(...): {why}"))
        else:
            keep.append(j)
    if not bad and isinstance(exc, MessageTooLarge) and keep:
        bad = _together(bt, b, codec, keep, inline)  # (each fits; together they may not)
        keep = [j for j in keep if j not in bad]
    if not bad:
        return False
    if b.late is None:
        b.late = {}
    b.late.update(bad)
    b.clean = False
    b.only = keep
    c = bt.d.counts  # (in no batch sent: counted as cancelled calls are, cancelbatch.py)
    c.batched_calls -= len(bad)
    if not keep:
        b.done = True
        b.args = []
        c.batches -= 1
        bt.batches -= 1
    if b.entries is not None:  # (their consumers fail with them: fwdbatch.py)
        settle(b)
    told(bt, b)  # (and those waiting at the client: awaiting.py)
    return True


def _together(bt: Batcher, b: Pending, codec: Codec, rows: list[int],
              inline: bool) -> dict[int, PolybusError]:
    """The calls ``rows`` of ``b``, each of which fits in a frame, if together they do
    not (their sizes are guessed as they join a batch: policies/aggregate.py arg_bytes,
    a list's items at 9 bytes each): each fails, saying so, rather than the batch
    raising out of whichever call of the program wrote it, its calls never answered."""
    try:
        codec.encode(CallBatch(0, bt.interface, [_unnamed(bt, b.args[j], inline)
                                                 for j in rows]))
    except MessageTooLarge as exc:
        return {j: MessageTooLarge(
            f"{bt.interface}(...): a batch of {plural(len(rows), 'call')} with this one "
            f"was over the frame limit, though each call fits ({exc}); aggregate fewer "
            f"calls (use.{bt.interface}.aggregate, a count or a size)") for j in rows}
    return {}


def _unnamed(bt: Batcher, args: Any, inline: bool) -> list[Any]:
    """``args`` as a batch's frame carries them (with operand caching, its named
    operands out: Comm.by_ref; ``inline``, a batch by value: all in)."""
    return list(args) if inline or bt.comm is None else bt.comm.by_ref(args)


def _too_large(bt: Batcher, b: Pending, exc: MessageTooLarge,
               inline: bool) -> MessageTooLarge:
    """A call over the frame limit alone, saying why its cached operands were in it."""
    err = too_large(bt.interface, exc)
    if not inline or bt.comm is None:
        return err
    return MessageTooLarge(
        f"{err}; its cached operands went with it by value, as together "
        f"({b.opbytes} bytes) they pass what its replicas keep (cache_bytes, "
        f"{bt.room} bytes): raise cache_bytes, or pass fewer or smaller operands")


def unplace(bt: Batcher, b: Pending, link: ReplicaLink) -> None:
    """``b`` was placed on ``link`` but none of it is sent after all."""
    if link.outstanding.get(b.id) is b:  # type: ignore[comparison-overlap]
        del link.outstanding[b.id]
        i = bt._index[id(link)]
        if bt.inflight[i] > 0:
            bt.inflight[i] -= 1


def requeue(bt: Batcher, link: ReplicaLink, i: int, error: PolybusError) -> None:
    """``link``'s replica is gone (the Batcher's lock held): each of its batches runs
    again elsewhere, first in line in its old order (idempotent interfaces), or fails."""
    everything: list[Any] = list(link.outstanding.values())
    held: list[Pending] = [b for b in everything if type(b) is Pending and b.batcher is bt]
    for b in held:
        del link.outstanding[b.id]
    bt.inflight[i] = 0
    # Never reached the replica whole (held here, or not written whole: unwritten.py):
    # run again whatever the interface, and that try is no failed one (``spared``: the
    # poison rule counts only losses of a batch that may have run)
    never = set() if link.unwritten is None else link.unwritten | {
        m.id for m in bt.held[i] if type(m) is CallBatch}
    bt.held[i] = []  # (their batches are among those re-run or failed below)
    d = bt.d
    live = any(not lk.dead for lk in bt.links) or d.rejoins
    for b in sorted(held, key=lambda b: b.id, reverse=True):
        if b.done:
            continue
        if b.id in never and live:
            b.spared += 1
            b.link = None
            bt.backlog.appendleft(b)  # first in line, in its old order
            if b.entries:
                requeued(b)
        elif not d.idempotent:
            b.set_error(WorkerDiedError(
                f"{link.name} died holding a batch of {plural(len(b.args), 'call')} to "
                f"{bt.interface}, which is not idempotent, so they were not re-run "
                f"({error})", interface=bt.interface, replica=link.name))
        elif (losses := b.attempts - b.spared) >= d.max_attempts:
            b.set_error(PoisonCallError(
                f"a batch of {plural(len(b.args), 'call')} to {bt.interface} was lost "
                f"with {plural(losses, 'replica')} in a row (last: {link.name}); it is "
                f"not tried again", interface=bt.interface, replica=link.name))
        elif live:
            # (with none live, where lost replicas are looked for again, it waits for
            # one: failed by client/rejoin.py if none comes in time)
            b.link = None
            bt.backlog.appendleft(b)  # first in line, in its old order
            if b.entries:
                requeued(b)  # (what its consumers asked of the old replica: asked anew)
        else:
            b.set_error(ConnectionLostError(
                f"every replica of {bt.interface} is gone (last: {link.name}: "
                f"{error})" + suspect_note(bt.interface, b.attempts - b.spared, error,
                                           link.module)))


__all__ = ["refuse", "requeue", "settle_owed", "unplace", "write", "write_after"]
