"""Forwarding between stages at the client (promise pipelining, seeds/001 Fig. 3).

When an unanswered promise is passed to a call whose binding forwards (async styles, by
default), as an argument or inside a list, tuple or dict argument (fwdargs.py), the call
is sent at once with ``Ref("fwd", key)`` in the promise's place, and
the producer's replica is told (``Forward``) to send its result straight to the
consumer's replica. The value passes through the client only if the program uses the
promise itself: then the client fetches it from the producer's replica (``Fetch``).

Each producer -> consumer pair is an *edge* with its own key. An edge is connected when
both calls are placed on replicas (whichever is sent second connects it, so a producer
still in a demand backlog, or a call re-sent after its replica died, is covered):

- producer still running there: ``Forward`` to it;
- producer answered by value (it finished before the ``Forward`` came): the client
  sends the value itself (``Deliver``), since it has it anyway, and tells the producer's
  replica to forget the ``Forward`` (``Cancel``), which it read after answering;
- producer answered ``Ref`` (forwarded): ``Forward`` again; its replica keeps the value;
- producer failed (a remote exception, or lost: died, poison, not idempotent): the
  client sends the failure on, and the consumer's replica answers the consumer call
  with a Fail naming it, so the stage-2 promise raises a typed RemoteException (a
  CancelledError, for a producer cancelled before it ran: client/cancel.py).

A consumer that waits at the client to be placed (a demand backlog: `queued`) has its
producers' replicas keep their values for it (``Keep``), so the value does not come to
the client and go out again: each producer placed and unanswered (or answered ``Ref``)
is asked, and so is one placed later while the consumer still waits. It answers
``Ref`` and pins the value until the consumer's ``Forward`` takes it
(worker/fwdstore.py), or, with no room to keep it, answers by value as before. A call
that migration may move takes its edges along (fwdmove.py).

A producer replica that dies before answering is a lost call like any other: the
dispatcher re-runs it (idempotent interfaces) and, once it is placed again, its edges are
connected again; if it is not re-run the consumer fails with the producer's error. A
value fetched (fwdfetch.py) from a producer replica that has died since is a
WorkerDiedError; one a consumer still needs from there (held for it, or to be sent on
from its store) is made again, the producer sent its own forwarded inputs again, or the
consumer fails with a WorkerDiedError (`_after_lost`, fwdlost.py).

Whenever the producer's value will never reach the consumer's replica, the client sends
it the failure (``Deliver(key, ok=False, ...)``), which answers the held consumer call
and frees it there: the producer failed or was lost (above), was given up (its timeout:
`given_up`), or its replica could not send the value on (``Undelivered``: `undelivered`).
A consumer given up is failed so too, so its replica does not hold it for a value that
may never come. The client names only keys of its own edges (its session's nonce, 64
random bits, begins each), and only to the replica each was placed on.

The promise of an aggregated call is a producer too: its call's `EntryRecord` stands
for it in its edges, and its batch's placing asks its replica (client/fwdbatch.py).
"""

from __future__ import annotations

import secrets
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from polybus.client.counts import relayed
from polybus.client.forwardcomm import install
from polybus.client.fwdargs import Probes, carried, forwardable, wants
from polybus.client.fwdbatch import (
    EntryRecord,
    ask,
    claim,
    entry_of,
    forward_msg,
    keep_msg,
    running,
    undo,
)
from polybus.client.fwdblame import origin, said_by, upstream
from polybus.client.fwdedge import Edge, edge_of
from polybus.client.fwdlost import Lineage, gone, kept_lost, spent
from polybus.client.fwdmove import ended, unwritten
from polybus.client.promise import CallPromise
from polybus.errors import (
    CANCELLED_TYPE,
    UPSTREAM_FAILED,
    CancelledError,
    PolybusError,
    RemoteException,
)
from polybus.wire.codec import Ref
from polybus.wire.messages import DIALS_AGAIN, Deliver, Undelivered

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.dispatch import Dispatcher
    from polybus.client.session import Session


