"""Which producer a forwarded consumer's failure came from (client/forward.py).

A consumer's replica says only that "an upstream call failed: ..." when a value it was
held for came failed. The client tells which of the consumer's producers that was
(`upstream`, `origin`: "f on server-0" in the consumer's error), and whether the
producer's own error has then reached the program through the consumer's (`said_by`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from polybus.client.calls import message_of, waited_on
from polybus.client.unseen import forgotten, seen
from polybus.client.upstream import ran_at
from polybus.errors import UPSTREAM_FAILED, RemoteException

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord
    from polybus.client.forward import Edge

__all__ = ["origin", "said_by", "upstream"]


def upstream(edges: Sequence[Edge], message: str) -> CallRecord | None:
    """The producer a failure of the consumer whose edges are ``edges`` came from, as
    its replica says only that an upstream call failed: one whose failure the client has
    or sent on, its message first; else its one unanswered producer; else None."""
    said = message.removeprefix(UPSTREAM_FAILED)
    failed = [e for e in edges if e.failed or e.producer.error is not None]
    failed.sort(key=lambda e: (e.failed or message_of(e.producer.error)) != said)
    waiting = [e.producer for e in edges if not e.producer.done]
    return failed[0].producer if failed else waiting[0] if len(waiting) == 1 else None


def origin(edges: Sequence[Edge], message: str,
           deps_of: Callable[[int], Sequence[Edge]] = lambda _: ()) -> str:
    """Which producer such a failure came from ("f on server-0"), or "" (`upstream`).
    A producer that itself failed upstream passes on where its failure came from: "f
    on server-0, upstream of g on server-1" (f raised; g, the producer, was held for
    f's value), so a chain of stages names the call that raised, not the stage before.
    Its own failure may not have reached the client yet: then one of its producers
    (``deps_of`` its id) that failed or has not answered means it was held, and failed
    upstream too."""
    p = upstream(edges, message)
    if p is None:
        return ""
    err = p.error
    mine = ran_at(p.dispatcher.interface, p.link.name if p.link is not None else "", err)
    if isinstance(err, RemoteException) and err.remote_message.startswith(UPSTREAM_FAILED):
        deeper = err.origin
    elif err is None and any(e.failed or e.producer.error is not None or not e.producer.done
                             for e in deps_of(p.id)):
        deeper = origin(deps_of(p.id), message, deps_of)
    else:
        deeper = ""
    return f"{deeper}, upstream of {mine}" if deeper else mine


def said_by(p: CallRecord, named: bool, said: str | None) -> None:
    """A consumer of ``p`` ended, failed upstream with the message ``said`` (else None);
    ``named``: that failure is ``p``'s, as far as the client can tell. Then ``p``'s error
    reached the program as the consumer's; if ``p`` has not failed yet, its error will
    have if it has that message (``carried``). Else, with no other consumer waiting for
    it, ``p``'s error is unseen: said now if its promise went (client/unseen.py)."""
    if p.error is None:
        if said is not None:
            p.carried = said
    elif named:
        seen(p.error)
    elif getattr(p, "orphan", False) and not waited_on(p):
        forgotten(p.error, p.dispatcher.interface, passed=True)
