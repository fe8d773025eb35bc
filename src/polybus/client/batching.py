"""The lean path of an aggregating binding: calls appended to an open batch.

When ``use.<iface>.aggregate`` is set on an async binding, a call does not become a
CallRecord and a ``Call`` message: its argument tuple is appended to the binding's
open batch and it gets a promise on a `Slot` (the batch and its index). The batch
closes when it holds ``aggregate`` calls (or ``aggregate = "64KiB"`` of arguments),
when a call comes ``linger`` after the first, when the program waits for any answer
(the reactor flushes before it reads), or when the linger timer finds it still open.
A closed batch travels as one ``CallBatch`` to the replica with the fewest batches in
flight (async-demand(N): at most N batches per replica, the rest wait here in order;
async: the balance policy picks) and is answered by one ``BatchResult``. While a
replica still has two sent batches to answer, the next ones for it are held and
written together (up to HOLD per write, batchplace.py): fewer writes and fewer wake-ups
of a replica that is busy anyway; anything held is written before the client reads,
and by the timer within a linger, and before a call of another binding to the same
replicas: calls reach a replica in the order the program made them (client/order.py).

A batch is the unit of placement: if its replica is lost, the whole batch runs again
elsewhere (idempotent interfaces), or each of its calls fails with the typed error the
unaggregated path would give; with none live, at a shared registry, it waits for one to
be taken back (client/rejoin.py). Calls this path cannot carry (keyword arguments, a
promise or broadcast handle among the arguments or a handle inside a list, tuple or
dict argument, large bytes) take the general path;
so do bindings with a priority or migration. With operand caching (``define.cache``)
a batch is written for the replica it is placed on: the binding's Comm names the cached
operands of its calls and puts those the replica lacks first; a replica that lacks one
answers the whole batch ``cache-miss`` and it goes again, those it lacks put first (with
values if it misses again: client/operands.py, ``missed``). A batch names at most
``cache_bytes`` of distinct operands, or its Puts would evict them (Pending.joins);
one call whose operands never fit at once (past the replica's cache bound, the
largest ``cache_bytes`` of its module) goes alone, by value. A promise inside a list,
tuple or dict argument that forwarding sends on takes the general path too; another is
waited for at the call (its value joins the batch): not once the batch is written.
Batches are written, and a call that cannot be sent is failed alone, by batchsend.py.
A call's promise passed to a forwarding call has its value sent on by the replica: what
its consumers ask of the replica goes with its batch once placed (client/fwdbatch.py).
"""

from __future__ import annotations

import collections
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polybus.client import batchreturns
from polybus.client.batchcalls import (
    BatchPromise,
    Pending,
    Slot,
    arg_bytes,
    operand_bytes,
    sized_named,
)
from polybus.client.batchgiveup import forget_batch, freed
from polybus.client.batchplace import place, place_queued, wait_for_room
from polybus.client.batchsend import requeue, settle_owed, write
from polybus.client.linger import linger_main
from polybus.client.operands import AUTO_THRESHOLD
from polybus.client.order import arrange, switch
from polybus.client.policies.aggregate import frame_cap
from polybus.client.promise import wait
from polybus.client.snapshot import AS_IS, Keep, snapshot_row
from polybus.client.wireargs import general, holds_handle, holds_promise, plain_args
from polybus.errors import PolybusError
from polybus.wire.codec import OOB_BYTES
from polybus.wire.framing import DEFAULT_MAX_FRAME
from polybus.wire.messages import Message

if TYPE_CHECKING:
    from polybus.client.awaiting import Awaiting
    from polybus.client.calls import ReplicaLink
    from polybus.client.dispatch import Dispatcher
    from polybus.client.operands import Comm
    from polybus.client.order import Order
    from polybus.client.reactor import Reactor


# What `Batcher.after` is given: it builds the message(s) when they go
Made = Callable[[], Message | list[Message] | None]


def _ids() -> Any:
    from polybus.client import dispatch

    return dispatch._ids  # one id space per connection, shared with single calls


