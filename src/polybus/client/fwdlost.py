"""A producer's replica died keeping its value for consumers (client/forward.py).

Its value is sent on from the client if the program fetched it; else the producer runs
again (an idempotent interface, as a lost call does) and its edges are connected anew,
or its consumers fail with `gone`'s WorkerDiedError (an aggregated call's always:
client/fwdbatch.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polybus.client.fwdbatch import EntryRecord
from polybus.errors import WorkerDiedError
from polybus.wire.codec import Ref

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord
    from polybus.client.forward import Edge, Forwarder

__all__ = ["gone", "kept_lost"]


def kept_lost(f: Forwarder, p: CallRecord, edges: list[Edge]) -> None:
    """``p``'s replica died keeping its value for ``edges`` (consumers unplaced, or
    to be sent it from there: `_instruct`, which may not have been): sent on from
    here if the program has fetched it; else ``p`` runs again (idempotent, as a lost
    call does) and its edges are connected anew, or they fail (WorkerDiedError)."""
    for e in edges:
        e.unwatch()
        e.kept, e.told = False, None
    d = p.dispatcher
    if not edges or type(p.value) is not Ref:
        for e in edges:
            f._connect(e)  # (a consumer still unplaced: when it is)
    elif (d.idempotent and p.attempts < d.max_attempts and any(not lk.dead for lk in d.links)
          and not isinstance(p, EntryRecord)):  # (a batch's call is not re-run alone)
        p.reopen()
        d.again(p)
    else:
        for e in edges:
            f._fail(e, gone(p))  # (a consumer still unplaced: when it is, _instruct)


def gone(p: CallRecord) -> WorkerDiedError:
    """The error of a consumer whose value was kept on a replica that died."""
    name = p.link.name if p.link is not None else ""
    return WorkerDiedError(f"the replica holding the result of a call to "
                           f"{p.dispatcher.interface} is gone{f' ({name})' if name else ''}",
                           interface=p.dispatcher.interface, replica=name)
