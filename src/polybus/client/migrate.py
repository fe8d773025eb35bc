"""Client-mediated task migration: exactly once by construction.

The client knows every call it has outstanding on each replica. After each batch of
answers it takes a snapshot (waiting ~ outstanding - pool, running ~ min(outstanding,
pool)), asks `policies.migration.decide` what to move, and sends ``Steal(n)`` to each
loaded replica. The replica removes up to n of this client's calls that have not
started from its queue, atomically, and answers ``Released(ids)``. Only released calls
are sent on; a call that started meanwhile stays where it is and is answered there.
So a call runs once and is answered once, without any replica-to-replica protocol.
A moved call's forwarding edges follow it (client/fwdmove.py). A steal takes any of
the client's calls queued on that connection, an aggregated batch of another binding
too: it moves whole, written as its Batcher writes it (`_move_batch`). Each given back
keeps its own binding's ``async-demand(N)`` window: one with no room at the steal's
replica is placed again by its binding (a call) or goes where its Batcher has room.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import Pending
from polybus.client.calls import CallRecord, ReplicaLink, late
from polybus.client.fwdmove import moved, moved_batch
from polybus.client.giveback import place_again, placed_alone
from polybus.client.policies.migration import Edge, ReplicaLoad, decide, edges, steal_edges
from polybus.config.model import DefineSpec, ModuleSpec, UseSpec
from polybus.errors import ConnectionLostError
from polybus.wire.messages import Message, Steal

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher

_reqs = itertools.count(1 << 40)  # apart from the session's control request ids


class Migrator:
    """Migration for one dispatcher along ``rules`` (directed edges by replica name)."""

    def __init__(self, dispatcher: Dispatcher, rules: Sequence[Edge], pool: int = 1) -> None:
        self.d = dispatcher
        self.rules = list(rules)
        self.pool = max(1, pool)
        self.by_name = {lk.name: lk for lk in dispatcher.links}
        self._pending: dict[int, tuple[ReplicaLink, ReplicaLink, int]] = {}  # req -> src, dst, n
        self.moved_in: dict[str, int] = dict.fromkeys(self.by_name, 0)
        self.moved_out: dict[str, int] = dict.fromkeys(self.by_name, 0)
        self.steals = 0

    def replace(self, old: ReplicaLink, new: ReplicaLink) -> None:
        """``new`` in lost ``old``'s place (client/revive.py, after the dispatcher's
        `replace`): calls move to and from it along ``old``'s edges. A steal still
        pending on ``old`` is dropped by `tick`, one pending toward it places its calls
        again (`released`)."""
        if self.by_name.get(old.name) is not old:
            return
        del self.by_name[old.name]
        self.by_name[new.name] = new
        if new.name != old.name:  # (edges name replicas: the new one takes old's)
            self.rules = [dataclasses.replace(
                e, src=new.name if e.src == old.name else e.src,
                dst=new.name if e.dst == old.name else e.dst) for e in self.rules]
        self.moved_in.setdefault(new.name, 0)
        self.moved_out.setdefault(new.name, 0)

    def snapshot(self) -> dict[str, ReplicaLoad]:
        stealing = {src.name for src, _, _ in self._pending.values()}
        incoming: dict[str, int] = {}
        for _, dst, n in self._pending.values():
            incoming[dst.name] = incoming.get(dst.name, 0) + n
        out = {}
        for i, lk in enumerate(self.d.links):
            n = self.d.inflight[i]
            running = min(n, self.pool)
            out[lk.name] = ReplicaLoad(n - running, running, incoming.get(lk.name, 0),
                                       lk.speed if lk.speed > 0 else 1.0,
                                       lk.name in stealing, not lk.dead)
        return out

    def tick(self) -> None:
        """Decide on the current snapshot and send the steals it calls for."""
        if not any(self.d.inflight):
            return
        for req in [r for r, (src, _, _) in self._pending.items() if src.dead]:
            del self._pending[req]  # its calls are re-placed by the dispatcher's lost()
        d = self.d
        for m in decide(self.snapshot(), self.rules):
            src, dst = self.by_name[m.src], self.by_name[m.dst]
            n = m.n
            if d.style.kind == "async-demand":  # (no more than its window has room for)
                j = d._index[id(dst)]
                coming = sum(k for _, to, k in self._pending.values() if to is dst)
                n = min(n, d.window[j] - d.inflight[j] - coming)
                if n <= 0:
                    continue
            k = asked(src, dst, n)
            if k <= 0:
                continue
            req = next(_reqs)
            self._pending[req] = (src, dst, n)  # (n on their way: those asked past stay)
            self.steals += 1
            d.reactor.send(src, Steal(k, req))

    def owns(self, req: int) -> bool:
        return req in self._pending

    def released(self, link: ReplicaLink, ids: list[int], req: int) -> None:
        """``link`` gave back ``ids``: none of them ran there; send them on."""
        _, dst, _ = self._pending.pop(req, (link, link, 0))
        recs: list[CallRecord] = []
        for cid in ids:
            # Taken out first, as an answer takes its call: a give-up on another thread
            # (dispatchgiveup.py) notes a call abandoned, then takes it out; one it took
            # out is freed as abandoned (given up on, and now known never to run), and
            # one taken out here, given up on meanwhile, is freed here alone.
            rec: Any = link.outstanding.pop(cid, None)  # (a batch is filed as a call is)
            if rec is None:
                late(link, cid)
                continue
            d = rec.dispatcher
            if rec.done:  # given up on by another thread as this one took it out: the
                if isinstance(rec, CallRecord):  # give-up no longer finds it to free
                    d.freed(link)
                continue
            if type(rec) is Pending:  # (under its Batcher's lock, which another
                # thread may hold, between placing a queued batch and taking it off)
                rec.batcher.given_back(functools.partial(self._move_batch, rec, link, dst))
                continue
            d.inflight[d._index[id(link)]] -= 1
            if not placed_alone(link, rec):  # (a suspect: alone, by its own binding)
                recs.append(rec)
        # (Counted as moved, out of link and into dst, are the calls sent to another
        # replica here; those placed again by their bindings are not, wherever they go.)
        if not recs:
            return
        if dst is link or dst.dead:  # nowhere planned to go: their bindings place them again
            place_again(link, recs)
            return
        now = time.perf_counter()
        going, over = [], []
        for rec in recs:
            d = rec.dispatcher
            j = d._index[id(dst)]
            if d.style.kind == "async-demand" and d.inflight[j] >= d.window[j]:
                over.append(rec)  # (its binding keeps at most its window there)
                continue
            going.append(rec)
            rec.link = dst
            dst.outstanding[rec.id] = rec
            d.inflight[j] += 1
            if d._auto is not None:  # (async-demand(auto) times it from here, as _send does)
                rec.sent_at, rec.ahead = now, d.inflight[j]
        if over:
            place_again(link, over)
        if not going:
            return
        recs = going
        self.moved_out[link.name] = self.moved_out.get(link.name, 0) + len(recs)
        self.moved_in[dst.name] = self.moved_in.get(dst.name, 0) + len(recs)
        # Each by its own binding (a steal releases calls of any interface of the module):
        # cached operands go by name (a Put if dst lacks one), other calls as they are.
        msgs: list[Message] = []
        for rec in recs:
            comm = rec.dispatcher.comm
            msgs.extend(comm.messages(rec, dst) if comm is not None else [rec.message()])
        reactor = self.d.reactor
        reactor.flush(dst)  # (calls held for dst go first, as Comm.send_many does)
        # The calls, then what their consumers ask of their answers there, as one write
        # (client/later.py), the Cancels to ``link`` (fwdmove.py) between them or not:
        # written apart, a call could be answered by value first.
        with reactor.later.gathered(reactor):
            reactor.send_many(dst, msgs)
            for rec in recs:  # (after their calls: a producer's Forward must follow its call)
                if (f := getattr(rec.dispatcher.comm, "forwarder", None)) is not None:
                    moved(f, rec, link, dst)

    def _move_batch(self, b: Pending, link: ReplicaLink, dst: ReplicaLink) -> None:
        """Aggregated batch ``b`` (of any binding: a steal takes any call queued for the
        connection), given back by ``link``, goes to ``dst`` or, with no live replica
        planned, to its binding's least loaded one, written as its Batcher writes it (its
        cached operands named for there), followed by what its forwarded calls'
        consumers ask of it there (client/fwdmove.py). Under the Batcher's lock."""
        bt = b.batcher
        if (i := bt._index.get(id(link))) is not None and bt.inflight[i] > 0:
            bt.inflight[i] -= 1  # (None: replaced meanwhile, its count with it)
        if b.done:
            return
        live = [i for i, lk in enumerate(bt.links) if not lk.dead]
        if dst is link or dst.dead:
            if not live:  # (lost meanwhile: the move waits for its Batcher's lock)
                if bt.d.rejoins:  # (it waits for one to come back, as `requeue`'s do)
                    _queued_again(b, link)
                    return
                b.set_error(ConnectionLostError(f"every replica of {bt.interface} is gone"))
                return
            dst = bt.links[min(live, key=lambda i: bt.inflight[i])]
        if bt.demand and bt.inflight[bt._index[id(dst)]] >= bt.window:
            # (its binding keeps at most its window of batches at a replica: to another
            # with room, or first in its backlog, placed as its Batcher places batches)
            room = [i for i in live if bt.inflight[i] < bt.window]
            if not room:
                _queued_again(b, link)
                return
            dst = bt.links[min(room, key=lambda i: bt.inflight[i])]
        if dst is not link:  # (back where it waited, at the end of its queue: not moved)
            self.moved_out[link.name] = self.moved_out.get(link.name, 0) + 1
            self.moved_in[dst.name] = self.moved_in.get(dst.name, 0) + 1
        b.link = dst
        dst.outstanding[b.id] = b  # type: ignore[assignment]
        bt.inflight[bt._index[id(dst)]] += 1
        if bt.comm is None or b.by_value(bt.room, bt.most):
            msgs: list[Message] = [b.message()]
        else:
            msgs = bt.comm.batch_messages(b, dst, None)
        self.d.reactor.flush(dst)
        self.d.reactor.send_many(dst, msgs + moved_batch(b, link, dst))


