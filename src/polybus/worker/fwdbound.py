"""The bound on calls held for forwarded values (worker/fwdheld.py), the base of a
replica's `Receiving`.

A call naming ``Ref("fwd", key)`` whose value has not come is held, decoded, until it
does. A stage called with plain ``async`` faster than its producers run leaves its
calls there, so they are bounded: at most ``held_max`` calls (``HELD_BOUND``) and
``held_bytes_max`` bytes (the forward store's size) are held at once, counting each
call's arguments, the values filled into it while it waits for the others, and
``HELD_ENTRY_BYTES``. A call that would be held past that is answered at once with a
``BusyError`` (``Fail(kind="busy")``, as a full queue that rejects answers), under
either overflow, and the values it names are let go as a failed call's are (taken: not
kept when they come). A call whose values are all here is not held, and not refused;
nor is one call larger than the byte bound alone, when none is held.

Not the replica's ``queue``: counted against it, under ``overflow = "block"`` the calls
held could stop the reading of the very connection that brings their values (a client
sends a value it has itself on the consumer's connection, and a producer on the same
replica comes on it too), for ever. A call refused at once never stops any reading,
the calls already held are answered as their values come, and the producers' calls,
which name no value that has not come, are never refused by this bound.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polybus.plural import plural
from polybus.quieter import doubling
from polybus.transport.channel import Channel
from polybus.wire.messages import Call, Fail
from polybus.worker.cache import DEFAULT_CAPACITY
from polybus.worker.fwdpeers import Peers

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

__all__ = ["HELD_BOUND", "HELD_ENTRY_BYTES", "Held", "HeldBound"]

log = logging.getLogger("polybus.worker")
HELD_BOUND = 100_000  # calls held at once, at most
HELD_ENTRY_BYTES = 1024  # counted for each held call beside its arguments (measured: ~1 KB)
# Where a held call takes a value: an argument's position or keyword, or inside one
# (worker/cache.py's `Forwarded`: the argument's, then each list's or map's step)
Place = int | str | tuple[Any, ...]


@dataclass(eq=False)
class Held:
    """A call held for forwarded values: ``missing`` those not come yet."""

    ch: Channel
    call: Call
    missing: set[str] = field(default_factory=set)
    where: dict[str, list[Place]] = field(default_factory=dict)  # key -> its places
    over: bool = False
    nbytes: int = 0  # counted in `HeldBound._holding_bytes` (0: not counted, or no more)


class HeldBound(Peers):
    """How many calls are held, and their bytes; its methods are called with the lock
    of `Receiving` held, but `_refuse_held`."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__(runtime)  # (sending to the other replicas: fwdpeers.py)
        self._holding = 0  # calls held now (each once, however many values it waits for)
        self._holding_bytes = 0
        self.held_refused = 0  # calls refused so, ever
        self.held_max = HELD_BOUND
        self.held_bytes_max = DEFAULT_CAPACITY

    def _held_room(self, n: int) -> str:
        """(The lock held) "" if a call of ``n`` bytes may be held now; else why not. One
        call larger than the byte bound alone is held (max_frame bounds it), as nothing is."""
        if self._holding >= self.held_max:
            return f"{plural(self._holding, 'call')} wait there"
        if self._holding and self._holding_bytes + n > self.held_bytes_max:
            return (f"{plural(self._holding, 'call')} wait there, holding "
                    f"{self._holding_bytes} bytes, and this one holds {n}")
        return ""

    def _count_held(self, h: Held, n: int) -> None:
        """(The lock held) ``h`` is held, ``n`` bytes with it."""
        h.nbytes = n
        self._holding += 1
        self._holding_bytes += n

    def _uncount_held(self, h: Held) -> None:
        """(The lock held) ``h`` is held no more (answered, queued, revoked or dropped)."""
        if h.nbytes:
            self._holding -= 1
            self._holding_bytes -= h.nbytes
            h.nbytes = 0

    def _refuse_held(self, ch: Channel, call: Call, why: str) -> None:
        """``call`` would be held past the bound: answered at once, as a full queue that
        rejects answers (it never stops the reading of ``ch``, which may bring the very
        values the calls held wait for)."""
        self.held_refused += 1
        if doubling(self.held_refused):
            log.warning("worker %s: %d calls refused so far, as %s for forwarded values "
                        "(at most %d calls or %d bytes of them)", self.rt.name,
                        self.held_refused, why, self.held_max, self.held_bytes_max)
        self.rt._send_quietly(ch, Fail(
            call.id, "busy", "BusyError",
            f"{self.rt.name} did not take this call: {why} for forwarded values (at most "
            f"{self.held_max}, or {self.held_bytes_max} bytes of them), and it names one "
            "that has not come; the stages that make them run slower than this one is "
            "called (callstyle = \"async-demand(N)\" on its binding keeps its calls at the "
            "client until a replica has room)"))
