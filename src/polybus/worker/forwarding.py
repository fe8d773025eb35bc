"""Forwarding between stages on a replica (promise pipelining, seeds/001 Fig. 3(c)).

Producer side: the client's ``Forward(id, pkey, key, to)`` asks that when call ``id``
is answered its outcome also goes to the replica at ``to`` as ``Deliver(key, ...)``, over
a worker-to-worker connection authenticated with the cluster token. The client is then
answered ``Result(id, Ref("fwd", [keys delivered]))`` instead of the value, and the
value is kept under ``pkey`` in a store of its own (`Forwarding.kept`, not the operand
cache) for a ``Fetch`` or a later ``Forward`` (one that comes after the answer is served
from there; one that comes after the call was answered by value is forgotten on the
client's ``Cancel``). A failure is sent on as ``Deliver(key, ok=False, [type, message,
traceback])`` and to the client as usual. A value it cannot send on (the consumer's
replica unreachable, a value the codec cannot carry) is said to the client,
``Undelivered(key, to, type, message)``, which fails the consumer call: only the
producer's replica knows. ``Keep(id, pkey, key)``, for a consumer still at the client:
the value is pinned (fwdstore.py) until the ``Forward`` of ``key`` comes, and the
client answered ``Ref("fwd", [])``; with no room for it, by value, as if not asked.
A ``Forward`` with ``hold`` (its consumer may be moved by migration and need the value
again) sends the value and keeps it pinned for its key until ``Keep(..., release=True)``.

Consumer side: a call naming ``Ref("fwd", key)`` is held (not queued) until every such
value has arrived, then queued like any call; a failed upstream value answers it with a
Fail naming the upstream failure, and lets go of it: the other values it waited for are
taken (not kept) when they come. The client sends such a failure itself when the value
will never come (its producer lost or given up, or Undelivered). A key delivered twice
(a producer re-run, the client repairing a race) is taken once; a queued call a
``Steal`` gives back gives back its keys, so that, placed here again, it takes them
again. A value that arrives before its call (the usual order: the producer's replica
sends it as soon as it has it) waits for it, bounded: at most ``ARRIVED_BOUND`` values
and the forward store's bytes wait at once, and past that the oldest is dropped and its
key remembered (as many as ``TAKEN_BOUND``), so that the call naming it is answered at
once, ``Fail(kind="forward-dropped")``, not held for ever.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from polybus.errors import UPSTREAM_FAILED
from polybus.transport.channel import Channel
from polybus.wire.codec import Ref
from polybus.wire.messages import (
    Call,
    Deliver,
    Fail,
    Fetch,
    Fetched,
    Forward,
    Keep,
    Message,
    Result,
)
from polybus.worker.cache import held_bytes
from polybus.worker.fwdpeers import Peers
from polybus.worker.fwdstore import ForwardStore, stored

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

log = logging.getLogger("polybus.worker")
# An answer this large is worth keeping off the client: before it is sent, the replica
# reads what that client sent while the call ran (WorkerRuntime.heed), so a Forward
# request for it is seen in time. A producer answering inline read nothing meanwhile,
# and a 5 ms stage sent its 1.6 MB value to the client in 3 runs of 6.
FORWARD_MIN = 64 * 1024
HEEDED = frozenset({np.ndarray, bytes, bytearray})  # the kinds of value that may be so large
TAKEN_BOUND = 100_000  # keys remembered as taken, to drop late duplicates (and as dropped)
# Values that arrived with no call yet to take them, at most (and at most the forward
# store's bytes, ``kept.capacity``). Many may wait legitimately: a busy replica reads a
# client's calls late, while their values come straight from the producers. Unbounded,
# a peer's Delivers for keys no call names were kept for ever.
ARRIVED_BOUND = 100_000
ENTRY_BYTES = 200  # counted for each such value beside its own bytes (its key, its place)
HOLD = "+"  # a target that is no address: the value stays pinned for its key (Forward.hold)


@dataclass(eq=False)
class _Held:
    ch: Channel
    call: Call
    missing: set[str] = field(default_factory=set)
    where: dict[str, list[int | str]] = field(default_factory=dict)  # key -> arg positions
    over: bool = False


def _large(value: Any) -> bool:
    """An array or bytes of FORWARD_MIN or more (its type is in HEEDED)."""
    n = value.nbytes if type(value) is np.ndarray else len(value)
    return bool(n >= FORWARD_MIN)


class Forwarding(Peers):
    """A replica's forwarding state; every method is safe from any of its threads."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__(runtime)  # (sending to the other replicas: fwdpeers.py)
        self._lock = threading.Lock()
        self.targets: dict[tuple[int, int], tuple[str, list[tuple[str, str]]]] = {}
        self._held: dict[str, list[_Held]] = {}
        # Values no call has taken yet, oldest first: (ok, value, bytes counted).
        self._arrived: dict[str, tuple[bool, Any, int]] = {}
        self._arrived_bytes = 0
        self._taken: OrderedDict[str, None] = OrderedDict()
        # The keys each queued call took, by (connection, call id): `released`
        self._took: dict[tuple[int, int], list[str]] = {}
        self._dropped: OrderedDict[str, None] = OrderedDict()  # dropped from _arrived
        self.unclaimed_dropped = 0  # values dropped so, ever
        self.received = 0    # values it received from one
        # Answers forwarded to other stages, kept for the client's Fetch and for later
        # Forwards, and answers kept for consumers still at the client (Keep): a store of
        # their own (fwdstore.py), not the operand cache, whose bound is the caching
        # interfaces' cache_bytes and whose next Put would evict them.
        self.kept = ForwardStore()
        self.arrived_bytes_max = self.kept.capacity
        self.arrived_max = ARRIVED_BOUND

    # -- messages --------------------------------------------------------------------
    def handle(self, ch: Channel, msg: Message) -> None:
        if isinstance(msg, Forward):
            self._forward(ch, msg)
        elif isinstance(msg, Keep):
            self._keep_for(ch, msg)
        elif isinstance(msg, Deliver):
            self.arrive(msg.key, msg.ok, msg.value)
        elif isinstance(msg, Fetch):
            try:
                value = self.kept.get(msg.pkey)
                reply = Fetched(msg.req, True, value)
            except KeyError:
                reply = Fetched(msg.req, False, None)
            self.rt._send_quietly(ch, reply)

    def _forward(self, ch: Channel, msg: Forward) -> None:
        with self._lock:
            if not self.kept.had(msg.pkey):
                # the call has not been answered yet (or was, by value; see client)
                entry = self.targets.setdefault((id(ch), msg.id), (msg.pkey, []))
                entry[1].append((msg.to, msg.key))
                if msg.hold:
                    entry[1].append((HOLD, msg.key))
                return
        try:
            if msg.hold:  # (pinned for it, if there is room; else it stays in the LRU)
                self.kept.keep(msg.pkey, msg.key)
                value = self.kept.get(msg.pkey)
            else:
                value = self.kept.take(msg.pkey, msg.key)
        except KeyError:  # evicted: the consumer fails rather than waits for ever
            value, ok = ["LookupError", "the forwarded value was evicted from its replica", ""], False
        else:
            ok = True
        self._send(msg.to, Deliver(msg.key, ok, value), ch)

    def _keep_for(self, ch: Channel, msg: Keep) -> None:
        """A target with no address (``""``: kept for the Forward of ``msg.key``), or,
        answered already with its value here, that value pinned now (if not evicted)."""
        with self._lock:
            if msg.release:  # (its consumer ended at the client: kept for no one now)
                entry = self.targets.get((id(ch), msg.id))
                if entry is not None:
                    go = {("", msg.key), (HOLD, msg.key)}
                    entry[1][:] = [t for t in entry[1] if t not in go]
                    if not entry[1]:
                        del self.targets[(id(ch), msg.id)]
                self.kept.unkeep(msg.pkey, msg.key)
                return
            if self.kept.had(msg.pkey):
                self.kept.keep(msg.pkey, msg.key)
                return
            entry = self.targets.setdefault((id(ch), msg.id), (msg.pkey, []))
            entry[1].append(("", msg.key))

    def finished(self, ch: Channel, call: Call, reply: Message) -> Message:
        """The answer to send the client for ``call``, after forwarding it where asked.
        A large value waits until its client's messages are read (FORWARD_MIN). The
        inline paths call this only for such a value, or with targets waiting."""
        if type(reply) is Result and type(reply.value) in HEEDED and _large(reply.value):
            self.rt.heed(ch)
        where = (id(ch), call.id)
        if self._took:
            with self._lock:
                self._took.pop(where, None)  # (run: it gives nothing back now)
        if not self.targets:  # the common case: nothing asked, no lock taken
            return reply
        result = reply if type(reply) is Result else None
        kept = stored(result.value) if result is not None and where in self.targets else None
        by_value = False
        with self._lock:  # (stored before the lock goes: a Forward then finds it here)
            entry = self.targets.pop(where, None)
            if entry is None:
                return reply
            pkey, tos = entry
            sends = [(to, key) for to, key in tos if to and to != HOLD]
            if result is not None:
                kept = stored(result.value) if kept is None else kept
                # Pinned for the consumers still at the client (Keep: no address), but
                # for those placed since (a Forward of the same key), which get it now;
                # and for those that may move (a Forward with hold), which get it too.
                keeps = ({key for to, key in tos if not to} - {key for _, key in sends}
                         | {key for to, key in tos if to == HOLD})
                # No room to pin it for the consumers at the client: the answer goes by
                # value, which the client sends on to them (those placed get it from
                # here too; a value delivered twice is taken once).
                by_value = bool(keeps) and not self.kept.pin(pkey, kept, ch, keeps)
                if not keeps:
                    if not sends:
                        return reply
                    self.kept.put(pkey, kept, ch)  # freed with its client
                elif by_value and not sends:
                    return reply
        if result is not None:
            # (one not sent is said to the client before this answer: it does not ask again)
            sent = [key for to, key in sends if self._send(to, Deliver(key, True, kept), ch)]
            return reply if by_value else Result(call.id, Ref("fwd", sent))
        if isinstance(reply, Fail):
            for to, key in sends:  # (if it cannot, the client sends the Fail on itself)
                self._send(to, Deliver(key, False, [reply.type, reply.message, reply.traceback]))
        return reply

    def forget(self, ch: Channel, ids: list[int]) -> None:
        """``ch``'s client wants nothing more of calls ``ids`` (``Cancel``): their Forward
        requests go. One that came after its call was answered by value was kept,
        waiting for an answer already sent, until the client went."""
        if not self.targets and not self._took:
            return
        with self._lock:
            for i in ids:
                self.targets.pop((id(ch), i), None)
                self._took.pop((id(ch), i), None)

    def released(self, ch: Channel, ids: list[int]) -> None:
        """A ``Steal`` gave calls ``ids`` back to ``ch``'s client, which may send them here
        again: their keys are no longer taken, so values delivered again are kept."""
        if not self._took:
            return
        with self._lock:
            for i in ids:
                for key in self._took.pop((id(ch), i), ()):
                    self._taken.pop(key, None)

    # -- consumer side -----------------------------------------------------------------
    def hold(self, ch: Channel, call: Call) -> bool:
        """True if ``call`` names forwarded values: it is held (or queued, if they are all
        here already) and the caller must not answer it."""
        h = _Held(ch, call)
        for pos, a in _refs(call):
            h.where.setdefault(str(a.key), []).append(pos)
        if not h.where:
            return False
        ready: list[tuple[str, bool, Any]] = []
        dropped = ""
        settled: tuple[bool, Any] | None = None
        with self._lock:
            for key in h.where:
                got = self._arrived.pop(key, None)
                if got is not None:
                    self._arrived_bytes -= got[2]
                    self._take(key)
                    ready.append((key, got[0], got[1]))
                elif key in self._dropped:
                    dropped = dropped or key
                else:
                    h.missing.add(key)
            if dropped:
                # Answered now, as for a failed upstream value: its other values are let
                # go when they come, and nothing of it is queued.
                h.over = True
                self._let_go(h)
            else:
                for key in h.missing:
                    self._held.setdefault(key, []).append(h)
                for key, ok, value in ready:
                    if self._fill(h, key, ok, value):
                        settled = (ok, value)
        if dropped:
            self.rt._send_quietly(ch, Fail(
                call.id, "forward-dropped", "LookupError",
                f"the forwarded value {dropped} was dropped on {self.rt.name} before this "
                f"call came: too many values arrived unclaimed (at most {self.arrived_max} "
                f"or {self.arrived_bytes_max} bytes wait for their calls)"))
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
        for h in settled:
            self._settle(h, ok, value)

    def _take(self, key: str) -> None:
        self._taken[key] = None
        if len(self._taken) > TAKEN_BOUND:
            self._taken.popitem(last=False)

    def _keep(self, key: str, ok: bool, value: Any) -> None:
        """Hold a value no call has taken yet (the lock held); past the bounds the oldest
        go (a value larger than the byte bound is kept alone, as the forward store does:
        max_frame bounds it), their keys remembered as dropped."""
        n = ENTRY_BYTES + len(key) + held_bytes(value)
        self._dropped.pop(key, None)  # (delivered again after it was dropped: kept now)
        self._arrived[key] = (ok, value, n)
        self._arrived_bytes += n
        while ((self._arrived_bytes > self.arrived_bytes_max
                or len(self._arrived) > self.arrived_max) and len(self._arrived) > 1):
            old = next(iter(self._arrived))
            self._arrived_bytes -= self._arrived.pop(old)[2]
            self._dropped[old] = None
            if len(self._dropped) > TAKEN_BOUND:
                self._dropped.popitem(last=False)
            self.unclaimed_dropped += 1
            if self.unclaimed_dropped & (self.unclaimed_dropped - 1) == 0:  # 1, 2, 4, ...
                log.warning("worker %s: %d forwarded values dropped so far, unclaimed: more "
                            "than %d (or %d bytes) arrived before their calls; a call that "
                            "names one fails", self.rt.name, self.unclaimed_dropped,
                            self.arrived_max, self.arrived_bytes_max)

    def _fill(self, h: _Held, key: str, ok: bool, value: Any) -> bool:
        """(The lock held) ``key``'s value for ``h``: True if that settles it, to be
        answered (a failed value) or queued (its last value) by `_settle`."""
        h.missing.discard(key)
        if h.over:
            return False
        if not ok:
            h.over = True
            self._let_go(h)
            return True
        for pos in h.where[key]:
            if isinstance(pos, int):
                h.call.args[pos] = value
            elif h.call.kwargs is not None:
                h.call.kwargs[pos] = value
        return not h.missing

    def _let_go(self, h: _Held) -> None:
        """(The lock held) ``h`` is answered: it waits for nothing more, and the values
        it still waited for are taken, so they are not kept when they come. (It stayed
        held for them, with its arguments, for ever if they never came.)"""
        for key in h.missing:
            rest = [x for x in self._held.get(key, ()) if x is not h]
            if rest:
                self._held[key] = rest
            else:
                self._held.pop(key, None)
            self._take(key)
        h.missing.clear()

    def _settle(self, h: _Held, ok: bool, value: Any) -> None:
        """Answer ``h`` for a failed upstream value, or queue it: it has every value."""
        if ok:
            with self._lock:
                self._took[(id(h.ch), h.call.id)] = list(h.where)
                if len(self._took) > TAKEN_BOUND:  # (one left behind somehow: bounded)
                    del self._took[next(iter(self._took))]
            self.rt._enqueue(h.ch, h.call)
            return
        kind, message, tb = ([*value, "", "", ""][:3] if isinstance(value, list)
                             else ["RemoteError", str(value), ""])
        said = str(message)  # (a failure from further upstream says so once, not twice)
        if not said.startswith(UPSTREAM_FAILED):
            said = UPSTREAM_FAILED + said
        self.rt._send_quietly(h.ch, Fail(h.call.id, "exception", str(kind), said, str(tb)))

    def held_calls(self) -> int:
        """Calls held now for forwarded values (each once, however many it waits for)."""
        with self._lock:
            return len({id(h) for hs in self._held.values() for h in hs})

    def dropped(self, ch: Channel) -> None:
        """``ch``'s client is gone: its held calls and forwarding requests go too."""
        with self._lock:
            for key in list(self._held):
                rest = [h for h in self._held[key] if h.ch is not ch]
                if rest:
                    self._held[key] = rest
                else:
                    del self._held[key]
            for k in [k for k in self.targets if k[0] == id(ch)]:
                del self.targets[k]
            for k in [k for k in self._took if k[0] == id(ch)]:
                del self._took[k]
        self.kept.release(ch)  # the answers kept for it alone


def _refs(call: Call) -> list[tuple[int | str, Ref]]:
    out: list[tuple[int | str, Ref]] = [
        (i, a) for i, a in enumerate(call.args) if type(a) is Ref and a.kind == "fwd"]
    if call.kwargs:
        out.extend((k, v) for k, v in call.kwargs.items() if type(v) is Ref and v.kind == "fwd")
    return out