class Batcher:
    """The lean call path of one aggregating binding (see the module docstring).

    The program's threads, the thread that reads answers (which places queued batches)
    and the linger timer share the open batch, the queue and the held batches under one
    re-entrant lock (a send that waits for room reads answers, which may place a queued
    batch from inside it). The timer only tries it: a caller that holds it closes and
    writes the batches itself.
    """

    # A batch is the reactor's call record too: its Fail (the whole batch refused) is
    # filed as a call's is (client/answers.py), which looks for the call's forwarder.
    forwarder = None  # (an aggregating binding forwards nothing: batcher_for)
    awaited: Awaiting | None = None  # (set once a promise of it is waited for: awaiting.py)
    order: Order | None = None  # (its calls and other bindings', in order: order.py)
    taken = 0  # writes the linger timer took from `held` and has not ended (linger.py)
    _unread = False  # a batch closed with no room: answers to be read, unlocked (`_read`)

    def __init__(self, dispatcher: Dispatcher, reactor: Reactor, count: int | None,
                 nbytes: int | None, linger: float, comm: Comm | None = None,
                 max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.d = dispatcher
        self.interface = dispatcher.interface
        self.timeout = dispatcher.timeout
        # Operand caching (define.cache): it names a batch's cached operands for the
        # replica it goes to, and the reactor gives it a batch's cache miss to re-send.
        self.comm = comm
        self.reactor = reactor
        self.count = count if count is not None else (1 << 30 if nbytes else 64)
        self.nbytes = nbytes
        # A batch is one frame: it closes before it would pass half the limit (policies/
        # aggregate.py). With operand caching a cached operand goes as a Ref of a few
        # bytes (its Put is a message of its own): a call's size leaves it out (sized_named).
        self.cap = frame_cap(max_frame)
        # With caching, a batch names at most cache_bytes of distinct cached operands
        # (Pending.joins): else each of its Puts may evict one it names, and it misses.
        self.bound = (comm.cache_bytes or 0) if comm is not None else 0
        # A call whose operands pass the replica's cache bound together (the largest
        # cache_bytes of its module's interfaces, at least this one's) could never be
        # served from it: its batch goes with values (Pending.by_value). Past this
        # interface's bound alone they still fit, and go named, Put once.
        self.room = max(self.bound, comm.capacity) if comm is not None else 0
        self.most = frame_cap(max_frame)  # (a batch's operands sent by value: at most this)
        if comm is not None:
            self.at = tuple(sorted(comm.positions))
            self.rest, self.auto = comm.rest_from, AUTO_THRESHOLD if comm.auto else 0
        self.linger = linger
        style = dispatcher.style
        self.demand = style.kind == "async-demand"
        self.window = style.window or 2  # batches in flight per replica
        self.links = dispatcher.links
        self.inflight = [0] * len(self.links)
        self._index = {id(lk): i for i, lk in enumerate(self.links)}
        self.backlog: collections.deque[Pending] = collections.deque()
        self.held: list[list[Message]] = [[] for _ in self.links]  # placed, not yet written
        self.open: Pending | None = None
        self.batches = 0
        # Batches with a call that failed, while they live (client/unseen.py settles them)
        self.failed: weakref.WeakSet[Pending] = weakref.WeakSet()
        self.ids = _ids()
        self.lock = threading.RLock()  # (see the class docstring)
        # Replicas lost while another thread held the lock, for whoever holds it next
        self._lost_later: collections.deque[tuple[ReplicaLink, int, PolybusError]] = (
            collections.deque())
        # Batches a steal gave back, each to be placed again under the lock (`given_back`)
        self._back_later: collections.deque[Callable[[], None]] = collections.deque()
        # What is asked of placed batches (`after`), and batches the linger timer
        # refused, to settle (fwdbatch.py: the timer never sends): for the next reader
        self._after: collections.deque[tuple[ReplicaLink, Made]] = collections.deque()
        self.unsettled: collections.deque[Pending] = collections.deque()
        self._writing = False  # the timer writes what it took from `held` (linger.py)
        self._wake = threading.Condition(threading.Lock())
        self._stopped = False
        self._idle = False
        self._timer: threading.Thread | None = None
        reactor.flushers.append(self.flush)

    # -- the call path -------------------------------------------------------------
    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if kwargs:
            return self._general(args, kwargs)
        if len(args) == 1:  # (the common case, without the loop's iterator)
            t = type(args[0])
            if t is bytes:
                if len(args[0]) >= OOB_BYTES:
                    return self._general(args, kwargs)
            elif hasattr(t, "__polybus_value__"):  # a promise or broadcast handle
                return self._general(args, kwargs)
            else:
                if (t is list or t is tuple or t is dict) and holds_promise(args[0]):
                    if holds_handle(args[0]) or self.d.forwards(args):  # (named, or
                        return self._general(args, kwargs)  # forwarded: fwdargs.py)
                    args = wait(args)  # (see plain_args)
                elif t not in AS_IS and (general(args[0]) or self.d.forwards(args)):
                    # (a set's handle: said to go by value, a namedtuple's named; a
                    # dataclass's promise: answered by `wire`; a namedtuple's forwarded)
                    return self._general(args, kwargs)
                if t not in AS_IS:  # held: as it is now (snapshot.py)
                    args = snapshot_row(args, self._keep())
        else:
            plain = plain_args(args)
            if plain is False or (plain is None and self.d.forwards(args)):
                return self._general(args, kwargs)  # (None: promises inside, fwdargs.py)
            if plain is None:
                args = wait(args)
            for a in args:
                if type(a) not in AS_IS:  # held: as it is now (snapshot.py)
                    args = snapshot_row(args, self._keep())
                    break
        named = [0] if self.comm is not None else None  # (bytes it passes named: sized_named)
        ops = None if named is None else operand_bytes(args, self.at, self.rest, self.auto, named)
        lock, order = self.lock, self.order
        lock.acquire()  # (not `with`: half the cost, and this is every call's)
        while order is not None and order.taking is not self:
            lock.release()  # (another binding's call came last: what it held goes first)
            switch(order, self)
            lock.acquire()
        try:
            b = self.open
            if b is None:
                b = self._start()
            if ops is not None and self.bound and not b.joins(ops, self.bound):
                self._close(b)  # (the call opens the next)
                b = self._start()
                b.joins(ops, self.bound)
            size = arg_bytes(args) if named is None else sized_named(args, named[0])
            if b.args and b.size + size > self.cap:  # (it would outgrow a frame: it goes first)
                self._close(b)
                b = self._start()
            b.size += size
            i = len(b.args)
            b.args.append(args)
            p = BatchPromise(b, i)
            if self.nbytes is not None and b.size >= self.nbytes:
                self._close(b)
                return p
            if i + 1 >= self.count or time.monotonic() - b.opened >= self.linger:
                self._close(b)
            return p
        finally:
            lock.release()
            if self._unread:
                self._read()
            if self._lost_later or self._after or self._back_later:
                self._settle()
            if len(self.backlog) > 1:  # (bounded: the caller may wait for room)
                wait_for_room(self)

    def _general(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call the lean path cannot carry, on the general one, after this binding's
        open batch (order.py)."""
        if self.order is not None and self.order.taking is not self.d:
            arrange(self.order, self.d, args, kwargs)
        return self.d(args, kwargs)

    def _keep(self) -> Keep | None:
        """How a held call keeps its cached operands (`Dispatcher.keep`)."""
        return self.d.keep()

    def _start(self) -> Pending:
        b = self.open = Pending(self, time.monotonic())
        if self._timer is None:
            self._timer = threading.Thread(target=linger_main, args=(self,), daemon=True,
                                           name=f"polybus-linger-{self.interface}")
            self._timer.start()
        if self._idle:  # (set before the timer looks at self.open: no wake-up is lost)
            with self._wake:
                self._wake.notify()
        return b

    def _close(self, b: Pending) -> None:
        """The open batch is complete: place it, or queue it behind the others."""
        if not self._seal(b):
            return
        if self.backlog or not place(self, b):
            self.backlog.append(b)
            self.reactor.work_left()
            # Answers make room: read once the lock is let go (`_read`), not under it. A
            # read flushes and refills every binding's batches, under their locks: two
            # threads, each reading under its own binding's lock, waited for each other.
            self._unread = True

    def _read(self) -> None:
        """A batch closed with no replica to take it (`_close`): answers taken in, with
        the lock let go."""
        self._unread = False
        self.reactor.poll()  # take in answers: they make room

    def _seal(self, b: Pending) -> bool:
        """``b`` takes no more calls; False if none is left to send (all cancelled)."""
        self.open = None
        self.d.calls += len(b.args)
        b.id = next(self.ids)
        if b.late:  # (calls cancelled while it was open: client/cancelbatch.py)
            b.only = [j for j in range(len(b.args)) if j not in b.late]
            if not b.only:
                b.done, b.args = True, []
                return False
        self.batches += 1
        c = self.d.counts  # (the run's report: client/counts.py)
        c.batches += 1
        c.batched_calls += len(b.args) if b.only is None else len(b.only)
        return True

    # -- placing batches (client/batchplace.py) ---------------------------------------
    def _write_held(self) -> None:
        for i, h in enumerate(self.held):
            if h:
                self.held[i] = []
                write(self, self.links[i], h)

    def pump(self, wait: bool = True) -> None:
        """Queued batches to replicas with room, oldest first. ``wait`` False (the
        session's pump thread, client/pump.py): not if a caller holds the lock (it may
        be waiting for the pump's turn to end); the pump's next turn tries again."""
        if not self.lock.acquire(blocking=wait):
            return
        try:
            place_queued(self)
        finally:
            self.lock.release()
        if self.owes:
            self._settle()

    def flush(self) -> None:
        """Before the reactor reads: the open batch goes now (a waiter may need it)."""
        # (every read looks: nothing to do is the common case, and lock-free)
        if self.open is not None or self.backlog or any(self.held):
            with self.lock:
                if self.open is not None:
                    self._close(self.open)
                if self.backlog:
                    self.pump()
                if any(self.held):
                    self._write_held()
            if self._unread:
                self._read()
        if self.owes:
            self._settle()

    @property
    def owes(self) -> bool:
        """Left for the next thread that may send: `_settle`'s work."""
        return bool(self._lost_later or self._back_later or self._after or self.unsettled)

    @property
    def unwritten(self) -> int:
        """Batches (and their Puts) not written yet: open, backlogged, held or given
        back by a steal, not yet placed again (`given_back`; a run's end waits: drain.py)."""
        return ((self.open is not None) + len(self.backlog) + sum(map(len, self.held))
                + len(self._back_later))

    # -- answers and losses (client/batchreturns.py) ---------------------------------
    completed = batchreturns.completed
    after = batchreturns.after
    lost = batchreturns.lost
    given_back = batchreturns.given_back

    def forget(self, slot: Slot) -> None:
        """A call given up on (timeout): its value is dropped; its batch runs on unless
        it was the last of it left to take its answer (batchgiveup.py)."""
        forget_batch(self, slot.batch)

    def freed(self, link: ReplicaLink) -> None:
        """A batch given up on, on ``link``, is over there (dropped unrun or answered)."""
        freed(self, link)

    def _settle(self) -> None:
        settle_owed(self)  # (batchsend.py)

    def _requeue(self, link: ReplicaLink, i: int, error: PolybusError) -> None:
        requeue(self, link, i, error)  # (batchsend.py)

    def close(self) -> None:
        self._stopped = True
        with self._wake:
            self._wake.notify()


def batcher_for(dispatcher: Dispatcher, reactor: Reactor, count: int | None,
                nbytes: int | None, linger: float, *, general: bool,
                max_frame: int = DEFAULT_MAX_FRAME) -> Batcher | None:
    """The lean path for an aggregating async binding, unless ``general`` (a priority
    or migration needs every call as a record of its own). Operand caching is done on
    it by the binding's Comm (client/operands.py)."""
    if (count is None and nbytes is None) or general or dispatcher.style.kind == "sync":
        return None
    if dispatcher.priority is not None:
        return None
    comm = dispatcher.comm
    if comm is not None and comm.keep() is None:  # (it caches no argument: Comm.keep)
        comm = None
    return Batcher(dispatcher, reactor, count, nbytes, linger, comm, max_frame)


__all__ = ["Batcher", "batcher_for"]