class Forwarder:
    """One session's forwarding: edges between calls, and the messages they need."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.reactor = session.reactor
        # (keys stay apart between clients of a replica; one that may dial a replica
        # again says so: its connection's end lets none of its values go, fwdgone.py)
        self.nonce = secrets.token_hex(8) + (DIALS_AGAIN if session.dials_again else "")
        self.edges: dict[int, list[Edge]] = {}  # producer call id -> its edges
        self.deps: dict[int, list[Edge]] = {}   # consumer call id -> its edges
        self.forwarded = 0   # edges made (values that need not pass the client)
        self.relayed = 0     # values the client sent on itself (it had them anyway)
        self.fetched = 0     # forwarded values the program used, fetched back
        self.keeps = 0       # Keeps sent: producers asked to keep a value for a queued call
        self.lineage = Lineage()  # answered Ref: their inputs, should they run again
        self.rerunning: deque[CallRecord] | None = None  # to send again (fwdlost.rerun)
        # `_keep`'s look at a producer and its mark of the edge, against `answered`'s
        # reset of the marks (another thread may read the producer's answer meanwhile)
        self._marks = threading.Lock()
        before = self.reactor.on_lost

        def on_lost(link: ReplicaLink, error: PolybusError) -> None:
            before(link, error)
            self._after_lost(link)

        self.reactor.on_lost = on_lost
        self.reactor.on_undelivered = self.undelivered

    def pkey(self, producer: CallRecord) -> str:
        return f"{self.nonce}.{producer.id}"

    # -- making a call ---------------------------------------------------------------
    def wants(self, d: Dispatcher, args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> tuple[bool, Probes | None]:
        """A promise of this run among the arguments, or inside a list, tuple or dict
        among them, whose value is not at the client; and what probing those containers
        found, for the rest of the call's path (fwdargs.py)."""
        return wants(self, d, args, kwargs)

    def record(self, d: Dispatcher, cid: int, args: tuple[Any, ...],
               kwargs: dict[str, Any], prio: float,
               probes: Probes | None = None) -> CallRecord:
        from polybus.client.calls import CallRecord

        edges: list[Edge] = []

        def ref(value: Any) -> Ref | None:  # (a promise forwarded, of its own or inside
            if not forwardable(self, d, value):  # a container: its edge; else None)
                return None
            producer: CallRecord = (value._rec if type(value) is CallPromise
                                    else entry_of(value))
            key = f"{self.nonce}.{cid}.{len(edges)}"
            edges.append(Edge(producer, rec, key))
            self.edges.setdefault(producer.id, []).append(edges[-1])
            install(producer.dispatcher, self)
            return Ref("fwd", key)

        def arg(value: Any) -> Any:  # (another run's promise: by value, see `wants`)
            got = ref(value)
            return got if got is not None else carried(value, d.pickle, ref, probes)

        rec = CallRecord(cid, d, [], None, prio)
        rec.args = [arg(a) for a in args]
        rec.kwargs = {k: arg(v) for k, v in kwargs.items()} if kwargs else None
        self.deps[cid] = edges
        self.forwarded += len(edges)
        install(d, self)
        return rec

    # -- placing calls -----------------------------------------------------------------
    def placed(self, rec: CallRecord, link: ReplicaLink) -> None:
        """``rec`` was just written to ``link``: connect the edges that now can be."""
        for e in self.deps.get(rec.id, ()):
            e.to, e.failed = link, ""
            self._connect(e)
        for e in self.edges.get(rec.id, ()):
            if e.to is not None and not e.consumer.done:
                self._connect(e)
            else:
                self._keep(e)  # (its consumer still waits at the client)

    def queued(self, rec: CallRecord) -> None:
        """``rec`` waits at the client to be placed (a demand backlog): its producers'
        replicas keep their values for it, rather than send them to the client."""
        for e in self.deps.get(rec.id, ()):
            self._keep(e)

    def _keep(self, e: Edge) -> None:
        """Ask ``e``'s producer's replica to keep its value for ``e`` (``Keep``), if its
        consumer is unplaced and its producer is placed and unanswered, or answered
        ``Ref`` (a value at the client already is sent on from here)."""
        p = e.producer
        with self._marks:
            # (unanswered: placed on a live replica, `running`, which sets an aggregated
            # call's link to its batch's)
            on = running(p) if not p.done else not (p.error is not None
                                                      or type(p.value) is not Ref)
            link = p.link
            if e.to is not None or e.consumer.done or link is None or link.dead or not on:
                return
            e.asked, e.kept = e.asked or not p.done, True
        self.keeps += 1
        pkey = self.pkey(p)
        # (after the producer's call, if it is held back)
        ask(self, p, link, lambda: keep_msg(p, pkey, e.key))
        with self._marks:
            undone = not e.kept
        if undone and not link.dead:
            # Answered by value meanwhile (`answered` cleared the mark), and its Cancel
            # (or release) may have gone before this Keep: one more, after it, so
            # nothing waits or is pinned there.
            ask(self, p, link, lambda: undo(p, pkey, [e.key]))

    def _unkeep(self, e: Edge) -> None:
        """``e``'s consumer ended without being placed, or ended having been sent a value
        pinned for it (``hold``): its producer's replica lets go of what it kept for it
        (``Keep`` with ``release``). A hold is let go whatever ``p``'s value is now (one
        the program read has its Ref replaced): a release of nothing pinned is harmless."""
        p, link = e.producer, e.producer.link
        kept, pinned = e.kept, e.pinned
        e.kept = e.pinned = False
        if p.done and not kept and not pinned and (
                p.error is not None or type(p.value) is not Ref):
            return
        if link is not None and not link.dead:
            pkey = self.pkey(p)  # (a batch's call: after its batch and Keep, fwdbatch.ask)
            ask(self, p, link, lambda: keep_msg(p, pkey, e.key, release=True))

    def _connect(self, e: Edge) -> None:
        p, to = e.producer, e.to
        if to is None or to.dead:
            return
        if p.done:
            if p.error is not None:
                self._fail(e, p.error)
            elif type(p.value) is Ref or e.kept:
                # Its replica keeps the value (for this edge: Keep, even if the program
                # has fetched it since): sent on from there.
                self._instruct(e)
            else:
                self.relayed += 1
                relayed(e)  # (the run's report: client/counts.py)
                self.reactor.send(to, Deliver(e.key, True, p.value))
        elif type(p) is EntryRecord:
            if claim(self, e):  # (its batch placed; else its placing asks: fwdbatch.py)
                self._instruct(e)
        elif running(p):
            self._instruct(e)
        # else the producer waits to be placed; placed() connects the edge then

    def _instruct(self, e: Edge) -> None:
        p, to = e.producer, e.to
        if p.link is None or p.link.dead or to is None:
            if to is not None and p.done and type(p.value) is Ref:
                kept_lost(self, p, [e])  # (a consumer moved since: its value is made again)
            elif to is not None:
                self._fail(e, gone(p))
            return
        if p.done:
            e.watch(p.link)  # served from its store: read for an Undelivered
        else:
            e.asked, e.told = True, (p.link, to)
        e.pinned = e.pinned or e.hold
        p.dispatcher.counts.forwarded += 1  # (the run's report: client/counts.py)
        pkey, peer = self.pkey(p), to.channel.peer  # (after the producer's call)
        ask(self, p, p.link, lambda: forward_msg(p, pkey, e.key, peer, hold=e.hold))

    def _fail(self, e: Edge, error: PolybusError, given_up: bool = False) -> None:
        # (whether the consumer's error says ``error`` is decided when it ends: answered)
        if isinstance(error, RemoteException):
            info = [error.remote_type, str(error.remote_message), error.remote_traceback]
        elif isinstance(error, CancelledError):  # (the cancelled call, named: calls.error_from)
            info = [CANCELLED_TYPE, error.upstream or error.call or str(error), ""]
        else:
            info = [type(error).__name__, str(error), ""]
        self._send_failure(e, info, given_up)

    def _send_failure(self, e: Edge, info: list[str], given_up: bool = False) -> None:
        """Tell the consumer's replica that ``e``'s value will never come: the held
        consumer call is answered with ``info`` and let go (once per placing)."""
        if e.to is None or e.to.dead or e.failed or (e.consumer.done and not given_up):
            return
        e.failed = info[1] or info[0]
        e.unwatch()
        self.reactor.flush(e.to)  # after the consumer's call, if it is held back
        self.reactor.send(e.to, Deliver(e.key, False, info))

    def undelivered(self, link: ReplicaLink, msg: Undelivered) -> None:
        """The producer's replica could not send ``msg.key``'s value on: its consumer
        fails with why. Heeded only for an edge of this session, from the replica that
        holds its producer, about the replica its consumer is placed on."""
        e = edge_of(self.deps, self.nonce, msg.key)
        if (e is None or e.producer.link is not link or e.to is None
                or e.to.channel.peer != msg.to):
            return
        self._send_failure(e, [msg.type, msg.message, ""])

    def given_up(self, rec: CallRecord, sent: bool) -> None:
        """``rec`` was given up (its timeout passed, or it could not be sent): as a
        producer its consumers fail with its error; as a consumer (``sent``) its replica
        is told to answer it, and so let go of it if it is held for a value."""
        if sent and rec.error is not None:
            for e in self.deps.get(rec.id, ()):
                self._fail(e, rec.error, given_up=True)
        elif not sent:  # (its values sent to its replica are let go there: fwdmove.py)
            unwritten(self.deps.get(rec.id, ()))
        self.answered(rec)

    def only_behind(self, rec: CallRecord, link: ReplicaLink) -> bool:
        """Every call of ``rec``'s interface outstanding on ``link`` waits, directly or
        not, for ``rec``'s value: held there, none runs next to it, so ``rec`` may run
        there alone (dispatch.py's isolation; else it would wait for ever for a replica
        its own consumers keep busy)."""
        behind: set[int] = set()
        todo = [rec.id]
        while todo:
            for e in self.edges.get(todo.pop(), ()):
                if e.consumer.id not in behind and not e.consumer.done:
                    behind.add(e.consumer.id)
                    todo.append(e.consumer.id)
        return bool(behind) and all(r.id in behind for r in link.outstanding.values()
                                    if r.dispatcher is rec.dispatcher)

    # -- answers ---------------------------------------------------------------------------
    def answered(self, rec: CallRecord) -> None:
        """``rec`` has its outcome: as a producer, repair what its replica did not send;
        as a consumer, its edges are done."""
        error = rec.error
        said = named = None
        if isinstance(error, RemoteException) and error.remote_message.startswith(UPSTREAM_FAILED):
            said = error.remote_message.removeprefix(UPSTREAM_FAILED)
            named = upstream(self.deps.get(rec.id, ()), error.remote_message)
        deps = self.deps.pop(rec.id, ())
        for e in ended(self, deps):  # (if it moved: fwdmove.py)
            e.unwatch()
            if (e.kept and e.to is None) or e.pinned:  # (never placed, or may have moved)
                self._unkeep(e)
            lst = self.edges.get(e.producer.id)
            if lst is not None:
                lst[:] = [x for x in lst if x is not e]
                if not lst:
                    del self.edges[e.producer.id]
                    if e.producer.dispatcher.keeper is not None:  # (fwdown.py)
                        e.producer.dispatcher.keeper.unused(e.producer)
            said_by(e.producer, e.producer is named, said)
        spent(self, rec, deps)  # (kept, should it run again: fwdlost.py)
        edges = self.edges.get(rec.id)
        if not edges:
            return
        sent: set[str] = set()
        if rec.error is None and type(rec.value) is Ref:
            sent = set(rec.value.key)
        else:
            with self._marks:
                kept = [e.key for e in edges if e.kept]
                for e in edges:
                    e.kept = False  # (answered by value, or failed: nothing kept there)
            if any(e.asked for e in edges) and rec.link is not None and not rec.link.dead:
                # Answered before its replica read our Forward (or Keep), which it then
                # keeps waiting for an answer already sent: Cancel tells it to forget
                # (after it, on the same connection). The value goes on from here. (A
                # batch's call given up on while its batch runs: its Keeps released.)
                msgs = undo(rec, self.pkey(rec), kept)
                ask(self, rec, rec.link, lambda: msgs)
        for e in edges:
            if e.to is None or e.consumer.done or e.failed or e.key in sent:
                continue
            if type(rec.value) is Ref and rec.link is not None and e.told == (rec.link, e.to):
                # Its Forward came after the answer (it was kept: a Keep, another
                # consumer's Forward): the replica sends the value on from its store.
                e.watch(rec.link)  # (read for an Undelivered)
            else:
                self._connect(e)

    def origin(self, rec: CallRecord, message: str) -> str:
        """Which producer a failure of consumer ``rec`` came from ("f on server-0"), or
        "" (fwdblame.py)."""
        return origin(self.deps.get(rec.id, ()), message, lambda i: self.deps.get(i, ()))

    def _after_lost(self, link: ReplicaLink) -> None:
        """After ``link``'s replica died: producers failed for good fail their consumers,
        a value it kept that a consumer still needs is made again (`_kept_lost`), and
        consumers failed so (not answered: Dispatcher.lost) let go of their edges."""
        for edges in list(self.edges.values()):
            p = edges[0].producer
            if p.error is not None:
                for e in edges:
                    self._fail(e, p.error)
            elif p.done and p.link is link:
                kept_lost(self, p, [e for e in edges if not e.consumer.done and not e.failed
                                    and (e.to is None or e.watched is link)])
        for edges in [es for es in self.deps.values() if es and es[0].consumer.done]:
            self.answered(edges[0].consumer)


def forwarder_for(session: Session) -> Forwarder:
    """The session's Forwarder (made on first use)."""
    f = getattr(session, "forwarder", None)
    if not isinstance(f, Forwarder):
        f = Forwarder(session)
        session.forwarder = f  # type: ignore[attr-defined]
    return f


__all__ = ["Edge", "Forwarder", "forwarder_for"]

