"""Forwarding between stages on a replica (promise pipelining, seeds/001 Fig. 3(c)).

Producer side: the client's ``Forward(id, pkey, key, to)`` asks that when call ``id``
is answered its outcome also goes to the replica at ``to`` as ``Deliver(key, ...)``, over
a worker-to-worker connection authenticated with the cluster token. The client is then
answered ``Result(id, Ref("fwd", [keys delivered]))`` instead of the value, and the
value is kept under ``pkey`` in a store of its own (`Forwarding.kept`, not the operand
cache) for a ``Fetch`` or a later ``Forward`` (one that comes after the answer is served
from there; one that comes after the call was answered by value is forgotten on the
client's ``Cancel``). A failure is sent on as ``Deliver(key, ok=False, [type, message,
traceback])`` (cut to fit the frame limit: fwdpeers.py) and to the client as usual
(cut likewise: replies.send_quietly). A value it cannot send on (the consumer's
replica unreachable, a value the codec cannot carry) is said to the client,
``Undelivered(key, to, type, message)``, which fails the consumer call: only the
producer's replica knows. ``Keep(id, pkey, key)``, for a consumer still at the client:
the value is pinned (fwdstore.py) until the ``Forward`` of ``key`` comes, and the
client answered ``Ref("fwd", [])``; with no room for it, by value, as if not asked.
What waits for an answer not given yet is bounded (fwdasked.py): a ``Forward`` past
the bound is said at once (``Undelivered``, BusyError), a ``Keep`` goes as not asked.
A ``Keep`` with ``least`` (``forward = "keep"``, sent before its call) asks that only of
an answer of ``least`` bytes or more (heldvalue.held_bytes): a smaller one goes by value.
A ``Forward`` or ``Keep`` with an ``index`` asks the same of call ``index`` of batch
``id`` (a ``CallBatch``): done before the batch is answered, its slot of the
``BatchResult`` then holding the ``Ref`` (`finished_batch`); one whose answer has no
value it names (an index of a plain call or past the batch, none of a batch) is said,
not served (fwdasked.py `_unnamed`). A ``Forward`` with
``hold`` (its consumer may be moved by migration and need the value again) sends the
value and keeps it pinned for its key until ``Keep(..., release=True)``.

Consumer side: worker/fwdheld.py (`Receiving`, which this class extends).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from polybus.errors import TransportError
from polybus.lazynumpy import is_plain_array, ndarray_type
from polybus.plural import plural
from polybus.registry.limits import ADDRESS_MAX
from polybus.transport.channel import Channel
from polybus.wire.codec import Ref
from polybus.wire.messages import (
    BatchResult,
    Call,
    Deliver,
    Fail,
    Fetch,
    Fetched,
    Forward,
    Keep,
    Message,
    Result,
    Undelivered,
)
from polybus.worker import unread
from polybus.worker.fwdaddress import not_an_address, quoted
from polybus.worker.fwdasked import HOLD, Asking, Target
from polybus.worker.fwdheld import ARRIVED_BOUND, HELD_BOUND, TAKEN_BOUND
from polybus.worker.fwdstore import ForwardStore, stored
from polybus.worker.heldvalue import held_bytes
from polybus.worker.replies import UNSENDABLE, internal_failure, text_of

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

log = logging.getLogger("polybus.worker")

__all__ = ["ARRIVED_BOUND", "FORWARD_MIN", "HELD_BOUND", "HOLD", "TAKEN_BOUND", "Forwarding",
           "to_finish"]

# An answer this large is worth keeping off the client: before it is sent, the replica
# reads what that client sent while the call ran (WorkerRuntime.heed), so a Forward
# request for it is seen in time. A producer answering inline read nothing meanwhile,
# and a 5 ms stage sent its 1.6 MB value to the client in 3 runs of 6.
FORWARD_MIN = 64 * 1024


# What to do with an answer so asked: (Delivers to send, answered by value, kept value)
_Plan = tuple[list[tuple[str, str]], bool, Any] | None


def heeded(value: Any) -> bool:
    """Whether ``value`` is of a kind that may be so large: an array, bytes, bytearray."""
    t = type(value)
    return t is bytes or t is bytearray or t is ndarray_type()


def to_finish(fw: Forwarding, reply: Message) -> bool:
    """Whether `Forwarding.finished` has anything to do for ``reply``: requests waiting,
    queued calls taken, or a large value (`heeded`, FORWARD_MIN or more). Else it returns
    ``reply`` as it is, and the inline paths skip its call (worker/direct.py)."""
    if fw.waiting or fw._took:
        return True
    if type(reply) is not Result:
        return False
    v = reply.value
    t = type(v)
    if t is bytes or t is bytearray:
        return len(v) >= FORWARD_MIN
    return t is ndarray_type() and bool(v.nbytes >= FORWARD_MIN)


def _large(value: Any) -> bool:
    """An array or bytes of FORWARD_MIN or more (a value `heeded`)."""
    n = value.nbytes if is_plain_array(value) else len(value)
    return bool(n >= FORWARD_MIN)


class Forwarding(Asking):
    """A replica's forwarding state; every method is safe from any of its threads."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        # (what is asked of answers: fwdasked.py; taking values in: fwdheld.py; sending:
        # fwdpeers.py)
        super().__init__(runtime)
        # The clients (by connection) that ever sent a Forward or Keep: the others'
        # batches are answered with no look for what was asked (`finished_batch`).
        self.asking: set[int] = set()
        # Answers forwarded to other stages, kept for the client's Fetch and for later
        # Forwards, and answers kept for consumers still at the client (Keep): a store of
        # their own (fwdstore.py), not the operand cache, whose bound is the caching
        # interfaces' cache_bytes and whose next Put would evict them.
        self.kept = ForwardStore()
        self.arrived_bytes_max = self.kept.capacity

    # -- messages --------------------------------------------------------------------
    def handle(self, ch: Channel, msg: Message) -> None:
        if isinstance(msg, Forward):
            self.asking.add(id(ch))
            self._forward(ch, msg)
        elif isinstance(msg, Keep):
            self.asking.add(id(ch))
            self._keep_for(ch, msg)
        elif isinstance(msg, Deliver):
            self.arrive(msg.key, msg.ok, msg.value)
        elif isinstance(msg, Fetch):
            try:
                value = self.kept.get(msg.pkey)
            except KeyError:
                self.rt._send_quietly(ch, Fetched(msg.req, False, None))
                return
            try:
                unread.send(ch, Fetched(msg.req, True, value))
            except TransportError:
                pass  # the client is gone; the poller drops its connection
            except UNSENDABLE as exc:  # (over the frame limit: said, not taken for "gone")
                self.rt._send_quietly(ch, Fetched(msg.req, False, [
                    type(exc).__name__, f"it cannot be sent back: {text_of(exc)}"]))

    def _forward(self, ch: Channel, msg: Forward) -> None:
        if len(msg.to) > ADDRESS_MAX:  # (said now, not kept until the answer: fwdaddress.py)
            self.rt._send_quietly(ch, Undelivered(
                msg.key, msg.to, "TransportError",
                f"{self.rt.name} could not send the value to {quoted(msg.to)}: "
                f"{not_an_address(msg.to)}"))
            return
        why = ""
        with self._lock:
            if not self.kept.had(msg.pkey):
                # the call has not been answered yet (or was, by value; see client)
                asked = [(msg.to, msg.key)] + ([(HOLD, msg.key)] if msg.hold else [])
                why = self._ask(ch, msg, asked)  # (asked twice: sent once)
                if not why:
                    return
        if why:
            self._refused(ch, msg, why)
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
        # (this thread reads the sockets: a dial of the peer must not wait here)
        self.send_later(msg.to, Deliver(msg.key, ok, value), ch)

    def _keep_for(self, ch: Channel, msg: Keep) -> None:
        """A target with no address (``""``: kept for the Forward of ``msg.key``), or,
        answered already with its value here, that value pinned now (if not evicted)."""
        with self._lock:
            if msg.release:  # (its consumer ended at the client: kept for no one now)
                entry = self._target(ch, msg, make=False)
                if entry is not None:
                    go = {("", msg.key), (HOLD, msg.key)}
                    self.asks.remove(id(ch), entry[0], [t for t in entry[1] if t in go])
                    entry[1][:] = [t for t in entry[1] if t not in go]
                    if not entry[1]:
                        self._untarget(ch, msg)
                sized = self.sized.get((id(ch), msg.id))
                if sized is not None and sized[0] == msg.key:  # (a key may be "")
                    del self.sized[(id(ch), msg.id)]
                self.kept.unkeep(msg.pkey, msg.key, msg.free)
                return
            if self.kept.had(msg.pkey):
                self.kept.keep(msg.pkey, msg.key)
                return
            why = self._ask(ch, msg, [("", msg.key)])
            if not why and msg.least > 0 and msg.index < 0:
                self.sized[(id(ch), msg.id)] = (msg.key, msg.least)
        if why:
            self._refused(ch, msg, why)

    def finished(self, ch: Channel, call: Call, reply: Message) -> Message:
        """The answer to send the client for ``call``, after forwarding it where asked.
        A large value waits until its client's messages are read (FORWARD_MIN). The
        inline paths call this only for such a value, or with requests waiting. Requests
        with an index (`slots`) of this call, which is no batch, name no value: said."""
        if type(reply) is Result and heeded(reply.value) and _large(reply.value):
            self.rt.heed(ch)
        where = (id(ch), call.id)
        if self._took:
            self._ran(where)  # (it ran: a Steal gives nothing of it back now)
        if not self.waiting:  # the common case: nothing asked, no lock taken
            return reply
        result = reply if type(reply) is Result else None
        sized = self.sized.get(where)  # (a small answer is not kept for its Keep's key)
        small = sized is not None and result is not None and held_bytes(result.value) < sized[1]
        kept = (stored(result.value) if result is not None and where in self.targets
                and not small else None)
        with self._lock:  # (stored before the lock goes: a Forward then finds it here)
            entry = self.targets.pop(where, None)
            if entry is not None:
                self.asks.remove(where[0], *entry)
            unnamed = self.slots.pop(where, None)  # (only a batch's calls have an index)
            for e in (unnamed or {}).values():
                self.asks.remove(where[0], *e)
            if self.sized.pop(where, None) is not None and small and entry is not None:
                entry = (entry[0], [t for t in entry[1] if t != ("", sized[0])])  # type: ignore[index]
            plan = None if entry is None else self._plan(ch, entry, result, kept)
        for i, e in (unnamed or {}).items():
            self._unnamed(ch, e, f"call {call.id} has no value at index {i} (a Call, not a "
                                 "batch: only a CallBatch's calls have an index)")
        return self._carry_out(ch, reply, plan)  # type: ignore[arg-type]

    def finished_batch(self, ch: Channel, reply: BatchResult) -> None:
        """``reply`` (an aggregated batch's answer) once its calls' values are forwarded
        where asked (``Forward``/``Keep`` with an index): each as `finished` does a
        call's, a forwarded value's slot then ``Ref("fwd", [keys delivered])``, and a
        failed call's failure sent on to its consumers. Changed in place. A call whose
        forwarding fails in polybus's own steps fails alone (`_fault`). A large value
        waits for the client's requests, as in `finished`, whether or not that client
        asked before: its first may be on its way, for a consumer made once the batch was
        written. Nothing more is looked at for a client that never asked. A request that
        names no value of the batch (an index past its calls; no index: a batch has no
        value of its own) is said, not served (fwdasked.py `_unnamed`)."""
        values = reply.values
        arr = ndarray_type()
        for v in values:  # (`heeded` and `_large`, inlined: this runs on every batch)
            t = type(v)
            if t is arr:
                if v.nbytes >= FORWARD_MIN:
                    self.rt.heed(ch)
                    break
            elif (t is bytes or t is bytearray) and len(v) >= FORWARD_MIN:
                self.rt.heed(ch)
                break
        if id(ch) not in self.asking:
            return
        where = (id(ch), reply.id)
        asked = self.slots.get(where)
        if asked is None and where not in self.targets:
            return
        failed = {f.id: f for f in reply.fails}
        n = len(values)
        copies = {i: stored(values[i]) for i in list(asked or ()) if i < n and i not in failed}
        answers: dict[int, Result | Fail] = {}
        plans: dict[int, tuple[Target, _Plan]] = {}
        faults: dict[int, tuple[Target, Exception]] = {}
        unnamed: list[tuple[Target, str]] = []
        batch = f"a batch of {plural(n, 'call')}"
        with self._lock:  # (all stored before the lock goes, as in `finished`)
            own = self.targets.pop(where, None)  # (asked with no index)
            if own is not None:
                self.asks.remove(where[0], *own)
                unnamed.append((own, f"call {reply.id} has no value of its own ({batch}: "
                                     "a request names one of them by its index)"))
            self.sized.pop(where, None)
            for i, entry in (self.slots.pop(where, None) or {}).items():
                self.asks.remove(where[0], *entry)
                if i >= n:
                    unnamed.append((entry, f"call {reply.id} has no value at index {i} "
                                           f"({batch})"))
                else:
                    answers[i] = failed.get(i) or Result(i, values[i])
                    result = answers[i] if type(answers[i]) is Result else None
                    try:
                        plans[i] = entry, self._plan(ch, entry, result, copies.get(i))  # type: ignore[arg-type]
                    except Exception as exc:
                        faults[i] = entry, exc
        for entry, why in unnamed:
            self._unnamed(ch, entry, why)
        for i, (entry, plan) in plans.items():
            try:
                out = self._carry_out(ch, answers[i], plan)
            except Exception as why:
                faults[i] = entry, why
                continue
            if type(out) is Result:
                values[i] = out.value
        for i, (entry, error) in faults.items():
            self._fault(ch, reply, i, entry, error)

    def _fault(self, ch: Channel, reply: BatchResult, i: int, entry: Target,
               exc: Exception) -> None:
        """Forwarding call ``i`` of ``reply``'s batch met ``exc`` in polybus's own steps:
        logged, that call fails alone (the client fails its consumers), and nothing is
        pinned for it."""
        log.error("worker %s: forwarding call %d of batch %d failed", self.rt.name, i,
                  reply.id, exc_info=exc)
        pkey, tos = entry
        for to, key in tos:
            if not to or to == HOLD:  # (a Keep's pin, or a hold's)
                self.kept.unkeep(pkey, key)
        reply.values[i] = None
        reply.fails[:] = [f for f in reply.fails if f.id != i]
        reply.fails.append(internal_failure(self.rt.name, i, exc))

    def _plan(self, ch: Channel, entry: Target, result: Result | None, kept: Any) -> _Plan:
        """(The lock held) what is to be done with the answer of a call asked ``entry``:
        its value (``result``, ``kept`` its copy to store, if made) kept here as asked,
        and the Delivers to send; None if the answer goes as it is, sending nothing."""
        pkey, tos = entry
        sends = [(to, key) for to, key in tos if to and to != HOLD]
        by_value = False
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
                    return None
                self.kept.put(pkey, kept, ch)  # freed with its client
            elif by_value and not sends:
                return None
        return sends, by_value, kept

    def _carry_out(self, ch: Channel, reply: Result | Fail, plan: _Plan) -> Result | Fail:
        """Send what ``plan`` (`_plan`) says; the answer for the client."""
        if plan is None:
            return reply
        sends, by_value, kept = plan
        if type(reply) is Result:
            # (one not sent is said to the client before this answer: it does not ask again)
            sent = [key for to, key in sends if self._send(to, Deliver(key, True, kept), ch)]
            return reply if by_value else Result(reply.id, Ref("fwd", sent))
        if isinstance(reply, Fail):
            # Cut to fit if over the frame limit (fwdpeers.py). One that cannot go at all
            # is said to no one: the client sends this Fail on itself when it comes (an
            # Undelivered, read first, would fail the consumer with its own text instead).
            for to, key in sends:
                self._send(to, Deliver(key, False, [reply.type, reply.message, reply.traceback]),
                           asker=ch)
        return reply

    def forget(self, ch: Channel, ids: list[int]) -> None:
        """``ch``'s client wants nothing more of calls ``ids`` (``Cancel``): their Forward
        requests go. One that came after its call was answered by value was kept,
        waiting for an answer already sent, until the client went."""
        if not self.targets and not self.slots and not self._took:
            return
        with self._lock:
            for i in ids:
                self._unask(id(ch), i)  # (a batch's too: answered already)
                self.sized.pop((id(ch), i), None)
                self._took.pop((id(ch), i), None)

    def dropped(self, ch: Channel) -> None:
        """``ch``'s client is gone: its held calls and forwarding requests go too."""
        with self._lock:
            self._drop_held(ch)
            for k in [k for k in [*self.targets, *self.slots] if k[0] == id(ch)]:
                self._unask(*k)
            for k in [k for k in self.sized if k[0] == id(ch)]:
                del self.sized[k]
            self.asking.discard(id(ch))
            self.unnamed.discard(id(ch))
        self.kept.release(ch)  # the answers kept for it alone
