"""Forwarded values taken in on a replica: the consumer side of worker/forwarding.py.

Consumer side: a call naming ``Ref("fwd", key)`` (an argument, or inside a list or map
argument ``Call.inside`` marks: worker/cache.py) is held (not queued) until every such
value has arrived, each then put in its place, and queued like any call; a failed upstream value answers it with a
Fail naming the upstream failure, and lets go of it: the other values it waited for are
taken (not kept) when they come. The client sends such a failure itself when the value
will never come (its producer lost or given up, or Undelivered). A key delivered twice
(a producer re-run, the client repairing a race) is taken once; a queued call a
``Steal`` gives back gives back its keys (`released`), so that, placed here again, it
takes them again (as does a held or queued call a ``Revoke`` drops, `revoke`, or
whose client's connection ended, `_drop_held`: a client that dials again sends it
again). A copy
of one that comes after that waits for it as a new value does;
when the consumer has ended elsewhere the client says so (``Cancel`` with its keys,
`ended`), and the copy goes (it was parked until the bound below pushed it out). A
value that arrives before its call (the usual order: the producer's
replica sends it as soon as it has it) waits for it, bounded: at most ``ARRIVED_BOUND``
values and the forward store's bytes wait at once, and past that the oldest is dropped
and its key remembered (as many as ``TAKEN_BOUND``), so that the call naming it is
answered at once, ``Fail(kind="forward-dropped")``, not held for ever.

A client's keys begin with its session's nonce (client/forward.py): when a connection
ends (the client is gone: its held calls go with it) and no other live connection named
that nonce (fwdgone.py), the values of its keys that wait unclaimed go at once, and
those that come later are let go as they come, each key remembered as dropped, as
above: not kept until the bound pushed them out. A client that dials again is known by
that nonce again from its first held call.

The calls held are bounded, in count and bytes, by a bound of their own: a call past it
is answered at once with a BusyError (fwdbound.py says why not the replica's queue).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from polybus.errors import UPSTREAM_FAILED
from polybus.quieter import doubling
from polybus.transport.channel import Channel
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Fail
from polybus.worker.cache import DEFAULT_CAPACITY
from polybus.worker.fwdbound import HELD_BOUND, HELD_ENTRY_BYTES, Held, HeldBound
from polybus.worker.fwdgone import LAPSE_S, Sessions, Unclaimed
from polybus.worker.heldvalue import held_bytes

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

__all__ = ["ARRIVED_BOUND", "ENTRY_BYTES", "HELD_BOUND", "TAKEN_BOUND",
           "Receiving"]

log = logging.getLogger("polybus.worker")
TAKEN_BOUND = 100_000  # keys remembered as taken, to drop late duplicates (and as dropped)
# Values that arrived with no call yet to take them, at most (and at most the forward
# store's bytes, ``kept.capacity``). Many may wait legitimately: a busy replica reads a
# client's calls late, while their values come straight from the producers. Unbounded,
# a peer's Delivers for keys no call names were kept for ever.
ARRIVED_BOUND = 100_000
ENTRY_BYTES = 200  # counted for each such value beside its own bytes (its key, its place)
_UNCLAIMED, _GONE, _LAPSED = "unclaimed", "gone", "lapsed"  # why a value was dropped
_WHY = {_GONE: "the connection of the client whose calls named it had ended, and it "
               "was let go with that client's other values",
        _LAPSED: f"the connection of the client whose calls named it had ended, and no "
                 f"connection named that client within {LAPSE_S:g} s (fwdgone.py)"}


class Receiving(HeldBound):
    """Calls held for forwarded values, and the values that came before their calls
    (the base of a replica's `Forwarding`); every method is safe from any thread."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__(runtime)  # (its bound: fwdbound.py; sending: fwdpeers.py)
        self._lock = threading.Lock()
        self._held: dict[str, list[Held]] = {}
        # Values no call has taken yet, oldest first: (ok, value, bytes counted).
        self._arrived = Unclaimed()
        self._taken: OrderedDict[str, None] = OrderedDict()
        # The keys each queued call took, by (connection, call id): `released`
        self._took: dict[tuple[int, int], list[str]] = {}
        # dropped from _arrived, each with why: `_GONE` (its client's connection had
        # ended) or `_UNCLAIMED` (past the bounds)
        self._dropped: OrderedDict[str, str] = OrderedDict()
        self.unclaimed_dropped = 0  # values dropped so, ever
        self.received = 0    # values it received from one
        self.arrived_bytes_max = DEFAULT_CAPACITY  # (the forward store's bytes)
        self.arrived_max = ARRIVED_BOUND
        self._sessions = Sessions()  # the clients its held calls named, those gone
        self.gone_dropped = 0  # values let go because their client was gone

    def hold(self, ch: Channel, call: Call,
             nested: list[tuple[tuple[Any, ...], str]] | tuple[()] = ()) -> bool:
        """True if ``call`` names forwarded values (as arguments, or ``nested`` inside
        them: worker/cache.py's `Forwarded`): it is held (or queued, if they are all
        here already) and the caller must not answer it."""
        h = Held(ch, call)
        for pos, a in _refs(call):
            h.where.setdefault(str(a.key), []).append(pos)
        for path, key in nested:
            h.where.setdefault(key, []).append(path)
        if not h.where:
            return False
        call.inside = None  # (its operands inside are here: not looked for again, queued)
        ready: list[tuple[str, bool, Any]] = []
        dropped = busy = why = ""
        settled: tuple[bool, Any] | None = None
        # (what it holds: its own arguments, measured before any value is put in them)
        n = HELD_ENTRY_BYTES + held_bytes(call.args) + (
            held_bytes(call.kwargs) if call.kwargs else 0)
        with self._lock:
            self._sessions.named(id(ch), h.where)
            for key in h.where:
                got = self._arrived.pop(key)
                if got is not None:
                    self._take(key)
                    ready.append((key, got[0], got[1]))
                    n += got[2]
                elif key in self._dropped:
                    if not dropped:
                        dropped, why = key, self._dropped[key]
                else:
                    h.missing.add(key)
            if h.missing and not dropped and all(ok for _, ok, _ in ready):
                busy = self._held_room(n)
            if dropped or busy:
                # Answered now, as for a failed upstream value: its other values are let
                # go when they come, and nothing of it is queued.
                h.over = True
                self._let_go(h)
            else:
                if h.missing:
                    self._count_held(h, n)
                for key in h.missing:
                    self._held.setdefault(key, []).append(h)
                for key, ok, value in ready:
                    if self._fill(h, key, ok, value):
                        settled = (ok, value)
        if dropped:
            self.rt._send_quietly(ch, Fail(
                call.id, "forward-dropped", "LookupError",
                f"the forwarded value {dropped} was dropped on {self.rt.name} before this "
                "call came: " + (_WHY.get(why) or
                                 f"too many values arrived unclaimed (at most "
                                 f"{self.arrived_max} or {self.arrived_bytes_max} bytes "
                                 "wait for their calls)")))
            return True
        if busy:
            self._refuse_held(ch, call, busy)
            return True
        if settled is not None:
            self._settle(h, *settled)
        return True

    def arrive(self, key: str, ok: bool, value: Any) -> None:
        with self._lock:
            if key in self._arrived or key in self._taken:
                return
            self.received += 1
            waiting = self._held.pop(key, None)
            if waiting is None:
                self._keep(key, ok, value)
                return
            self._take(key)
            settled = [h for h in waiting if self._fill(h, key, ok, value)]
            if ok and any(h.missing and not h.over for h in waiting):
                vb = held_bytes(value)  # (it waits on with them, for their other values)
                for h in waiting:
                    if h.missing and not h.over:
                        self._holding_bytes += vb
                        h.nbytes += vb
        for h in settled:
            self._settle(h, ok, value)

    def released(self, ch: Channel, ids: list[int]) -> None:
        """A ``Steal`` gave calls ``ids`` back to ``ch``'s client, which may send them here
        again: their keys are no longer taken, so values delivered again are kept."""
        if not self._took:
            return
        with self._lock:
            for i in ids:
                for key in self._took.pop((id(ch), i), ()):
                    self._taken.pop(key, None)

    def revoke(self, ch: Channel, ids: set[int]) -> list[int]:
        """``ch``'s calls ``ids`` held here for forwarded values (not started) go (a
        ``Revoke``): the ids of those found. As for a queued call a ``Steal`` gives back,
        the keys they took are no longer taken (a value delivered again is kept), and
        the others are not waited for here."""
        if not ids or not self._held:
            return []
        with self._lock:
            found = {id(h): h for hs in self._held.values() for h in hs
                     if h.ch is ch and h.call.id in ids}
            for h in found.values():
                for key in h.missing:
                    self._unhold(h, key)
                for key in h.where:
                    if key not in h.missing:
                        self._taken.pop(key, None)
                h.missing.clear()
                h.over = True
                self._uncount_held(h)
        return [h.call.id for h in found.values()]

    def ended(self, keys: list[str]) -> None:
        """The consumer of ``keys`` ended (``Cancel`` with keys: this replica gave it back
        to a ``Steal``, and the client says so when it ends): a copy of one that came
        after and waits unclaimed goes, and one that comes later is dropped (taken)."""
        with self._lock:
            for key in keys:
                if key in self._held:  # (never: it ended; a call waiting here keeps it)
                    continue
                self._arrived.pop(key)
                self._take(key)

    def _ran(self, where: tuple[int, int]) -> None:
        """Queued call ``where`` (connection, call id) ran: it gives nothing back now."""
        with self._lock:
            self._took.pop(where, None)

    def _take(self, key: str) -> None:
        self._taken[key] = None
        if len(self._taken) > TAKEN_BOUND:
            self._taken.popitem(last=False)

    def _keep(self, key: str, ok: bool, value: Any) -> None:
        """Hold a value no call has taken yet (the lock held); past the bounds the oldest
        go (a value larger than the byte bound is kept alone, as the forward store does:
        max_frame bounds it), their keys remembered as dropped."""
        if self._sessions.is_gone(key):
            self.gone_dropped += 1  # (its client is gone: no call of it will come)
            self._mark_dropped(key, _GONE)
            return
        self._sessions.arrived(key)  # (a lapsed client's: waits LAPSE_S from now)
        n = ENTRY_BYTES + len(key) + held_bytes(value)
        self._dropped.pop(key, None)  # (delivered again after it was dropped: kept now)
        self._arrived.add(key, ok, value, n)
        while ((self._arrived.nbytes > self.arrived_bytes_max
                or len(self._arrived) > self.arrived_max) and len(self._arrived) > 1):
            old = self._arrived.oldest()
            self._arrived.pop(old)
            self._mark_dropped(old, _UNCLAIMED)
            self.unclaimed_dropped += 1
            if doubling(self.unclaimed_dropped):
                log.warning("worker %s: %d forwarded values dropped so far, unclaimed: more "
                            "than %d (or %d bytes) arrived before their calls; a call that "
                            "names one fails", self.rt.name, self.unclaimed_dropped,
                            self.arrived_max, self.arrived_bytes_max)

    def _mark_dropped(self, key: str, why: str) -> None:
        """(The lock held) ``key``'s value was let go: a call that names it later is
        answered at once, saying ``why``, not held for a value that is not coming."""
        self._dropped[key] = why
        if len(self._dropped) > TAKEN_BOUND:
            self._dropped.popitem(last=False)

    def _fill(self, h: Held, key: str, ok: bool, value: Any) -> bool:
        """(The lock held) ``key``'s value for ``h``: True if that settles it, to be
        answered (a failed value) or queued (its last value) by `_settle`."""
        h.missing.discard(key)
        if not h.missing:
            self._uncount_held(h)  # (it waits for nothing more: answered or queued now)
        if h.over:
            return False
        if not ok:
            h.over = True
            self._let_go(h)
            return True
        for pos in h.where[key]:
            if isinstance(pos, int):
                h.call.args[pos] = value
            elif isinstance(pos, str):
                if h.call.kwargs is not None:
                    h.call.kwargs[pos] = value
            else:
                _place(h.call, pos, value)
        return not h.missing

    def _let_go(self, h: Held) -> None:
        """(The lock held) ``h`` is answered: it waits for nothing more, and the values
        it still waited for are taken, so they are not kept when they come. (It stayed
        held for them, with its arguments, for ever if they never came.)"""
        for key in h.missing:
            self._unhold(h, key)
            self._take(key)
        h.missing.clear()
        self._uncount_held(h)

    def _unhold(self, h: Held, key: str) -> None:
        """(The lock held) ``h`` waits for ``key``'s value no more."""
        rest = [x for x in self._held.get(key, ()) if x is not h]
        if rest:
            self._held[key] = rest
        else:
            self._held.pop(key, None)

    def _settle(self, h: Held, ok: bool, value: Any) -> None:
        """Answer ``h`` for a failed upstream value, or queue it: it has every value."""
        if ok:
            where = (id(h.ch), h.call.id)
            with self._lock:  # (before it is queued: a Steal may give it back at once)
                self._took[where] = list(h.where)
                if len(self._took) > TAKEN_BOUND:  # (one left behind somehow: bounded)
                    del self._took[next(iter(self._took))]
            if not self.rt._enqueue(h.ch, h.call):
                # Refused (a full queue that rejects, an interface not served): answered,
                # it never runs here nor is given back, and its keys stay taken.
                with self._lock:
                    self._took.pop(where, None)
            return
        kind, message, tb = _failure(value)
        said = message  # (a failure from further upstream says so once, not twice)
        if not said.startswith(UPSTREAM_FAILED):
            said = UPSTREAM_FAILED + said
        self.rt._send_quietly(h.ch, Fail(h.call.id, "exception", kind, said, tb))

    def held_calls(self) -> int:
        """Calls held now for forwarded values (each once, however many it waits for)."""
        with self._lock:
            return len({id(h) for hs in self._held.values() for h in hs})

    def _forget(self, ch: Channel) -> None:
        """(The lock held) ``ch`` ended: the values that wait for the keys of a nonce
        only it named go (found by nonce: O(its own)), and those that come later go as
        they come."""
        for nonce in self._sessions.ended(id(ch)):
            self._let_nonce_go(nonce, _GONE)

    def _let_nonce_go(self, nonce: str, why: str) -> None:
        """(The lock held) the values waiting for ``nonce``'s keys go."""
        for key in self._arrived.forget(nonce):
            self._mark_dropped(key, why)
            self.gone_dropped += 1

    def _drop_held(self, ch: Channel) -> None:
        """(The lock held) ``ch``'s client is gone: its held calls go, what its queued
        calls took, and the values that wait for its keys (`_forget`). The keys they
        took are taken no more: a client that dials again sends them again (as a Steal's
        `released`), and their values delivered again are for them."""
        if id(ch) in self._sessions.nonces:
            self._forget(ch)
        for nonce in self._sessions.expired():  # (lapsed clients not back: fwdgone.py)
            self._let_nonce_go(nonce, _LAPSED)
        for k in [k for k in self._took if k[0] == id(ch)]:
            for key in self._took.pop(k):
                self._taken.pop(key, None)
        seen: set[int] = set()  # (a call is under each key it lacks)
        for key in list(self._held):
            rest = []
            for h in self._held[key]:
                if h.ch is ch:
                    if id(h) not in seen:
                        seen.add(id(h))
                        for took in h.where:
                            if took not in h.missing:
                                self._taken.pop(took, None)
                    self._uncount_held(h)
                else:
                    rest.append(h)
            if rest:
                self._held[key] = rest
            else:
                del self._held[key]


def _failure(value: Any) -> tuple[str, str, str]:
    """The type, message and traceback of a failed value as a ``Deliver`` carries it:
    a list of up to three texts (every sender writes three). Any other form, a broken
    peer's, is said as such, not made a text of (a received array's ``str()`` can
    raise: a str array holding a code point past U+10FFFF raises SystemError)."""
    if isinstance(value, list) and len(value) <= 3 and all(type(x) is str for x in value):
        kind, message, tb = [*value, "", "", ""][:3]
        return kind, message, tb
    form = (f"a list of {len(value)} ({', '.join(type(x).__name__ for x in value[:4])})"
            if isinstance(value, list) else f"a value of type {type(value).__name__}")
    return ("ProtocolError", f"the failure came as {form}, not [type, message, traceback] "
            "texts (the peer that sent it is broken)", "")


def _place(call: Call, path: tuple[Any, ...], value: Any) -> None:
    """Put ``value`` at ``path`` inside ``call``'s arguments (its argument's position or
    keyword, then each list's index or map's key: where `resolve` found its Ref)."""
    at, *steps, last = path
    x: Any = call.args[at] if isinstance(at, int) else (call.kwargs or {})[at]
    for step in steps:
        x = x[step]
    x[last] = value


def _refs(call: Call) -> list[tuple[int | str, Ref]]:
    out: list[tuple[int | str, Ref]] = [
        (i, a) for i, a in enumerate(call.args) if type(a) is Ref and a.kind == "fwd"]
    if call.kwargs:
        out.extend((k, v) for k, v in call.kwargs.items() if type(v) is Ref and v.kind == "fwd")
    return out