def _queued_again(b: Pending, link: ReplicaLink) -> None:
    """(The Batcher's lock held) ``b``, given back by ``link``, first in its Batcher's
    queue, placed as its Batcher places batches (what its consumers asked of ``link``
    forgotten there: asked of where it goes)."""
    moved_batch(b, link, None)
    b.link = None
    b.batcher.d.counts.untried(b, len(b.rows()))  # (a move is no failed attempt: `place`)
    b.batcher.backlog.appendleft(b)
    b.batcher.reactor.work_left()


def asked(src: ReplicaLink, dst: ReplicaLink, n: int) -> int:
    """How many calls to ask ``src`` for so that ``n`` of them go to ``dst``. The
    replica gives the client's calls from the back of its queue (lowest priority, last
    come), any binding's; one whose binding keeps at most N at a replica
    (``async-demand(N)``) and has no room at ``dst`` is placed again by its binding,
    most often back at the back of that queue, the first to go to the next steal: it is
    asked for too, or the calls ahead of it never move. 0 when none would go to ``dst``."""
    recs = list(src.outstanding.values())
    if not any(_window(r, dst) is not None for r in recs):
        return n
    order = sorted(range(len(recs)), key=lambda i: (-getattr(recs[i], "prio", 0.0), i),
                   reverse=True)  # (the back of the replica's queue first)
    taken: dict[int, int] = {}  # binding -> those of its calls this steal sends to dst
    going = over = 0
    for i in order:
        w = _window(recs[i], dst)
        if w is not None:
            key, used, room = w
            if used + taken.get(key, 0) >= room:
                over += 1
                continue
            taken[key] = taken.get(key, 0) + 1
        going += 1
        if going >= n:
            break
    return n + over if going else 0


def _window(rec: Any, dst: ReplicaLink) -> tuple[int, int, int] | None:
    """For a call or batch whose binding keeps a window at each replica: the binding
    (by id), what it has at ``dst`` and its window there; None for any other."""
    if type(rec) is Pending:
        bt = rec.batcher
        i = bt._index.get(id(dst))
        return None if i is None or not bt.demand else (id(bt), bt.inflight[i], bt.window)
    d = rec.dispatcher
    if d.style.kind != "async-demand":
        return None
    j = d._index.get(id(dst))
    return None if j is None else (id(d), d.inflight[j], d.window[j])


def migrator_for(dispatcher: Dispatcher, module: ModuleSpec, use: UseSpec,
                 define: DefineSpec) -> Migrator | None:
    """The migration the configuration asks for on this binding, if any: the module's
    migration paths, or ``balance = "steal"`` (idle replicas pull from any other)."""
    names = [lk.name for lk in dispatcher.links]
    if use.balance == "steal":
        rules = steal_edges(names)
    else:
        rules = [e for e in edges(module.migration, module.replication)
                 if e.src in names and e.dst in names]
    if not rules or len(names) < 2:
        return None
    return Migrator(dispatcher, rules, define.pool)
