"""What a lost replica was given that never reached it: placed again, idempotent or not.

A call (or an aggregated batch) placed on a replica may still be at the client when
the replica is lost: held to be written with the next ones (`ReplicaLink.held`, a
batch held in its Batcher's ``held`` for its linger: batchsend.py's `requeue`), left in
the connection by a write that does not wait (``Channel.unsent``: the pump's, the
linger timer's), or cut short by the send that found the connection broken. A replica
runs only whole frames, so such a call cannot have run there: it is placed again,
first in line, as a lost idempotent call is, whatever its interface
(client/backlog.py's `lost`), and counted as run again. Anything that may have reached
the replica keeps the at-most-once rule (`idempotent = false`: WorkerDiedError).

Only what is proven goes: the connection's writes are ended first (no write begins
after the look), a write under way on another thread makes the connection's count
unknown (transport/unwhole.py), and held calls are read under the link's lock, or
not at all if another thread holds it. A write cut short by anything but the connection
(a Ctrl-C inside it) proves nothing more on that connection: what it had taken from
the held calls is put back to be written again, though some of it may have gone.
"""

from __future__ import annotations

from polybus.client.calls import ReplicaLink

__all__ = ["unwritten"]


def unwritten(link: ReplicaLink) -> frozenset[int] | None:
    """(``link`` lost, before its channel closes) the ids of its calls and batches that
    never reached the replica whole, or None if nothing held for it can be told
    unwritten either; ``link``'s writes end here."""
    ch = link.channel
    ids = ch.stop_writes() or set()  # first: nothing is written after the look
    if ch.untracked:  # (a write cut short by a Ctrl-C: what it put back to be held
        return None   # again, batchsend.py's `write`, sending.py's `flush`, may have gone)
    if link.lock.acquire(blocking=False):
        try:
            ids.update(m.id for m in link.held)
        finally:
            link.lock.release()
    return frozenset(ids)
