"""What waits for a lost module's replicas to come back, shared by a run at a shared
registry (client/rejoin.py) and the front door's Revival (http/revival.py): the
dispatchers and batchers whose backlogs hold calls for them (`waiting_on`), their
calls placed once a replica is back (`placed`) or failed when none came in time
(`give_up`, with `back_note`'s words)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING

from polybus.client.calltext import call_text
from polybus.config.units import duration_text
from polybus.errors import ConnectionLostError, PolybusError

if TYPE_CHECKING:
    from polybus.client.batching import Batcher
    from polybus.client.dispatch import Dispatcher
    from polybus.client.session import Session

__all__ = ["Waiting", "back_note", "give_up", "placed", "waiting_on"]


@dataclass
class Waiting:
    """What waits for a replica of a module to come back: the dispatchers with calls in
    their backlogs, and the aggregating bindings (batchers) with batches in theirs."""

    calls: list[Dispatcher]
    batches: list[Batcher]

    def __bool__(self) -> bool:
        return bool(self.calls or self.batches)


def waiting_on(session: Session, key: str) -> Waiting:
    """What waits in backlogs for a replica of ``key``'s links (lost with every replica,
    their bindings' ``rejoins`` set)."""
    links = session.links.get(key, ())
    return Waiting([d for d in session.dispatchers.values() if d._backlog
                    and any(id(lk) in d._index for lk in links)],
                   [bt for bt in session.batchers if bt.backlog
                    and any(id(lk) in bt._index for lk in links)])


def placed(session: Session, key: str) -> bool:
    """After `install`: with a live replica of ``key`` again, the calls and batches that
    waited for one placed (`Dispatcher.refill`; a batcher's not if its lock is held
    elsewhere: at a next tick); False if none is live yet."""
    if all(lk.dead for lk in session.links.get(key, ())):
        return False
    for d in session.dispatchers.values():  # (calls lost with every replica: placed)
        if d._backlog:
            d.refill()
    for bt in session.batchers:  # (and batches)
        if bt.backlog:
            bt.pump(wait=False)
    return True


def give_up(users: Waiting, last: tuple[str, PolybusError] | None, note: str) -> None:
    """What waits in ``users``' backlogs failed: no replica came back in time (``last``:
    the last loss, replica and why; ``note``: `back_note`)."""
    name, error = last or ("?", PolybusError("lost"))
    for d in users.calls:
        while d._backlog:
            rec = heapq.heappop(d._backlog)[2]
            how = "was lost" if rec.id in d._suspects else "was not run"
            d._suspects.pop(rec.id, None)
            rec.set_error(ConnectionLostError(
                f"the call {call_text(d.interface, rec.args, rec.kwargs)} {how}: every "
                f"replica of {d.interface} is gone (last: {name}: {error}){note}"))
    for bt in users.batches:  # (the lock tried, as `install` does: else at a next tick)
        if bt.lock.acquire(blocking=False):
            try:
                while bt.backlog:
                    bt.backlog.popleft().set_error(ConnectionLostError(
                        f"every replica of {bt.interface} is gone (last: {name}: "
                        f"{error}){note}"))
            finally:
                bt.lock.release()


def back_note(session: Session, key: str, bound: float) -> str:
    """What a call that waited ``bound`` s for a lost replica of ``key`` to come back
    adds to its error."""
    module = session.links[key][0].module if session.links.get(key) else key
    lost = ", ".join(dict.fromkeys(lk.name for lk in session.links.get(key, ()) if lk.dead))
    return (f"; lost replica(s) {lost} of module {module!r} not back at "
            f"{session.registry.address} within {duration_text(bound)} (a worker "
            f"started again under its name, or another of module {module!r} "
            f"registered there, is taken back by later calls)")
