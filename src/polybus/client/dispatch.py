"""One used interface at the client: call style, balance, backlog, priority.

``sync`` sends and waits; ``async`` sends at once and returns a promise;
``async-demand(N)`` keeps at most N calls outstanding per replica and holds the rest
in a priority backlog, handing each to whichever replica answers first.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from polybus.client import backlog
from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.counts import Counts
from polybus.client.dispatchgiveup import GivingUp
from polybus.client.done import upstream_failure
from polybus.client.fwdargs import NOT_FORWARDED, Probes
from polybus.client.fwdprio import priority_of
from polybus.client.headroom import enter, leave
from polybus.client.lane import MISS
from polybus.client.order import taken_written
from polybus.client.picking import alive, loads, open_to_calls, pick_any, pick_fresh
from polybus.client.policies.balance import (
    LeastLoaded,
    RoundRobin,
    WeightedRoundRobin,
    WindowEstimator,
    demand_pick,
)
from polybus.client.promise import CallPromise
from polybus.client.snapshot import Keep, snapshot, snapshot_kwargs
from polybus.client.socketlane import lane_for
from polybus.client.stubs import SERVED_HERE
from polybus.client.unsendable import not_sent, unwritten
from polybus.client.wireargs import AS_IS_ASYNC, probed, wire, wired
from polybus.config.model import CallStyle
from polybus.errors import NoReplicaError, PolybusError
from polybus.wire.codec import OOB_BYTES
from polybus.wire.messages import Call

if TYPE_CHECKING:
    from polybus.client.awaiting import Awaiting
    from polybus.client.forward import Forwarder
    from polybus.client.fwdown import Keeper
    from polybus.client.operands import Comm
    from polybus.client.order import Order
    from polybus.client.reactor import Reactor

BACKLOG_BOUND = 100_000
_ids = itertools.count(1)


class Dispatcher(GivingUp):
    order: Order | None = None  # a sync binding's calls and the others' (order.py)

    def __init__(self, interface: str, reactor: Reactor, links: Sequence[ReplicaLink],
                 style: CallStyle, *, loadratio: Sequence[float] | None = None,
                 priority: Callable[[tuple[Any, ...], dict[str, Any]], float] | None = None,
                 timeout: float | None = None, idempotent: bool = True,
                 max_attempts: int = 3, least: bool = False, start: int = 0) -> None:
        """``start``: the replica (by position) its first call goes to, where no load
        ratio sets the order: this client's turn at a registry others share."""
        self.interface = interface
        self.reactor = reactor
        self.links = list(links)
        self.style = style
        self.start = start % len(self.links) if self.links else 0
        self.policy: RoundRobin | WeightedRoundRobin = (
            WeightedRoundRobin(loadratio) if loadratio else
            LeastLoaded(self.links, self.start) if least else RoundRobin(self.start))
        self.priority = priority
        self.timeout = timeout
        self.idempotent = idempotent
        self.max_attempts = max_attempts
        self.window = [style.window or 2] * len(self.links)
        self._plain_sync = style.kind == "sync" and priority is None and timeout is None
        self.plain_async = style.kind == "async" and priority is None
        # async-demand(auto): each replica's window follows its measured service and rtt.
        self._auto = ([WindowEstimator() for _ in self.links]
                      if style.kind == "async-demand" and style.window is None else None)
        self.inflight = [0] * len(self.links)
        self._index = {id(lk): i for i, lk in enumerate(self.links)}
        self._backlog: list[tuple[float, int, CallRecord]] = []
        self._seq = itertools.count()
        self.calls = 0
        self.counts = Counts()  # what its strategies did, for the run's report (counts.py)
        self.comm: Comm | None = None  # define.cache, use.aggregate, broadcast: client/operands.py
        self.forwarder: Forwarder | None = None  # unanswered promise arguments: client/forward.py
        # ... or, not forwarded, waited for at the client with their calls, which return
        # at once all the same; ``awaited``: told of this binding's outcomes (awaiting.py)
        self.awaiting: Awaiting | None = None
        self.awaited: Awaiting | None = None
        # False (``use.forward = false``): its answers come to the client, even as arguments
        self.forwards_answers = True  # (of a binding that forwards)
        self.rejoins = False  # lost replicas looked for again: its calls wait (rejoin.py)
        # ``forward = "keep"``: its calls' large answers stay on their replicas (fwdown.py)
        self.keeper: Keeper | None = None
        self.reads_fresh = True  # (see picking.pick_fresh; Session sets it)
        self.pickle = False  # its module's: a dataclass goes as itself (wireargs; Session)
        # Least loaded, and so reads answers before it picks (picking.pick_fresh): fixed here.
        self._least = type(self.policy) is LeastLoaded
        # Calls that migration may send again from another replica keep their arguments
        # as they were at the call (client/snapshot.py; set with the binding's Migrator).
        self.keep_args = False
        # Calls lost with a dead replica: call id -> replicas lost with it in a row. Lost
        # once, a call runs again beside others; lost twice, alone on an idle replica, so a
        # call that kills its worker is charged alone, not its bystanders (backlog.py).
        self._suspects: dict[int, int] = {}
        self._isolated: dict[int, int] = {}  # link index -> the suspect it runs alone
        # The plain sync call over a lone link, in one frame (client/lane.py for shm,
        # client/socketlane.py for tcp and ipc).
        self._lane = lane_for(self) if self._plain_sync and len(self.links) == 1 else None

    def replace(self, old: ReplicaLink, new: ReplicaLink) -> None:
        """``new`` in lost ``old``'s place, counted afresh (client/revive.py)."""
        i = self._index.pop(id(old), None)
        if i is None:
            return
        self.inflight[i], self.window[i] = 0, self.style.window or 2  # (first: see below)
        if self._auto is not None:
            self._auto[i] = WindowEstimator()
        self._isolated.pop(i, None)
        self._index[id(new)] = i
        self.links[i] = new  # (last: a thread picking it finds its counts, and keeps its own)
        if self._lane is not None:
            self._lane = lane_for(self)

    def keep(self) -> Keep | None:
        """How a held call keeps its cached operands (operands.py `Comm.held`; None:
        none are cached) when its arguments are kept as they are (snapshot.py)."""
        return self.comm.keep() if self.comm is not None else None

    # -- the call path -------------------------------------------------------------
    @property
    def plain_sync(self) -> bool:
        """Sync, with no priority, timeout, cache, aggregation or forwarding (a sync
        binding has no awaiting: Session gives it none, its promises waited at the call)."""
        return self._plain_sync and self.comm is None and self.forwarder is None

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.plain_sync:
            return self.call_sync(args, kwargs)
        if SERVED_HERE and self.style.kind != "sync":  # (a failed promise of a call made
            up = upstream_failure(self.interface, args, kwargs)  # in the client: done.py)
            if up is not None:
                self.calls += 1
                return up
        fwd = self.forwarder
        forwards, probes = fwd.wants(self, args, kwargs) if fwd is not None else NOT_FORWARDED
        return self._made(args, kwargs, forwards, probes)

    def _made(self, args: tuple[Any, ...], kwargs: dict[str, Any], forwards: bool,
              probes: Probes | None) -> Any:
        """`__call__` past forwarding's look, its ``probes`` passed on (fwdargs.py)."""
        fwd = self.forwarder
        aw = self.awaiting
        if aw is not None and not forwards and aw.wants(args, kwargs, fwd is None):
            return aw.call(self, next(_ids), args, kwargs)  # placed once its values come
        prio = priority_of(self, args, kwargs, forwards, probes) if self.priority else 0.0
        if forwards and fwd is not None:  # sent now; the values go replica to replica
            rec = fwd.record(self, next(_ids), args, kwargs, prio, probes)
        else:
            rec = CallRecord(next(_ids), self, *wired(args, kwargs, self.pickle, probes), prio)
        self.calls += 1
        kind = self.style.kind
        if kind == "sync":
            if self.reactor.refills or self.order is not None:
                self.reactor.flush_all()  # (as in call_sync)
                if self.order is not None:
                    taken_written(self.order)
            self._send(rec, pick_any(self))
            return self.reactor.wait(rec, self.timeout)
        i = (demand_pick(self.inflight, self.window, open_to_calls(self), loads(self),
                         self.start)
             if kind == "async-demand" and not self._backlog else None)
        hold = kind == "async-demand" and (i is None or self.inflight[i] > 0)
        if self.keep_args:
            self.reactor.work_left()  # (a migrator watches it)
        if hold or self.keep_args:  # written later, or perhaps again: as it is now
            keep = self.keep()
            rec.args, rec.kwargs = snapshot(rec.args, keep), snapshot_kwargs(rec.kwargs, keep)
        if kind == "async":
            self._send(rec, pick_fresh(self))
            return CallPromise(rec, self.reactor)
        # async-demand
        if i is not None:
            self._send(rec, self.links[i], hold=hold)
        else:
            if not any(alive(self)):
                raise NoReplicaError(f"no live replica serves {self.interface}")
            heapq.heappush(self._backlog, (-prio, next(self._seq), rec))
            if fwd is not None and rec.id in fwd.deps:  # its producers keep their values
                fwd.queued(rec)
            self.reactor.work_left()
            if len(self._backlog) % 256 == 1:  # take in answers now and then, not every call
                self.reactor.poll()
            while len(self._backlog) > BACKLOG_BOUND:  # bounded: the caller waits for room
                self.reactor.step()
        return CallPromise(rec, self.reactor)

    def forwards(self, args: tuple[Any, ...]) -> bool:
        """A promise among ``args``, or inside them, whose value goes replica to replica
        to this binding's call (client/fwdargs.py): an aggregated one takes this path."""
        return self.forwarder is not None and self.forwarder.wants(self, args, {})[0]

    def call_async(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The plain async call (no priority; while no cache, aggregation or forwarding
        applies): `__call__`'s steps for it and nothing else (the async hot path).
        Arguments of the kinds that travel as they are (numbers, strings, small bytes,
        arrays) take the steps written out here: no `wire` per argument, no forwarding
        look, no `_send`, and with a lone live replica no pick (a third of the Python
        calls of an async call and its wait, design.md)."""
        for a in args:
            t = type(a)
            if t not in AS_IS_ASYNC and (t is not bytes or len(a) >= OOB_BYTES):
                return self._call_async(args, kwargs)
        if kwargs:
            return self._call_async(args, kwargs)
        rid = next(_ids)
        rec = CallRecord(rid, self, list(args), None, 0.0)
        self.calls += 1
        links = self.links
        link = links[0] if len(links) == 1 and not links[0].dead and not self._isolated \
            else pick_fresh(self)
        sent = rec.args
        comm = self.comm
        lead = None
        if comm is not None:  # cached operands or aggregation: its messages (operands.py)
            quick = comm.quick(args, link)  # (a frozen B: named, put first if need be)
            if quick is None:
                self._send(rec, link)
                return CallPromise(rec, self.reactor)
            sent, lead = quick
        rec.link = link  # (what _send does)
        rec.attempts = 1
        link.outstanding[rid] = rec
        self.inflight[self._index[id(link)]] += 1
        try:
            if lead:  # (a Drop, a Put: written just before it)
                comm.send_quick(link, lead, Call(rid, self.interface, sent, None, 0.0))  # type: ignore[union-attr]
            else:
                self.reactor.send(link, Call(rid, self.interface, sent, None, 0.0))
        except (TypeError, ValueError, OverflowError) as exc:  # (MessageTooLarge is one)
            raise not_sent(rec, exc) from None
        except BaseException:  # (RecursionError, MemoryError, Ctrl-C: raised as it is)
            self.uncount(rec, link)  # not written: nothing left counted in flight
            self.forget(rec, sent=False)
            raise
        return CallPromise(rec, self.reactor)

    def _call_async(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """`call_async` for arguments that may need `wire` (promises, large bytes,
        containers) or forwarding, and for keywords."""
        if SERVED_HERE:  # (a module called in the client: its failed promise, done.py)
            up = upstream_failure(self.interface, args, kwargs)
            if up is not None:
                self.calls += 1
                return up
        if self.comm is not None:
            return self(args, kwargs)
        fwd = self.forwarder
        forwards, probes = fwd.wants(self, args, kwargs) if fwd is not None else NOT_FORWARDED
        aw = self.awaiting
        if forwards or (aw is not None and aw.wants(args, kwargs, fwd is None)):
            return self._made(args, kwargs, forwards, probes)  # (not looked at again)
        p = self.pickle  # (the async hot path: written out, no helper call per call)
        if probes is not None:  # (containers probed by forwarding's look: not again)
            rec = CallRecord(next(_ids), self, [probed(a, p, probes) for a in args], {
                k: probed(v, p, probes) for k, v in kwargs.items()} if kwargs else None, 0.0)
        else:
            rec = CallRecord(next(_ids), self, [wire(a, p) for a in args], {
                k: wire(v, p) for k, v in kwargs.items()} if kwargs else None, 0.0)
        self.calls += 1
        self._send(rec, pick_fresh(self))
        return CallPromise(rec, self.reactor)

    def call_sync(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The plain sync call (no priority, timeout, cache, aggregation or forwarding):
        the same steps as below with nothing that cannot apply (the latency hot path).
        It reads its answer itself, wherever the program called from: with room under
        it (client/headroom.py)."""
        enter()
        try:
            rid = next(_ids)
            order = self.order  # (its module has calls held back at the client: order.py)
            if self.reactor.refills or order is not None:  # (batches or held calls may
                self.reactor.flush_all()  # be waiting): written first, made first
                if order is not None:  # (and those the linger timer writes)
                    taken_written(order)
            lane = self._lane
            if lane is not None and not kwargs:
                value = lane.call(args, rid, wire)
                if value is not MISS:
                    return value
            p = self.pickle  # (the plain sync path of several replicas: written out)
            rec = CallRecord(rid, self, [wire(a, p) for a in args],
                             {k: wire(v, p) for k, v in kwargs.items()} if kwargs else None, 0.0)
            self.calls += 1
            links = self.links
            link = links[0] if len(links) == 1 and not links[0].dead and not self._isolated \
                else pick_any(self)
            rec.link = link  # (what _send does, the message left to the reactor)
            rec.attempts = 1
            link.outstanding[rec.id] = rec
            self.inflight[self._index[id(link)]] += 1
            return self.reactor.call_alone(rec, link)
        finally:
            leave()

    def _send(self, rec: CallRecord, link: ReplicaLink, hold: bool = False) -> None:
        rec.link = link
        rec.attempts += 1  # (`Counts.tried`'s steps, written out on the general call path)
        if rec.attempts > 1:  # (sent again after a loss: CallRecord.message marks it)
            self.counts.run_again += 1
        if rec.deadline:  # (its timeout counts from its writing: CallRecord)
            rec.deadline = math.inf if hold else time.monotonic() + (self.timeout or 0.0)
        link.outstanding[rec.id] = rec
        i = self._index[id(link)]
        self.inflight[i] += 1
        if self._auto is not None:  # (what its window is measured from: backlog.py too)
            rec.sent_at, rec.ahead = time.perf_counter(), self.inflight[i]
        try:
            if self.comm is not None:
                self.comm.send(rec, link, hold)
            elif hold:
                self.reactor.hold(link, rec.message())
            else:
                self.reactor.send(link, rec.message())
        except (TypeError, ValueError, OverflowError) as exc:  # (MessageTooLarge is one)
            raise not_sent(rec, exc) from None
        except BaseException:  # (RecursionError, MemoryError, Ctrl-C: raised as it is)
            self.uncount(rec, link)
            unwritten(rec, link)  # nothing left counted in flight, or held to be written
            raise

    def uncount(self, rec: CallRecord, link: ReplicaLink) -> bool:
        """``rec``, placed on ``link`` and not written, no longer counted in flight: the
        first thing a send's handler does, in as few Python frames as can be (a send
        cut short by a RecursionError leaves little room, and a deeper call from the
        handler could fail too: then the counts are right all the same). False if it
        was not among ``link``'s calls (taken out by another thread: nothing done)."""
        if link.outstanding.pop(rec.id, None) is rec:
            i = self._index[id(link)]
            self.inflight[i] -= 1
            if self._suspects:
                self._suspects.pop(rec.id, None)
            if self._isolated.get(i) == rec.id:
                del self._isolated[i]
            return True
        return False

    # -- answers ---------------------------------------------------------------------
    def completed(self, rec: CallRecord, link: ReplicaLink) -> None:
        i = self._index[id(link)]
        self.inflight[i] -= 1
        if self._auto is not None:
            self.window[i] = self._auto[i].observe(rec.sent_at, rec.ahead, time.perf_counter())
        if self._suspects:
            self._cleared(rec, i)
        if self.comm is not None and (f := getattr(self.comm, "forwarder", None)) is not None:
            f.answered(rec)
        if self.awaited is not None:
            self.awaited.answered(rec)
        if self.keeper is not None:
            self.keeper.answered(rec)

    def _cleared(self, rec: CallRecord, i: int) -> None:
        self._suspects.pop(rec.id, None)
        if self._isolated.get(i) == rec.id:
            del self._isolated[i]

    @property
    def backlogged(self) -> int:
        """Calls waiting in the backlog for a replica with room (async-demand), those
        given up on aside."""
        return sum(1 for _, _, rec in self._backlog if not rec.done)

    def refill(self) -> None:
        """Hand backlog calls to replicas with room (after answers came in), one write
        per replica however many calls it gets (client/backlog.py)."""
        backlog.refill(self)

    def again(self, rec: CallRecord) -> None:
        """Run ``rec`` again, ahead of the backlog. It was answered, but the replica that
        kept its value for a next stage is gone (client/forward.py). Not as a suspect
        (lost()): it killed nothing, and run alone, two such producers whose consumers
        were held on the one replica left would each wait for the other to finish."""
        heapq.heappush(self._backlog, (float("-inf"), next(self._seq), rec))
        self.refill()
        self.reactor.work_left()

    def lost(self, link: ReplicaLink, error: PolybusError) -> None:
        """``link``'s replica is gone: re-run what it held elsewhere, or fail it
        (client/backlog.py)."""
        backlog.lost(self, link, error)
