"""What clients ask of calls' answers before they come, and its bound: the base of a
replica's `Forwarding` (worker/forwarding.py says what is asked, and does it).

A ``Forward`` or ``Keep`` that comes before its call is answered is kept, as a request
of that call's answer, until the call is answered, cancelled (``Cancel``) or its
connection ends. A request may come before its call (a binding with ``forward =
"keep"`` sends its ``Keep`` before each call: client/fwdown.py), so one naming a call
the replica has not seen is taken, not refused; what is bounded is how many wait: at
most ``ASKED_BOUND`` on one connection, and ``ASKED_BYTES`` on the replica, each counted
as its keys, its ``to`` and ``ASKED_ENTRY_BYTES``. A client that asked of ever new ids it
never called grew the replica until it went (100,000 ``Forward``s over 1,000 connections
held 202 MB).

A request past either bound is refused at once and kept nowhere: a ``Forward`` is
answered ``Undelivered(key, to, "BusyError", ...)`` saying which bound, as a value too
many to send on is (fwdpeers.py): its consumer fails rather than waits; a ``Keep`` is
as if it had not come: the answer goes by value, and the client sends it on itself (or,
if a ``Forward`` of the call waits, it is kept as any forwarded answer, and a later
``Forward`` of the Keep's key is served from there while the store holds it, else
fails its consumer as an evicted value does). A request asked already (the same ``to``
and key) adds nothing and is never refused. The replica serves on.

A request whose call's answer has no value it names (an ``index`` of a plain ``Call``,
one past its batch's calls, none of a ``CallBatch``) goes when that call is answered,
as the others do, but is said, not served (`_unnamed`): a ``Forward`` is answered
``Undelivered(key, to, "LookupError", ...)`` saying what the call has, so its consumer
fails rather than waits; a ``Keep`` is dropped (logged, once a connection). A foreign
client's bug waited for nothing until the connection ended, its consumer until its
client gave up. One naming a call id never sent waits as any request may (above).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from polybus.plural import plural
from polybus.quieter import doubling
from polybus.transport.channel import Channel
from polybus.wire.messages import Forward, Keep, Undelivered
from polybus.worker.cache import DEFAULT_CAPACITY
from polybus.worker.fwdheld import Receiving
from polybus.worker.fwdpeers import BUSY

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

__all__ = ["ASKED_BOUND", "ASKED_BYTES", "ASKED_ENTRY_BYTES", "HOLD", "LOOKUP", "Asked", "Asking",
           "Target"]

log = logging.getLogger("polybus.worker")

ASKED_BOUND = 100_000  # requests waiting on one connection, at most (as calls held)
ASKED_BYTES = DEFAULT_CAPACITY  # their bytes, on all connections (the forward store's)
# Counted for each request beside its strings: a Forward of a call not asked of before
# held 454 bytes with keys of a few characters (tracemalloc, 100,000 of them).
ASKED_ENTRY_BYTES = 512
HOLD = "+"  # a target that is no address: the value stays pinned for its key (Forward.hold)
LOOKUP = "LookupError"  # what a request naming no value fails its consumer with (`_unnamed`)

# A request: (to, key), ``to`` "" for a Keep, `HOLD` beside the address of a
# Forward with ``hold``; what a client asked of a call's answer: (pkey, [requests]).
_Request = tuple[str, str]
Target = tuple[str, list[_Request]]


def size(pkey: str, request: _Request) -> int:
    """The bytes a request of call answer ``pkey`` is counted as."""
    return len(pkey) + len(request[0]) + len(request[1]) + ASKED_ENTRY_BYTES


class Asked:
    """How many requests of call answers wait, by connection (``id`` of its channel),
    and their bytes; used with the lock of `Forwarding` held."""

    def __init__(self) -> None:
        self.per_connection = ASKED_BOUND  # (module constants; tests lower them)
        self.bytes_max = ASKED_BYTES
        self.counts: dict[int, int] = {}  # connection -> requests waiting (none: absent)
        self.nbytes = 0
        self.refused = 0  # requests refused so, ever

    def total(self) -> int:
        """The requests waiting, on all connections."""
        return sum(self.counts.values())

    def take(self, cid: int, pkey: str, new: list[_Request]) -> str:
        """``new`` (of call answer ``pkey``) waits on connection ``cid``, and "" is
        returned; or, past a bound, nothing is counted and why not is (counted as refused)."""
        n = self.counts.get(cid, 0)
        if n + len(new) > self.per_connection:
            self.refused += 1
            return (f"{plural(n, 'request')} of call answers wait on this connection, the "
                    f"most a replica keeps for one ({self.per_connection})")
        more = sum(size(pkey, r) for r in new)
        if self.nbytes + more > self.bytes_max:
            self.refused += 1
            return (f"the requests of call answers waiting on it hold {self.nbytes} bytes, "
                    f"and this one {more}, over the most a replica keeps "
                    f"({self.bytes_max} bytes)")
        self.counts[cid] = n + len(new)
        self.nbytes += more
        return ""

    def remove(self, cid: int, pkey: str, gone: list[_Request]) -> None:
        """``gone`` (of call answer ``pkey``), which waited on ``cid``, waits no more."""
        if gone:
            left = self.counts.get(cid, 0) - len(gone)
            if left > 0:
                self.counts[cid] = left
            else:
                self.counts.pop(cid, None)
            self.nbytes -= sum(size(pkey, r) for r in gone)


class Asking(Receiving):
    """What a replica's clients asked of its calls' answers, and how much of it waits
    (`Asked`); its methods are called with the lock of `Receiving` held, but `_refused`."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__(runtime)  # (taking values in: fwdheld.py; sending: fwdpeers.py)
        # (client, call id) -> what it asked of that call's answer
        self.targets: dict[tuple[int, int], Target] = {}
        # The same for calls of aggregated batches, by batch: (client, batch id) -> index
        # -> its target (``Forward``/``Keep`` with an ``index``: fwdbatch.py answers them).
        self.slots: dict[tuple[int, int], dict[int, Target]] = {}
        # Keeps with a ``least`` (``forward = "keep"``): (client, call id) -> (key, least
        # bytes); an answer smaller than that is not kept for that key (`finished`).
        self.sized: dict[tuple[int, int], tuple[str, int]] = {}
        # How many of the requests in ``targets`` and ``slots`` wait, and their bytes.
        self.asks = Asked()
        # Its count by connection, the same dict: empty while no request waits, the one
        # look of a call's answer for what was asked of it (forwarding.py `finished`).
        self.waiting = self.asks.counts
        # The connections that sent a request naming no value (logged once each), and
        # how many have ever (`_unnamed`).
        self.unnamed: set[int] = set()
        self.unnamed_connections = 0

    def _target(self, ch: Channel, msg: Forward | Keep, make: bool = True) -> Target | None:
        """(The lock held) what is asked of call ``msg.id`` on ``ch`` (of call
        ``msg.index`` of batch ``msg.id``, for an aggregated call), made if ``make``."""
        where = (id(ch), msg.id)
        if msg.index < 0:
            return (self.targets.setdefault(where, (msg.pkey, [])) if make
                    else self.targets.get(where))
        slots = self.slots.setdefault(where, {}) if make else self.slots.get(where, {})
        return slots.setdefault(msg.index, (msg.pkey, [])) if make else slots.get(msg.index)

    def _ask(self, ch: Channel, msg: Forward | Keep, asked: list[tuple[str, str]]) -> str:
        """(The lock held) ``asked`` added to what is asked of ``msg``'s call (but what
        was asked already); or, past the bound (module docstring), nothing, and why not."""
        entry = self._target(ch, msg, make=False)
        new = [t for t in asked if entry is None or t not in entry[1]]
        if not new:
            return ""
        why = self.asks.take(id(ch), msg.pkey if entry is None else entry[0], new)
        if not why:
            self._target(ch, msg)[1].extend(new)  # type: ignore[index]
        return why

    def _refused(self, ch: Channel, msg: Forward | Keep, why: str) -> None:
        """``msg`` was past the bound (`_ask`): a Forward is said to its client, whose
        consumer fails rather than waits; a Keep's answer goes by value."""
        call = f"call {msg.id}" if msg.index < 0 else f"call {msg.index} of batch {msg.id}"
        if doubling(self.asks.refused):
            log.warning("worker %s: %d requests of call answers refused so far, as %s",
                        self.rt.name, self.asks.refused, why)
        if isinstance(msg, Forward):
            self.rt._send_quietly(ch, Undelivered(
                msg.key, msg.to, BUSY,
                f"{self.rt.name} did not keep the request for {call}'s answer: {why}"))

    def _unnamed(self, ch: Channel, entry: Target, why: str) -> None:
        """(Not under the lock) ``entry``, asked of an answer that has no value it
        names (``why``, "call 4 has no value at index 2 ..."), was let go: a Forward in it
        is said to its client, ``Undelivered`` (`LOOKUP`), so its consumer fails rather
        than waits for a value that will not come; a Keep goes unsaid, its answer as if
        not asked. The log says a connection's first such request, as the count of
        connections that sent one doubles (a foreign client's bug, not the replica's)."""
        forwards = [(to, key) for to, key in entry[1] if to and to != HOLD]
        for to, key in forwards:
            self.rt._send_quietly(ch, Undelivered(key, to, LOOKUP, f"{self.rt.name}: {why}"))
        with self._lock:
            first = id(ch) not in self.unnamed
            if first:
                self.unnamed.add(id(ch))
                self.unnamed_connections += 1
            n = self.unnamed_connections
        if first and doubling(n):
            log.warning("worker %s: a request of a call answer names no value, from %s "
                        "(%s so far sent one; each Forward so is answered Undelivered, "
                        "each Keep dropped): %s: %s", self.rt.name, ch.peer,
                        plural(n, "connection"), "a Forward" if forwards else "a Keep", why)

    def _untarget(self, ch: Channel, msg: Keep) -> None:
        """(The lock held) nothing is asked of ``msg``'s call any more."""
        where = (id(ch), msg.id)
        if msg.index < 0:
            self.targets.pop(where, None)
            return
        slots = self.slots.get(where)
        if slots is not None:
            slots.pop(msg.index, None)
            if not slots:
                del self.slots[where]

    def _unask(self, cid: int, i: int) -> None:
        """(The lock held) nothing is asked of call (or batch) ``i`` of connection
        ``cid`` any more: its requests go, and their count."""
        entry = self.targets.pop((cid, i), None)
        if entry is not None:
            self.asks.remove(cid, *entry)
        for entry in (self.slots.pop((cid, i), None) or {}).values():  # (a batch's)
            self.asks.remove(cid, *entry)
