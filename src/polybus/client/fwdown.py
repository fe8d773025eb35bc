"""``use.<iface>.forward = "keep"``: a binding's large answers stay on their replicas.

With forwarding on, a promise passed to another call while unanswered has its value
sent replica to replica (client/forward.py); one answered already came to the client by
value, and the client sends it on itself. A binding with ``forward = "keep"`` asks its
replica, before each call, to keep that call's answer (``Keep`` with ``least``): an
answer of KEEP_MIN bytes or more is pinned there (worker/fwdstore.py) and the client
answered ``Ref("fwd", [])``; a smaller one, or one there is no room to pin, comes by
value as before. So the value passes through the client only if the program uses it:

- the program uses the promise: the value is fetched (fwdfetch.py), one round trip more,
  and let go on the replica then (it is at the client now);
- the promise is passed to another call, answered or not: its replica sends the value
  on (a ``Forward``, served from the pin whatever its key: client/forward.py);
- the program drops the promise: the value is let go on the replica (``Keep`` with
  ``release``): freed there (``free``), or, while a consumer's edge may still need it
  (one re-placed is sent it again), into the store's LRU, as any forwarded answer.
  A promise's ``__del__`` may run in any thread: it only notes the call (`dropped`),
  and the release is sent by the next thread that steps the reactor or makes a call of
  such a binding (`let_go`), as a freed operand's Drop is (client/naming.py). One
  dropped before its answer came is let go when it comes (`answered`). One passed to a
  consumer that has not ended is let go when the last such ends (`unused`): that
  consumer's Forward may not have gone yet (it waits to be placed, or placed again), and
  a value no longer pinned may be evicted before it comes.

A replica that dies keeping such a value: a producer with consumers waiting is re-run
or fails them (fwdlost.py); one with none, whose promise the program still holds, runs
again if its interface is idempotent and a replica is left (`lost`), else its promise
raises a WorkerDiedError when used (fwdfetch.py).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

from polybus.client.forwardcomm import install
from polybus.client.fwdlost import may_run_again, rerun
from polybus.wire.codec import Ref
from polybus.wire.messages import Keep

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.dispatch import Dispatcher
    from polybus.client.forward import Forwarder
    from polybus.errors import PolybusError

__all__ = ["KEEP_MIN", "Keeper", "keep_answers", "keeper_for"]

KEEP_MIN = 64 * 1024  # an answer this large stays on its replica (as worker FORWARD_MIN)


class Keeper:
    """A session's calls of ``forward = "keep"`` bindings whose answers their replicas
    may keep, while their promises live."""

    def __init__(self, f: Forwarder) -> None:
        self.f = f
        self.reactor = f.reactor
        self.calls: dict[int, CallRecord] = {}  # asked to keep, promise alive, not fetched
        self.dropped: deque[CallRecord] = deque()  # promises gone (appended in any thread)
        self.orphans: set[int] = set()  # dropped before their answer came
        self.waiting: dict[int, CallRecord] = {}  # dropped, their consumers not all ended
        self.released = 0  # releases sent (values let go on their replicas)
        self._lock = threading.Lock()  # `let_go`'s look at an answer against `answered`
        lost, step = self.reactor.on_lost, self.reactor.after_step

        def on_lost(link: ReplicaLink, error: PolybusError) -> None:
            lost(link, error)  # (the Forwarder's first: a producer with consumers)
            self.lost(link)

        def after_step() -> None:
            step()
            if self.dropped:
                self.let_go()

        self.reactor.on_lost, self.reactor.after_step = on_lost, after_step

    def key(self, rec: CallRecord) -> str:
        """The key ``rec``'s answer is kept for (no edge's: those end in an index)."""
        return f"{self.f.pkey(rec)}.own"

    def ask(self, rec: CallRecord, link: ReplicaLink) -> None:
        """Before ``rec`` is written to ``link``: ask that replica to keep its answer."""
        if self.dropped:
            self.let_go()
        if rec.attempts > 1 and rec.id not in self.calls:  # (run again: its promise gone)
            if rec.id not in self.orphans:
                return  # (let go already: nothing would let this answer go)
        else:  # (an orphan's is let go when answered: `answered`)
            self.calls[rec.id] = rec
        self.reactor.send(link, Keep(rec.id, self.f.pkey(rec), self.key(rec), least=KEEP_MIN))

    def answered(self, rec: CallRecord) -> None:
        """``rec`` has its outcome: let go at once if its promise is gone; not looked
        after any more if nothing was kept (by value, or failed)."""
        with self._lock:
            orphan = rec.id in self.orphans
            self.orphans.discard(rec.id)
        kept = _kept(rec)
        if orphan and kept:
            self._release_unused(rec)
        elif not kept:
            self.calls.pop(rec.id, None)

    def given_up(self, rec: CallRecord) -> None:
        """``rec`` was given up (its timeout): its late answer is dropped here, so its
        replica is told not to keep it (or to let it go, if kept already)."""
        if self.calls.pop(rec.id, None) is not None:
            self._release(rec)

    def fetched(self, rec: CallRecord) -> None:
        """The program used ``rec``'s value (fetched): its replica need not keep it."""
        if self.calls.pop(rec.id, None) is not None:
            self._release(rec)

    def let_go(self) -> None:
        """Release the values of the promises dropped since the last look."""
        while self.dropped:
            try:
                rec = self.dropped.popleft()
            except IndexError:  # (another thread took the last)
                break
            if self.calls.pop(rec.id, None) is None:
                continue  # (not kept, or let go already)
            with self._lock:
                if not rec.done:
                    self.orphans.add(rec.id)  # (let go when answered)
                    continue
            if _kept(rec):
                self._release_unused(rec)

    def unused(self, rec: CallRecord) -> None:
        """The last consumer of ``rec`` has ended (Forwarder.answered): let go now if its
        promise was dropped meanwhile (`_release_unused`)."""
        with self._lock:
            waited = self.waiting.pop(rec.id, None)
        if waited is not None and _kept(rec):
            self._release(rec)

    def lost(self, link: ReplicaLink) -> None:
        """``link``'s replica died: a kept answer there whose promise lives runs again
        (idempotent, a replica left); else using the promise raises WorkerDiedError."""
        self.let_go()
        for rec in list(self.calls.values()):
            if rec.link is link and rec.done and _kept(rec) and may_run_again(rec):
                rerun(self.f, rec)  # (and its inputs: fwdlost.py)

    def _release_unused(self, rec: CallRecord) -> None:
        """Let go of ``rec``'s value, whose promise is gone, unless a consumer of it has
        not ended: then when the last one does (`unused`)."""
        with self._lock:  # (against `unused`, after the Forwarder's look at the edges)
            if self.f.edges.get(rec.id):
                self.waiting[rec.id] = rec
                return
        self._release(rec)

    def _release(self, rec: CallRecord) -> None:
        """Let ``rec``'s value go on its replica: freed there (``free``) unless a
        consumer's edge still needs it (a consumer re-placed is sent it again from the
        store), when it joins the store's LRU instead."""
        link = rec.link
        if link is not None and not link.dead:
            self.released += 1
            self.reactor.send(link, Keep(rec.id, self.f.pkey(rec), self.key(rec),
                                         release=True, free=not self.f.edges.get(rec.id)))


def _kept(rec: CallRecord) -> bool:
    """Whether ``rec`` was answered ``Ref``: its value kept on its replica."""
    return rec.error is None and type(rec.value) is Ref


def keeper_for(f: Forwarder) -> Keeper:
    """The session's Keeper (made on first use, beside its Forwarder)."""
    k = getattr(f, "keeper", None)
    if not isinstance(k, Keeper):
        k = Keeper(f)
        f.keeper = k  # type: ignore[attr-defined]
    return k


def keep_answers(d: Dispatcher, f: Forwarder) -> None:
    """``d``'s binding has ``forward = "keep"``: each of its calls asks (ForwardComm.send)."""
    install(d, f)
    d.keeper = keeper_for(f)
