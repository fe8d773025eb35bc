"""Forwarding edges of a call that migration moves (client/migrate.py, client/forward.py).

A binding whose calls may be given back by a ``Steal`` (a migration path, ``balance =
"steal"``, or another binding's migration on the same replicas) forwards like any other:
a consumer is placed at once, naming its producers' values, which go replica to replica.
Only a call queued at its replica can be given back, and a consumer is queued there only
once its values have come, so a consumer that moves needs them again where it goes:

- its producers' replicas were asked to keep each value pinned for it (``Forward`` with
  ``hold``) until it ends (``Keep(..., release=True)``), so each sends its value again to
  the consumer's new replica from its store (a value answered to the client is sent on
  from here, and a replica gone since makes its producer run again, or fails the
  consumer: client/fwdlost.py);
- the replica that gave it back no longer counts its keys as taken (worker/fwdheld.py),
  so a consumer moved back there takes its values again. A copy of a value that comes
  there after (a value may come twice: sent by its producer's replica and sent on by the
  client, or made again) waits for it; when the consumer ends, each replica that gave it
  back is told (``Cancel([], keys)``: `ended`), and lets such a copy go.

A producer that moves before it ran is asked again, on its new replica, to forward (or
keep) its value, and its old replica forgets what it was asked (``Cancel``): it answers
there as it would have where it was first placed, not by value through the client.
So does an aggregated batch one of whose calls is a producer (a steal takes any call
queued for the client's connection, a batch of another binding too): `moved_batch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from polybus.client.fwdbatch import placed
from polybus.wire.messages import Cancel, Message

if TYPE_CHECKING:
    from polybus.client.batchcalls import Pending
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.forward import Forwarder
    from polybus.client.fwdedge import Edge

__all__ = ["ended", "moved", "moved_batch", "unwritten"]


def moved(f: Forwarder, rec: CallRecord, old: ReplicaLink, new: ReplicaLink | None) -> None:
    """``rec`` was given back by ``old``'s replica (it never ran there) and is now placed
    on ``new`` (its call written there already), or waits to be placed again (None)."""
    if rec.id in f.edges and not old.dead:
        f.reactor.send(old, Cancel([rec.id]))  # (its Forwards and Keeps there go)
    for e in f.edges.get(rec.id, ()):
        e.told = None
    for e in f.deps.get(rec.id, ()):
        e.unwatch()
        e.to, e.failed = None, ""
        if e.left is None:
            e.left = [old]
        elif old not in e.left:
            e.left.append(old)
    if new is not None:
        f.placed(rec, new)


def ended(f: Forwarder, edges: Sequence[Edge]) -> Sequence[Edge]:
    """The consumer whose edges are ``edges`` has its outcome: each replica that gave it
    back (``moved``), and so counts its values' keys as not taken, is told that nothing
    will take them (``Cancel`` with no ids, only the keys: a call given up on may still
    be queued there, and must run and answer). A copy that came there after it left
    goes, and one that comes later is dropped (worker/fwdheld.py's `ended`). Returns
    ``edges``."""
    links: list[ReplicaLink] = []
    for e in edges:
        for lk in e.left or ():
            if lk not in links:
                links.append(lk)
    if links:
        keys = [e.key for e in edges]
        for lk in links:
            if not lk.dead:
                f.reactor.send(lk, Cancel([], keys))
    return edges


def unwritten(edges: Sequence[Edge]) -> None:
    """The consumer whose edges are ``edges`` was placed but never written (it could not
    be encoded): its producers were asked to send their values to its replica (Forwards
    go before the call), or the client sent one itself. That replica is told, when the
    consumer ends, as one that gave it back is (`ended`), so it lets them go rather
    than keep them waiting for a call that will not come for as long as it lives."""
    for e in edges:
        if e.to is not None:
            e.left = [*(e.left or ()), e.to]
            e.unwatch()
            e.to = None


def moved_batch(b: Pending, old: ReplicaLink, new: ReplicaLink | None) -> list[Message]:
    """Aggregated batch ``b`` was given back by ``old``'s replica (it never ran there)
    and is now placed on ``new`` (``b.link``): ``old`` forgets what its forwarded calls'
    consumers asked of it (``Cancel``), and the same is asked of ``new``: the Forwards
    and Keeps to write after the batch (fwdbatch.py's `placed`). ``new`` None: placed
    later by its Batcher, which asks it then."""
    entries = [r for r in (b.entries or {}).values() if not r.done]
    f: Forwarder | None = next((g for r in entries if (g := getattr(
        r.dispatcher.comm, "forwarder", None)) is not None), None)
    if f is None:
        return []
    if not old.dead:
        f.reactor.send(old, Cancel([b.id]))
    with f._marks:
        for r in entries:
            for e in f.edges.get(r.id, ()):
                e.told, e.kept = None, False  # (asked of ``old``, which forgets it)
    return [] if new is None else placed(b, new)
