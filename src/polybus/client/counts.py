"""What a run's strategies did, counted at the client where each is decided.

Each binding's dispatcher has a `Counts` (``Dispatcher.counts``), bumped where the event
happens: plain integer increments on objects already at hand, on the paths of the
strategies alone (a binding with none of them on gains no work on its calls). The
session's figures (client/stats.py) give them per binding, keyed by its ``[bind]`` name
(``client.make``); the runner writes them to --json ("interfaces") and the summary says
the non-zero ones (cli/cmd_run.py).

- ``calls``: the binding's calls (``Dispatcher.calls``, as the run's ``calls`` sums).
- ``batches``, ``batched_calls``: aggregated batches sent (``use.aggregate``), and the
  calls in them. A batch of the general path (a binding with a priority or migration, or
  a call the lean path cannot carry) is counted under the binding of its first call.
- ``operands_put``: cached operands sent by value in a ``Put`` (``define.cache``,
  ``prefetch``'s pushes to the other replicas too), ``operands_named``: operands named
  by content, the replica holding them already, ``cache_misses``: calls (or batches)
  sent again because the replica no longer held an operand they named.
- ``forwarded``: this binding's answers sent replica to replica to a consuming call
  (``forward``: the producer's replica told to send the value on), ``through_client``:
  its answers the client had and sent on itself, as another call's argument (a
  promise answered before its consumer was made or placed, a binding with
  ``forward = false``, a sync consumer). Both counted under the producer's binding.
- ``refused``: calls a replica refused, its queue full (``overflow = "reject"``): the
  BusyErrors the program got (a refused batch, one for each of its calls).
- ``cancelled``: calls cancelled before they ran (``p.cancel()`` said True:
  client/cancel.py); counted in ``calls`` too, and in no batch.
- ``run_again``: calls sent again after the replica that held them was lost (each
  time; an aggregated batch's, one for each of its calls; not a call a steal or a
  migration moved, which never ran where it was).

They count what the client decided, once for each try: a call moved to another
replica (migration, a steal), run again after its replica was lost, or whose encoding
failed after its operands were named may count its operands or its forwarding again,
so they can exceed ``calls`` (docs/guide.md, "What each strategy did: the counts", says so too).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from polybus.client.nested import MAX_DEPTH
from polybus.client.promise import Promise
from polybus.wire.messages import Batch, Put

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.fwdedge import Edge
    from polybus.client.session import Session
    from polybus.wire.messages import Message

__all__ = ["FIELDS", "Broadcasts", "Counts", "batches_in", "interfaces",
           "passed_on", "refused", "relayed", "uncount", "unpassed"]


class Counts:
    """One binding's strategy counts (see the module docstring)."""

    __slots__ = ("batched_calls", "batches", "cache_misses", "cancelled", "forwarded",
                 "operands_named", "operands_put", "refused", "run_again", "through_client")

    def __init__(self) -> None:
        self.batches = self.batched_calls = 0
        self.operands_put = self.operands_named = self.cache_misses = 0
        self.forwarded = self.through_client = 0
        self.refused = self.cancelled = self.run_again = 0

    def tried(self, rec: Any, calls: int = 1) -> None:
        """One more attempt of ``rec`` (a call, or an aggregated batch of ``calls``
        calls); past its first, each of its calls counts as run again."""
        rec.attempts += 1
        if rec.attempts > 1:
            self.run_again += calls

    def untried(self, rec: Any, calls: int = 1) -> None:
        """`tried` taken back: that attempt was no failed one (a move, a give-back, a
        write cut short), and neither is its count."""
        if rec.attempts > 1:
            self.run_again -= calls
        rec.attempts -= 1


# In the order --json gives them, after ``calls``
FIELDS = ("batches", "batched_calls", "operands_put", "operands_named", "cache_misses",
          "forwarded", "through_client", "refused", "cancelled", "run_again")


class Broadcasts:
    """The session's `broadcast` calls, and the Puts they sent (one per replica that did
    not hold the value yet)."""

    __slots__ = ("puts", "values")

    def __init__(self) -> None:
        self.values = self.puts = 0


def refused(rec: Any) -> None:
    """``rec``, a call or an aggregated batch not yet ended, was refused (BusyError)."""
    bt = getattr(rec, "batcher", None)
    if bt is not None and rec.dispatcher is bt:  # (a batch: each of its calls refused)
        bt.d.counts.refused += len(rec.rows())
    else:
        rec.dispatcher.counts.refused += 1


def passed_on(promise: Any, n: int = 1) -> None:
    """``promise``'s value, at the client, goes on as an argument (wireargs.wire, and
    inside a list, tuple or dict: wireargs._item); ``n = -1`` takes that back."""
    rec = promise._rec
    d = getattr(rec, "batcher", None)  # (a BatchPromise's record is its batch)
    (rec.dispatcher if d is None else d.d).counts.through_client += n


def unpassed(args: Iterable[Any], depth: int = 0) -> None:
    """Take back `passed_on` for the promises in ``args``, which a sync call's lane
    wired before it left the call to the general path (the reactor busy), which wires
    them again (client/lane.py, client/socketlane.py)."""
    for a in args:
        if isinstance(a, Promise) and hasattr(a, "_rec"):
            passed_on(a, -1)
        elif depth < MAX_DEPTH and (type(a) in (list, tuple, dict) or (
                isinstance(a, tuple) and hasattr(type(a), "_fields"))):  # (as wire walks)
            unpassed(a.values() if type(a) is dict else a, depth + 1)


def relayed(e: Edge) -> None:
    """The client sends ``e``'s value on itself (a Deliver): its producer answered by
    value. A Forward that went before (``told``) was cancelled: not forwarded after all."""
    c = e.producer.dispatcher.counts
    c.through_client += 1
    if e.told is not None and c.forwarded > 0:
        c.forwarded -= 1


def uncount(c: Counts, puts: list[Message], named: int) -> None:
    """A call's cached operands, ``named`` of them (a Put among ``puts``, or named), go
    by value after all (client/operands.py, `_apart`): counted as neither."""
    sent = sum(1 for p in puts if type(p) is Put)
    c.operands_put -= sent
    c.operands_named -= named - sent


def batches_in(link: ReplicaLink, msgs: list[Message]) -> None:
    """The Batches of held calls among ``msgs`` (written to ``link``) that carry calls of
    bindings aggregating on the general path: each such binding counts the batch once
    and its own calls in it (a binding with no aggregation in it counts nothing). Looked
    at only in a session where some binding aggregates (``Sending.aggregating``)."""
    for m in msgs:
        if type(m) is Batch and m.items:
            counted: list[Counts] = []
            for item in m.items:
                rec = link.outstanding.get(item.id)
                comm = rec.dispatcher.comm if rec is not None else None
                if comm is None or comm.aggregator is None:
                    continue
                c = rec.dispatcher.counts  # type: ignore[union-attr]
                c.batched_calls += 1
                if not any(x is c for x in counted):
                    counted.append(c)
                    c.batches += 1


def interfaces(session: Session) -> dict[str, dict[str, int]]:
    """Each binding's calls and counts, keyed as its ``[bind]`` entry (``client.make``)."""
    out: dict[str, dict[str, int]] = {}
    for name, d in session.dispatchers.items():
        row = {"calls": d.calls}
        c = d.counts
        for f in FIELDS:
            row[f] = getattr(c, f)
        out[session.labels.get(name, name)] = row
    for name, e in session.local.items():  # (replication = 0: calls, and nothing else)
        out[session.labels.get(name, name)] = {"calls": e.calls, **dict.fromkeys(FIELDS, 0)}
    return out
