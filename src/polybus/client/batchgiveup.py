"""An aggregated batch whose every call was given up on (its timeout passed) is revoked.

A batch is one job at its replica, answered whole, and its calls share one deadline
(counted from when it was placed). A call of it given up on leaves the batch to run as
long as another call of it may still take its answer: a promise not waited for yet is
answered by a batch that comes, even past the deadline, as a single call's is. Once
every call it carries has been given up on, nobody can take its answer: it is let go
as a single call given up on is (client/calls.py, `abandon`). It leaves the link's
calls, keeps its place among the binding's batches in flight there (``link.abandoned``,
so its replica counts as busy with it), and its replica is asked to drop it unless it
has started (``Revoke``): a ``Released`` naming it, or its late answer, frees that place
(`freed`). A batch whose values were passed to forwarding calls is left to run (its
consumers' replicas wait for them), as is one not written yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polybus.wire.messages import Revoke

if TYPE_CHECKING:
    from polybus.client.batchcalls import Pending
    from polybus.client.batching import Batcher
    from polybus.client.calls import ReplicaLink

__all__ = ["forget_batch", "freed"]


def forget_batch(bt: Batcher, b: Pending) -> None:
    """A call of ``b`` was given up on: if none of its calls is left to take its
    answer, it is let go and revoked at its replica (see the module docstring)."""
    with bt.lock:  # (what is held to be written, and the batch's place, are the lock's)
        link = b.link
        if (link is None or link.dead or b.done or b.entries or b.late is None
                or link.outstanding.get(b.id) is not b  # type: ignore[comparison-overlap]
                or any(getattr(h, "id", None) == b.id for h in bt.held[bt._index[id(link)]])):
            return
        sent = range(len(b.args)) if b.only is None else b.only
        if any(j not in b.late for j in sent):
            return  # (a call of it may yet take its answer)
        # Noted as given up on before it leaves the link's calls: its answer, read on
        # another thread between the two, then frees its place (calls.late); one read
        # before it left is taken as any batch's answer (a `del` there raised KeyError).
        link.abandoned[b.id] = bt
        if link.outstanding.pop(b.id, None) is not b:  # type: ignore[comparison-overlap]
            link.abandoned.pop(b.id, None)
            return
        b.done, b.args = True, []  # (never sent again: not even if its replica is lost)
    # (sent with the lock let go, never waiting for room: as a single call's, calls.py)
    bt.reactor.send_unwaited(link, Revoke([b.id], 0))


def freed(bt: Batcher, link: ReplicaLink) -> None:
    """A batch given up on, on ``link``, was dropped there unrun or answered late: its
    place among the batches in flight there is free for the batches waiting here."""
    i = bt._index.get(id(link))
    if i is not None and bt.inflight[i] > 0:
        bt.inflight[i] -= 1
        if bt.backlog:
            bt.reactor.work_left()
