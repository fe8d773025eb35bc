"""A dispatcher's demand backlog and lost replicas: placing the calls that wait at the
client (`refill`), and settling what a replica held when it is gone (`lost`): run
again elsewhere, or failed with the error that says why.

Suspicion is counted per call (``Dispatcher._suspects``: call id -> replicas lost with
it in a row). A call lost once runs again as any call is placed, beside the others: a
replica's death costs its calls no more than a re-run, however many it held. A call
lost twice (it was running at two deaths) runs alone, on a replica that holds nothing
else of the interface (``Dispatcher._isolated``), so that a death then is its own: lost
while alone, its third loss, it fails with ``PoisonCallError``. A call that kills its
worker costs 3 replicas at most, and a call that was beside it, however unlucky, is
never blamed for it: lost twice, it runs alone, and answers.

`Dispatcher.refill` and `Dispatcher.lost` are these (client/dispatch.py).
"""

from __future__ import annotations

import heapq
import sys
import time
from typing import TYPE_CHECKING

from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.calltext import call_text
from polybus.client.lostnotes import silence_note, suspect_note
from polybus.client.picking import alive, loads, open_to_calls
from polybus.client.policies.balance import demand_pick
from polybus.client.unsendable import send_accepted
from polybus.errors import ConnectionLostError, PoisonCallError, PolybusError, WorkerDiedError
from polybus.plural import plural

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher
    from polybus.client.forward import Forwarder

__all__ = ["lost", "refill"]


def refill(d: Dispatcher) -> None:
    """Hand backlog calls to replicas with room (after answers came in), one write
    per replica however many calls it gets."""
    batches: dict[int, list[CallRecord]] = {}
    now = time.perf_counter()
    waiting: list[tuple[float, int, CallRecord]] = []
    # (a style with no window, async or sync, whose backlog holds only calls run again:
    # placed at once, each on the least loaded open replica; a load ratio is not looked
    # at, so that a call still runs when the replicas it weighs are gone)
    window = d.window if d.style.kind == "async-demand" else [sys.maxsize] * len(d.links)
    last = max(1, d.max_attempts - 1)  # (lost this often, its next run is its last: alone)
    while d._backlog:
        rec = d._backlog[0][2]
        if rec.done:
            heapq.heappop(d._backlog)
            continue
        if d._suspects.get(rec.id, 0) >= last:  # (first in line) alone: a replica with nothing else
            entry = heapq.heappop(d._backlog)
            f = getattr(d.comm, "forwarder", None)  # (its own held consumers aside)
            free = [j for j, lk in enumerate(d.links) if not lk.dead and j not in d._isolated
                    and (not d.inflight[j] or (f is not None and f.only_behind(rec, lk)))]
            if not free:
                waiting.append(entry)
                continue
            i = free[0]
            d._isolated[i] = rec.id
        else:  # (a call lost once among them: beside the others)
            i = demand_pick(d.inflight, window, open_to_calls(d), loads(d),  # type: ignore[assignment]
                            d.start)
            if i is None:
                i = past_its_consumers(d, rec, window)
                if i is None:
                    break
            heapq.heappop(d._backlog)
        link = d.links[i]
        rec.link = link
        d.counts.tried(rec)
        link.outstanding[rec.id] = rec
        d.inflight[i] += 1
        rec.sent_at, rec.ahead = now, d.inflight[i]
        if rec.deadline:  # (its timeout counts from here: CallRecord)
            rec.deadline = time.monotonic() + (d.timeout or 0.0)
        batches.setdefault(i, []).append(rec)
    for entry in waiting:
        heapq.heappush(d._backlog, entry)
    for i, recs in list(batches.items()):
        try:
            if d.comm is not None:
                d.comm.send_many(d.links[i], recs)
            else:  # (accepted calls: one that cannot be sent fails alone)
                send_accepted(d.reactor, d.links[i], [r.message() for r in recs])
        except BaseException:  # (RecursionError, MemoryError, Ctrl-C): none written
            # The calls placed here and not written, back in the backlog, first in line:
            # not left counted in flight on a replica that never got them. Written out
            # here, not called: cut short by a RecursionError, a call could fail too.
            for j, placed in batches.items():
                lk = d.links[j]
                for rec in placed:
                    if lk.outstanding.pop(rec.id, None) is rec:
                        d.inflight[j] -= 1
                        d.counts.untried(rec)
                        rec.link = None  # (waiting at the client: its timeout not begun)
                        if d._isolated.get(j) == rec.id:
                            del d._isolated[j]
                        heapq.heappush(d._backlog, (float("-inf"), next(d._seq), rec))
            raise
        del batches[i]


