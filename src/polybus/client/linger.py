"""The linger timer of an aggregating binding (client/batching.py): one daemon thread
per Batcher that closes a batch left open ``linger`` after its first call, and writes
batches held back for a busy replica, when the program does nothing more with polybus.

It shares the Batcher's state with the program's threads under the Batcher's lock,
which it only tries (a caller that holds it closes and writes the batches itself), and
never reads: what it writes goes on the connection itself, and the caller's reactor
reads. Nor does it wait for room: a replica that stopped reading (``overflow =
"block"``, its queue full) would have kept it in its send, holding the connection's
send lock, and with it every other writer there: the pump's turn, which holds the gate,
and so every program thread entering polybus (tests/unit/test_linger_write.py). It
writes as the pump's turn does (transport/channel.py's LATER): what the connection
cannot take now stays in it, written first by the next send there, and on by the
program's reads and the pump's turns, which ``Reactor.unfinished`` sends to it. What
follows from a batch it could not send (its forwarded calls' consumers told: fwdbatch.py)
is left to them too (``Batcher.unsettled``), as is what is asked after the batches it
writes (``Batcher.after``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from polybus.client.batchplace import place
from polybus.client.batchsend import write
from polybus.errors import PolybusError

if TYPE_CHECKING:
    from polybus.client.batchcalls import Pending
    from polybus.client.batching import Batcher
    from polybus.client.calls import ReplicaLink
    from polybus.wire.messages import Message


def linger_main(bt: Batcher) -> None:
    """A lone open batch (and any batch held for company) is sent when its linger
    runs out, even if the program does nothing more with polybus. While batches keep
    coming the timer looks once per linger; after a quiet spell it sleeps until the
    next batch opens."""
    quiet = 0
    while not bt._stopped:
        b = bt.open
        if b is None:
            if any(bt.held):
                timer_flush(bt, None)
                quiet = 0
            quiet += 1
            if quiet < 50:
                time.sleep(bt.linger or 0.001)
                continue
            with bt._wake:
                bt._idle = True
                if bt.open is None and not bt._stopped:
                    bt._wake.wait()
                bt._idle = False
            quiet = 0
            continue
        quiet = 0
        left = b.opened + bt.linger - time.monotonic()
        flushed = left <= 0 and timer_flush(bt, b)
        # Not held while asleep: a batch whose last promise goes is freed then, and an
        # error in it nobody looked at is said (client/unseen.py), not a linger later.
        del b
        if left > 0:
            time.sleep(left)
        elif not flushed:
            time.sleep(bt.linger / 4 or 0.0005)  # the caller is busy; it closes it itself


def timer_flush(bt: Batcher, b: Pending | None) -> bool:
    """From the timer thread, if no caller is at work: close ``b`` if it is still the
    open batch, and write every batch held back (False if it had to leave them)."""
    reactor = bt.reactor
    if not reactor._lock.acquire(blocking=False):
        return False  # a caller is reading; it flushed before it read
    if not bt.lock.acquire(blocking=False):
        reactor._lock.release()
        return False  # a caller is at work on the batches; it closes them itself
    out: list[tuple[ReplicaLink, list[Message]]] = []
    # A call of another binding (or a sync call) looks at the batches without the lock
    # and waits while one is open, queued, held or taken (order.py `_write`): a batch
    # is counted as taken before it leaves `open` (sealed, not yet placed in `held`) or
    # `held`, so it is never out of sight.
    bt.taken = 1
    try:
        # Sealed (unless every call of it was cancelled: nothing to send), it goes, or
        # waits behind others for room, made by the caller's next read.
        if (b is not None and bt.open is b and b.args and bt._seal(b)
                and (bt.backlog or not place(bt, b, send=False))):
            bt.backlog.append(b)
        for i, h in enumerate(bt.held):
            if h:
                bt.held[i] = []
                out.append((bt.links[i], h))
        bt._writing = bool(out)  # (what is asked after them waits: Batcher.after)
    except BaseException:
        bt.taken = 0
        raise
    finally:
        bt.lock.release()
        reactor._lock.release()
    # Written outside the locks, never waiting for room, and never read here: the
    # caller's reactor reads, or the pump while the program is outside polybus (a
    # batch queued for room waits for an answer).
    try:
        for link, msgs in out:
            try:
                write(bt, link, msgs, direct=True)
            except PolybusError:
                pass  # the reactor finds the connection dead and re-runs the batches
    finally:
        bt._writing = False
        bt.taken = 0
    if bt.unsettled or bt._after:
        # What it refused (or asked after its batches) is settled and sent by a program
        # thread's read, or the pump's turn: a reader asleep (one on a lone call's
        # socket too, `_alone`) is woken to come round to the Batcher's flush.
        reactor.unfinished = True
        reactor._wake.ring()
        if reactor.gate is not None:
            reactor.gate.poke()
    elif out and reactor.unsent_left():
        # Said after the write (a read that clears the flag looks at the channels after:
        # Reactor._write_unsent), and a reader asleep on a socket is woken to see it.
        reactor.unfinished = True
        reactor._wake.ring()
        if reactor.gate is not None:
            reactor.gate.poke()
    elif bt.backlog and reactor.gate is not None:
        reactor.gate.poke()
    return True


__all__ = ["linger_main", "timer_flush"]
