"""A dispatcher's demand backlog and lost replicas: placing the calls that wait at the
client (`refill`), and settling what a replica held when it is gone (`lost`): run
again elsewhere, alone first, or failed with the error that says why.

`Dispatcher.refill` and `Dispatcher.lost` are these (client/dispatch.py).
"""

from __future__ import annotations

import heapq
import time
from typing import TYPE_CHECKING

from polybus.client.calls import CallRecord, ReplicaLink, silence_note, suspect_note
from polybus.client.calltext import call_text
from polybus.client.policies.balance import demand_pick
from polybus.client.unsendable import send_accepted
from polybus.errors import ConnectionLostError, PoisonCallError, PolybusError, WorkerDiedError
from polybus.plural import plural

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher

__all__ = ["lost", "refill"]


def refill(d: Dispatcher) -> None:
    """Hand backlog calls to replicas with room (after answers came in), one write
    per replica however many calls it gets."""
    batches: dict[int, list[CallRecord]] = {}
    now = time.perf_counter()
    waiting: list[tuple[float, int, CallRecord]] = []
    while d._backlog:
        rec = d._backlog[0][2]
        if rec.done:
            heapq.heappop(d._backlog)
            continue
        if rec.id in d._suspects:  # (queued first) alone, on a replica with nothing else
            entry = heapq.heappop(d._backlog)
            f = getattr(d.comm, "forwarder", None)  # (its own held consumers aside)
            free = [j for j, lk in enumerate(d.links) if not lk.dead and j not in d._isolated
                    and (not d.inflight[j] or (f is not None and f.only_behind(rec, lk)))]
            if not free:
                waiting.append(entry)
                continue
            i = free[0]
            d._isolated[i] = rec.id
        else:
            i = demand_pick(d.inflight, d.window, d._open(),  # type: ignore[assignment]
                            d._load())
            if i is None:
                break
            heapq.heappop(d._backlog)
        link = d.links[i]
        rec.link = link
        rec.attempts += 1
        link.outstanding[rec.id] = rec
        d.inflight[i] += 1
        rec.sent_at, rec.ahead = now, d.inflight[i]
        if rec.deadline:  # (its timeout counts from here: CallRecord)
            rec.deadline = time.monotonic() + (d.timeout or 0.0)
        batches.setdefault(i, []).append(rec)
    for entry in waiting:
        heapq.heappush(d._backlog, entry)
    for i, recs in batches.items():
        if d.comm is not None:
            d.comm.send_many(d.links[i], recs)
        else:  # (accepted calls: one that cannot be sent fails alone)
            send_accepted(d.reactor, d.links[i], [r.message() for r in recs])


def lost(d: Dispatcher, link: ReplicaLink, error: PolybusError) -> None:
    """``link``'s replica is gone: re-run what it held elsewhere, or fail it."""
    i = d._index.get(id(link))
    if i is None:
        return
    held = [r for r in list(link.outstanding.values()) if r.dispatcher is d]
    for r in held:
        del link.outstanding[r.id]
    d.inflight[i] = 0
    d._isolated.pop(i, None)
    for rec in sorted(held, key=lambda r: r.id):
        d._suspects.discard(rec.id)
        call = call_text(d.interface, rec.args, rec.kwargs)  # (which of its calls it was)
        if not d.idempotent:
            went = "was taken for dead" if silence_note(error) else "died"
            rec.set_error(WorkerDiedError(
                f"{link.name} {went} holding the call {call}, and {d.interface} is not "
                f"idempotent, so it was not re-run ({error}){silence_note(error)}",
                interface=d.interface, replica=link.name))
        elif rec.attempts >= d.max_attempts:
            # (why, and the key that stops the re-runs, as when every replica is gone:
            # a replica taken for dead may be dialled again before the call runs out)
            rec.set_error(PoisonCallError(
                f"the call {call} was lost with {plural(rec.attempts, 'replica')} of "
                f"{d.interface} in a row (last: {link.name}); it is not tried again"
                + suspect_note(d.interface, rec.attempts, error, link.module),
                interface=d.interface, replica=link.name))
        elif any(d._alive()):
            # Retried alone (refill): a replica dying with one call charges that call.
            d._suspects.add(rec.id)
            heapq.heappush(d._backlog, (float("-inf"), next(d._seq), rec))
        else:
            rec.set_error(ConnectionLostError(
                f"the call {call} was lost: every replica of {d.interface} is gone "
                f"(last: {link.name}: {error})"
                + suspect_note(d.interface, rec.attempts, error, link.module)))
    if not any(d._alive()):  # none left to take the backlog: it fails too
        while d._backlog:
            rec = heapq.heappop(d._backlog)[2]
            rec.set_error(ConnectionLostError(
                f"the call {call_text(d.interface, rec.args, rec.kwargs)} was not run: "
                f"every replica of {d.interface} is gone (last: {link.name}: {error})"
                + silence_note(error)))
    refill(d)
    if d._backlog:
        d.reactor.work_left()
