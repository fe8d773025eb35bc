"""Calls a replica gave back unrun, placed again by their own bindings.

A replica gives calls back when asked: a ``Steal`` (migration, client/migrate.py) with
no other replica planned for them, or a ``Revoke`` (``p.cancel()``, client/cancel.py)
whose answer came after the cancel stopped waiting for it, so that the cancel said it
could not cancel the call and the call must run after all. Each is placed as its
binding places a call: into its ``async-demand`` backlog (its producers' replicas
asked to keep their values for it meanwhile), or sent at once; its forwarding edges
follow it (client/fwdmove.py). The caller has taken each out of the link's calls and
its binding's count in flight there.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING

from polybus.client.fwdmove import moved
from polybus.client.picking import pick_any

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.forward import Forwarder

__all__ = ["place_again", "placed_alone"]


def place_again(link: ReplicaLink, recs: Iterable[CallRecord]) -> None:
    """Place ``recs``, given back by ``link``'s replica (none ran there), again."""
    for rec in recs:
        d = rec.dispatcher
        f = _given_back(link, rec)
        if d.style.kind == "async-demand":
            heapq.heappush(d._backlog, (-rec.prio, next(d._seq), rec))
            if f is not None and rec.id in f.deps:
                f.queued(rec)  # (its producers keep their values for it meanwhile)
            d.reactor.work_left()
        else:
            d._send(rec, pick_any(d))


def _given_back(link: ReplicaLink, rec: CallRecord) -> Forwarder | None:
    """What every call given back unrun by ``link`` goes through: its forwarding edges
    leave ``link`` (its binding's forwarder returned, or None), its record names no
    replica, and the move is not counted as a failed attempt (refill and ``_send`` count
    one)."""
    f: Forwarder | None = getattr(rec.dispatcher.comm, "forwarder", None)
    if f is not None:
        moved(f, rec, link, None)
    # At no replica until placed, as every call in a backlog: a wait for it then places
    # it (Reactor._wait), where one naming ``link`` read that replica alone for good.
    rec.link = None
    rec.dispatcher.counts.untried(rec)  # (its run-again count too: the next send's)
    return f


def placed_alone(link: ReplicaLink, rec: CallRecord) -> bool:
    """If ``rec``, given back by ``link``'s replica, is a call its binding runs alone
    there (lost with two replicas: client/backlog.py): that replica is open to the
    binding's calls again, and ``rec`` goes back first in its binding's backlog, to be
    placed alone again (a steal's replica would run it beside others, and ``link`` stay
    closed to the binding, its end filed elsewhere, for the rest of the run). False,
    nothing done, for any other call."""
    d = rec.dispatcher
    i = d._index.get(id(link))
    if i is None or d._isolated.get(i) != rec.id:
        return False
    del d._isolated[i]
    _given_back(link, rec)
    heapq.heappush(d._backlog, (float("-inf"), next(d._seq), rec))
    d.refill()
    if d._backlog:
        d.reactor.work_left()
    return True
