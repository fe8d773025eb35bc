"""A dispatcher's sends once forwarding is in use (client/forward.py says what is sent).

`install` puts a `ForwardComm` in a binding's place, keeping its caching and aggregation
plan: it places calls as any Comm does, then tells the session's Forwarder, which
connects the edges of each call placed (a producer's Forward, a consumer's values).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import Pending
from polybus.client.naming import known_for
from polybus.client.operands import Comm

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.dispatch import Dispatcher
    from polybus.client.forward import Forwarder
    from polybus.wire.messages import Message

__all__ = ["ForwardComm", "install"]


class ForwardComm(Comm):
    """A dispatcher's Comm once forwarding is in use: places calls, then connects edges."""

    forwarder: Forwarder

    def quick(self, args: tuple[Any, ...], link: ReplicaLink
              ) -> tuple[list[Any], list[Message]] | None:
        return None  # (every call placed is told to the forwarder: `send`)

    def send(self, rec: CallRecord, link: ReplicaLink, hold: bool = False) -> None:
        if self.dispatcher.keeper is not None:  # (forward = "keep": asked before the call)
            self.dispatcher.keeper.ask(rec, link)
        # Forwards first: the sooner a producer hears, the likelier it forwards (a producer
        # that answers first sends its value to the client, which relays it).
        if rec.id in self.forwarder.deps:
            self.forwarder.placed(rec, link)
            super().send(rec, link, hold)
        else:
            super().send(rec, link, hold)
            self.forwarder.placed(rec, link)

    def send_many(self, link: ReplicaLink, recs: list[CallRecord]) -> None:
        if self.dispatcher.keeper is not None:
            for r in recs:
                self.dispatcher.keeper.ask(r, link)
        super().send_many(link, recs)
        for r in recs:
            self.forwarder.placed(r, link)

    def missed(self, rec: CallRecord | Pending, link: ReplicaLink, key: str) -> None:
        super().missed(rec, link, key)
        if not link.dead and not isinstance(rec, Pending):
            self.forwarder.placed(rec, link)  # the re-sent call needs its values again


def install(d: Dispatcher, f: Forwarder) -> None:
    """Route ``d``'s sends through a ForwardComm, keeping its caching and aggregation.
    Done for a consumer's binding and for its producers' (whatever their own setting),
    so a producer placed later from a backlog still has its edges connected."""
    if isinstance(d.comm, ForwardComm):
        return
    old = d.comm
    fc = ForwardComm(d, d.reactor, old.known if old is not None else known_for(f.session))
    if old is not None:
        fc.copy_plan(old)
    fc.forwarder = f
    d.comm = fc
