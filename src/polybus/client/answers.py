"""What the reactor does with each kind of message a replica sends, beside a Result.

`Reactor._handle` files the common answer (a `Result`) itself; everything else comes
here: a failed call (or a cache miss, re-sent with its value), the answers of an
aggregated batch, released calls (a Steal's, or a Revoke's: client/cancel.py), answers
to control requests, a forwarded value that could not be sent on, and a replica's
goodbye.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polybus.client.calls import CallRecord, ReplicaLink, error_from, late, text_of
from polybus.client.cancel import released
from polybus.client.counts import refused
from polybus.errors import UPSTREAM_FAILED, ProtocolError
from polybus.wire.messages import (
    Batch,
    BatchResult,
    Fail,
    Fetched,
    Goodbye,
    Message,
    Pong,
    Released,
    Stats,
    Undelivered,
)

if TYPE_CHECKING:
    from polybus.client.reactor import Reactor

__all__ = ["handle", "misfiled"]


def handle(reactor: Reactor, link: ReplicaLink, msg: Message) -> None:
    """File ``msg`` from ``link`` (any message but a Result; unknown kinds are ignored)."""
    match msg:
        case Fail(id=cid):
            rec = link.outstanding.pop(cid, None)
            if rec is None:
                late(link, cid)  # (a late answer to a call given up on)
            elif msg.kind == "cache-miss" and rec.dispatcher.comm is not None:
                rec.dispatcher.comm.missed(rec, link, msg.message)  # sent again, the operand Put first
            else:
                link.calls += 1
                fwd = rec.dispatcher.forwarder
                origin = (fwd.origin(rec, msg.message)
                          if fwd is not None and msg.message.startswith(UPSTREAM_FAILED) else "")
                iface = rec.dispatcher.interface
                said = text_of(rec)  # ("" for a batch's own Fail: it fails all its calls)
                if msg.kind == "busy" and not rec.done:  # (the run's report: counts.py)
                    refused(rec)
                if rec.set_error(error_from(msg, iface, link.name, origin, said)):
                    rec.dispatcher.completed(rec, link)
                elif isinstance(rec, CallRecord):  # (given up on meanwhile: as a Result)
                    rec.dispatcher.freed(link)
        case Batch(items=items):
            for item in items:
                reactor._handle(link, item)
        case BatchResult(id=cid):
            batch: Any = link.outstanding.get(cid)
            if batch is None:
                late(link, cid)  # (a late answer to a batch given up on: batchgiveup.py)
            elif isinstance(batch, CallRecord):
                misfiled(reactor, link, f"a BatchResult for call {cid}, which is not an "
                                        "aggregated batch")
            elif why := batch.misfit(msg):
                misfiled(reactor, link, why)
            else:
                del link.outstanding[cid]
                batch.answered(link, msg)
        case Released(ids=ids, req=req):  # (a Revoke's, p.cancel(); else a Steal's)
            if not (reactor.revoking and released(reactor, link, msg)):
                for cid in ids:  # (given up on, and now known never to run: its place
                    late(link, cid)  # is free; a timeout's Revoke, calls.revoke_given_up)
                reactor.on_released(link, ids, req)
        case Stats(req=req) | Pong(req=req) | Fetched(req=req):
            reactor.replies[req] = msg
        case Undelivered():  # a forwarded value its replica could not send on (forward.py)
            reactor.on_undelivered(link, msg)
        case Goodbye(reason=reason):
            reactor._lost(link, ProtocolError(f"{link.name} closed the connection: {reason}"))
        case _:
            pass


def misfiled(reactor: Reactor, link: ReplicaLink, what: str) -> None:
    """``link``'s replica answered a call with what does not fit it (``what``): a
    protocol error, taken as its loss (its calls, the one named too, go on as for any
    replica lost) rather than raised out of the program's call (docs/protocol.md, 3)."""
    reactor._lost(link, ProtocolError(f"{link.name} sent {what}: not an answer to what it "
                                      "was sent (a protocol error)"))