def past_its_consumers(d: Dispatcher, rec: CallRecord, window: list[int]) -> int | None:
    """Every window is full: the replica for ``rec`` if calls of this binding held for
    its value (forwarded, directly or not) fill the window there, counted as not in it.
    Held, none of them runs until ``rec`` has; ``rec`` waiting for their room, none
    ever would (a producer run again after its replica died, its consumer held on the
    replica left: ``x = step(step(x))`` under ``async-demand(1)`` hung)."""
    f = getattr(d.comm, "forwarder", None)
    if f is None or rec.id not in f.edges:  # (no consumer: the common case, one look)
        return None
    inflight = [n - sum(1 for r in lk.outstanding.values()
                        if r.dispatcher is d and r.id in f.deps and _waits_for(f, r, rec))
                for n, lk in zip(d.inflight, d.links, strict=True)]
    if inflight == d.inflight:
        return None
    return demand_pick(inflight, window, open_to_calls(d), loads(d), d.start)


def _waits_for(f: Forwarder, r: CallRecord, rec: CallRecord) -> bool:
    """Whether ``r`` waits for ``rec``'s value, directly or through producers of its
    that have no outcome yet (walked up from ``r``: a call placed has few such)."""
    seen: set[int] = set()
    todo = [r]
    while todo:
        for e in f.deps.get(todo.pop().id, ()):
            p = e.producer
            if p is rec:
                return True
            if not p.done and p.id not in seen:
                seen.add(p.id)
                todo.append(p)
    return False


def lost(d: Dispatcher, link: ReplicaLink, error: PolybusError) -> None:
    """``link``'s replica is gone: re-run what it held elsewhere, or fail it."""
    i = d._index.get(id(link))
    if i is None:
        return
    held = [r for r in list(link.outstanding.values()) if r.dispatcher is d]
    for r in held:
        del link.outstanding[r.id]
    d.inflight[i] = 0
    alone = d._isolated.pop(i, None)  # (the call it ran alone, if any)
    never = link.unwritten  # (those that never reached it whole: client/unwritten.py)
    for rec in sorted(held, key=lambda r: r.id):
        call = call_text(d.interface, rec.args, rec.kwargs)  # (which of its calls it was)
        if never is not None and rec.id in never and (d.rejoins or any(alive(d))):
            # Never reached the replica whole (client/unwritten.py): it did not run
            # there, so it goes again, first in line, idempotent or not, its suspicion
            # as it was (lost alone before: alone again)
            heapq.heappush(d._backlog, (float("-inf"), next(d._seq), rec))
            continue
        losses = d._suspects.pop(rec.id, 0) + 1  # (replicas lost with it in a row)
        if not d.idempotent:
            went = "was taken for dead" if silence_note(error) else "died"
            rec.set_error(WorkerDiedError(
                f"{link.name} {went} holding the call {call}, and {d.interface} is not "
                f"idempotent, so it was not re-run ({error}){silence_note(error)}",
                interface=d.interface, replica=link.name))
        elif losses >= d.max_attempts:  # (its last run was alone: refill)
            # (why, and the key that stops the re-runs, as when every replica is gone:
            # a replica taken for dead may be dialled again before the call runs out)
            there = "it was running there alone, and " if alone == rec.id else ""
            rec.set_error(PoisonCallError(
                f"the call {call} was lost with {plural(losses, 'replica')} of {d.interface} "
                f"in a row (last: {link.name}); {there}it is not tried again"
                + suspect_note(d.interface, losses, error, link.module),
                interface=d.interface, replica=link.name))
        elif d.rejoins or any(alive(d)):
            # First in line: lost once, placed as any call is (beside others); lost
            # twice, alone (refill), so that its next loss is charged to it alone.
            # (With none left, where lost replicas are looked for again, it waits for
            # one, failed by client/rejoin.py if none comes in time.)
            d._suspects[rec.id] = losses
            heapq.heappush(d._backlog, (float("-inf"), next(d._seq), rec))
        else:
            rec.set_error(ConnectionLostError(
                f"the call {call} was lost: every replica of {d.interface} is gone "
                f"(last: {link.name}: {error})"
                + suspect_note(d.interface, losses, error, link.module)))
    if not d.rejoins and not any(alive(d)):  # none left to take the backlog: it fails too
        while d._backlog:
            rec = heapq.heappop(d._backlog)[2]
            rec.set_error(ConnectionLostError(
                f"the call {call_text(d.interface, rec.args, rec.kwargs)} was not run: "
                f"every replica of {d.interface} is gone (last: {link.name}: {error})"
                + silence_note(error)))
    refill(d)
    if d._backlog:
        d.reactor.work_left()
