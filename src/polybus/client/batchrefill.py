"""An aggregating binding's Batcher takes a new link in a lost one's place.

A long-lived session (the front door's) fills the place of a lost replica with a new
link (client/revive.py). The Batcher keeps state of its own per place (its batches in
flight there, the batches held back to be written there, where each link is: batching.py)
and the new link starts with none of it. The lost link's batches were, or are now,
taken back (run again elsewhere, first in line, or failed: batchsend.py's `requeue`);
they are not left to be requeued later, when the place's counts would be the new link's.
What the new replica holds of the session's cached operands (nothing) is the session's
`Known` (naming.py), forgotten by revive for every binding at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import Pending
from polybus.errors import ConnectionLostError

if TYPE_CHECKING:
    from polybus.client.batching import Batcher
    from polybus.client.calls import ReplicaLink

__all__ = ["replace"]


def replace(bt: Batcher, old: ReplicaLink, new: ReplicaLink) -> bool:
    """``new`` in lost ``old``'s place in ``bt`` (after its dispatcher's `replace`, whose
    list of links the Batcher shares); False if ``old`` is not one of its links."""
    with bt.lock:  # (the program's threads, the reader and the linger timer share it)
        i = bt._index.get(id(old))
        if i is None:
            return False
        # A loss found while another thread held the lock is left for its next holder
        # (Batcher.lost): settled now, while place i is still old's. Settled later, it
        # would take the new link's count in flight and what is held for it.
        while bt._lost_later:
            bt._requeue(*bt._lost_later.popleft())
        # (none is placed on a dead link; one still there, of a loss never told, goes too)
        there: list[Any] = list(old.outstanding.values())  # (typed as calls; batches too)
        if any(type(b) is Pending and b.batcher is bt for b in there):
            bt._requeue(old, i, ConnectionLostError(f"{old.name} is gone"))
        del bt._index[id(old)]
        if bt.links[i] is not new:  # (the dispatcher's list: set by Dispatcher.replace)
            bt.links[i] = new
        bt._index[id(new)] = i
        bt.inflight[i] = 0
        bt.held[i] = []
    bt.reactor.work_left()  # (a queued batch may go now: the new link has room)
    return True
