"""Calls that wait at the client for the values of the promises passed to them.

On a binding with ``use.<iface>.forward = false`` a promise's value comes to the client
and goes on from there. The consuming call does not wait for it where it is made (the
program would wait there, and a pipeline's stages would no longer overlap): it returns
its promise at once, as with forwarding on, and waits here, unplaced, its other
arguments kept as they were at the call (snapshot.py). Each time the client reads its
replicas (the reactor's after-step: a program thread's wait, `Promise.done`, or the pump
while the program computes, client/pump.py), a call whose producers have all answered
gets their values and is placed as its binding places any call: written at once, or
into its ``async-demand`` backlog; its priority is computed then, from the values. Its
timeout, like a backlogged call's, counts from when it is written to a replica. (A sync
binding has none of this: its promises are waited for at the call, as with forwarding
on, and it keeps its plain path.)

A producer that failed fails the consumer, unplaced, with the typed error the forwarding
path gives (client/upstream.py): a RemoteException of the producer's type whose message
begins "an upstream call failed: " and names the call that raised ("raised in f on
server-0, upstream of g"), the producer's error then counted as seen (client/unseen.py).
It is the consumer's promise that fails, whenever the producer does, before the
consuming call or after.

The same waiting serves a forwarding binding given only promises of bindings whose
answers are not forwarded (``forwards_answers``), which would otherwise have waited at
the call. A promise answered ``Ref`` (its value left on its replica for another,
forwarding, consumer) is fetched back first (fwdfetch.py): only by a program thread,
never by the pump, whose turn never waits for a replica (then the program's next read
places the call). While any call waits here, the reactor's lone-call path stays off
(alone.py), so every read of an answer is followed by a look at them.
"""

from __future__ import annotations

import collections
import heapq
import threading
from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import BatchPromise
from polybus.client.fwdedge import run_of
from polybus.client.nested import Nested
from polybus.client.picking import alive, loads, open_to_calls, pick_any
from polybus.client.policies.balance import demand_pick
from polybus.client.promise import CallPromise
from polybus.client.snapshot import snapshot, snapshot_kwargs
from polybus.client.upstream import upstream_error
from polybus.client.wireargs import wire
from polybus.errors import (
    ConnectionLostError,
    NoReplicaError,
    PolybusError,
    UsageError,
)
from polybus.wire.codec import Ref
from polybus.wire.values import OutOfBand

if TYPE_CHECKING:
    from collections.abc import Callable

    from polybus.client.calls import CallRecord
    from polybus.client.dispatch import Dispatcher
    from polybus.client.reactor import Reactor

__all__ = ["Awaiting"]

Promised = CallPromise | BatchPromise


class _Waiting:
    """One consuming call and the promises it waits for, by position or keyword."""

    __slots__ = ("got", "promises", "rec")

    def __init__(self, rec: CallRecord, promises: list[tuple[int | str, Promised]]) -> None:
        self.rec = rec
        self.promises = promises
        # Values of its producers as they were answered (`held_values`): the program
        # may change a value it waited for before this call is placed.
        self.got: dict[int | str, Any] = {}


class Awaiting:
    """One session's consuming calls waiting at the client for their promises' values.
    ``on_pump``: whether the running thread is the session's pump (no fetch there).

    Each waiting call is filed under each of its producers (a call's record, or an
    aggregated call's batch: `_key`) until that producer has its outcome; the binding
    that made it is told (``awaited``) and says so, wherever the outcome is set
    (`answered`: Dispatcher.completed, CallRecord.set_error, Batcher.completed, a batch's
    or a batch call's failure). A read then looks only at the calls those outcomes
    concern, not at every call waiting (a pipeline of 10^5 items would look at each of
    them after every answer)."""

    def __init__(self, reactor: Reactor, on_pump: Callable[[], bool] = lambda: False) -> None:
        self.reactor = reactor
        self.on_pump = on_pump
        # consumer call id -> what it waits for, in the order the calls were made; the
        # reactor's lone-call path looks at it (alone.py: off while any call waits)
        self.calls: dict[int, _Waiting] = {}
        reactor.unplaced = self.calls
        # producer (id of its record or batch) -> the waiting calls filed under it
        self.by_producer: dict[int, dict[int, _Waiting]] = {}
        self.due: collections.deque[int] = collections.deque()  # producers with an outcome
        self.fetch: list[_Waiting] = []  # ready, a value to fetch back: not by the pump
        self._lock = threading.Lock()  # (filing and taking out; no I/O under it)

    def __len__(self) -> int:
        return len(self.calls)

    def answered(self, producer: object) -> None:
        """``producer`` (a call's record, or a batch) has its outcome, or part of it:
        the calls filed under it are looked at by the next read's `release`. Called
        where the outcome is set (by a reading thread, or a wait giving up)."""
        if id(producer) in self.by_producer:
            with self._lock:
                waiting = list(self.by_producer.get(id(producer), {}).values())
            for w in waiting:
                held_values(w, id(producer))
            self.due.append(id(producer))

    def wants(self, args: tuple[Any, ...], kwargs: dict[str, Any], failed: bool = True) -> bool:
        """A promise of this run among the arguments whose value is not at the client:
        unanswered, or (``failed``) failed, which fails its consumer, not the call.
        (Another run's is waited for at the call, through its own session: this one's
        reads would never take in its answer. client/ended.py)"""
        for a in args:
            t = type(a)
            if ((t is CallPromise or t is BatchPromise) and _waits(a, failed)
                    and run_of(a) is self.reactor):
                return True
        if kwargs:
            for v in kwargs.values():
                t = type(v)
                if ((t is CallPromise or t is BatchPromise) and _waits(v, failed)
                        and run_of(v) is self.reactor):
                    return True
        return False

    def call(self, d: Dispatcher, cid: int, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
        """A consuming call of ``d`` (`wants` said so): its promise, at once (``d`` is
        async: a sync binding has no awaiting, Session)."""
        rec = self.record(d, cid, args, kwargs)
        d.calls += 1
        return CallPromise(rec, self.reactor)

    def record(self, d: Dispatcher, cid: int, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> CallRecord:
        """The record of a consuming call of ``d``, kept here until its values come;
        failed at once if a producer has failed already."""
        from polybus.client.calls import CallRecord

        promises: list[tuple[int | str, Promised]] = []

        def arg(at: int | str, value: Any) -> Any:
            t = type(value)
            if ((t is CallPromise or t is BatchPromise) and _waits(value, True)
                    and run_of(value) is self.reactor):
                promises.append((at, value))
                return None  # (its value goes in its place when it comes: `_go`)
            return wire(value, d.pickle)

        keep = d.keep()
        sent = snapshot([arg(i, a) for i, a in enumerate(args)], keep)
        named = snapshot_kwargs({k: arg(k, v) for k, v in kwargs.items()} if kwargs else None,
                                keep)
        rec = CallRecord(cid, d, sent, named, 0.0)
        w = _Waiting(rec, promises)
        if not promises:  # (answered since `wants` looked, by another thread's read)
            _go(w)
            return rec
        self.calls[cid] = w
        for _, p in promises:
            _owner(p).awaited = self
        self._file(w, [p for _, p in promises])
        self.reactor.work_left()  # (the pump places it while the program computes)
        self.release()  # (a producer failed already: it fails now)
        return rec

    # -- placing ---------------------------------------------------------------------
    def release(self) -> None:
        """Place each waiting call whose producers have all answered since the last
        look (in the order the calls were made), or fail it with the first failure among
        them. Another thread may release at the same time: each call is taken by one
        (``dict.pop``)."""
        if not self.due and not self.fetch:
            return
        woke: dict[int, _Waiting] = {}
        with self._lock:
            while self.due:
                woke.update(self.by_producer.pop(self.due.popleft(), {}))
        pump = self.on_pump()
        if self.fetch and not pump:
            fetch, self.fetch = self.fetch, []
            woke.update((w.rec.id, w) for w in fetch)
        for cid in sorted(woke):
            w = woke[cid]
            state = _state(w)
            if state is _WAIT:  # filed again under those it waits for (one answered
                self._file(w, [p for _, p in w.promises if not p._answered])  # Ref that
                continue  # is to run again, its replica lost, waits again: forward.py)
            if state is _FETCH and pump:
                self.fetch.append(w)  # (by the program's next read: see the docstring)
                continue
            if self.calls.pop(cid, None) is None:
                continue  # (another thread took it)
            _go(w)

    def _file(self, w: _Waiting, producers: list[Promised]) -> None:
        """File ``w`` under each of ``producers``; one that has its outcome by then is
        looked at now (`answered` may have found ``w`` not filed yet)."""
        with self._lock:
            for p in producers:
                self.by_producer.setdefault(_key(p), {})[w.rec.id] = w
        for p in producers:
            if p._answered:
                self.due.append(_key(p))

    def withdraw(self, rec: CallRecord) -> bool:
        """``rec`` waits here no more (cancelled: client/cancel.py); False if it did not."""
        with self._lock:
            w = self.calls.pop(rec.id, None)
            for _, p in w.promises if w is not None else ():
                filed = self.by_producer.get(_key(p), {})
                if filed.pop(rec.id, None) is not None and not filed:
                    del self.by_producer[_key(p)]
        return w is not None

    def pending(self) -> bool:
        """Calls wait whose producers have not all answered (the pump reads for them)."""
        return bool(self.by_producer or self.due)

    def close(self) -> None:
        """The session closes: a call still waiting never will be sent."""
        self.by_producer.clear()
        self.fetch = []
        while self.calls:
            _, w = self.calls.popitem()
            rec = w.rec
            w.promises = []
            rec.set_error(ConnectionLostError(
                f"the client closed before this call to {rec.dispatcher.interface} was "
                f"sent (it waited for the value of a promise passed to it)"))


_WAIT, _FETCH, _READY = object(), object(), object()


def _waits(p: Promised, failed: bool) -> bool:  # (a cancelled one: raises at the call)
    return not p._answered or (failed and _error(p) is not None and not p.cancelled())


def _key(p: Promised) -> int:
    """The producer a promise stands for: its call's record, or its batch (whose answer
    answers all its calls)."""
    return id(p._rec)


def _owner(p: Promised) -> Any:
    """The binding that makes ``p``'s call (a Dispatcher, or an aggregating Batcher)."""
    return p._rec.dispatcher if type(p) is CallPromise else p._rec.batcher


def _state(w: _Waiting) -> object:
    """_READY (a producer failed: the call fails now, as under forwarding; or all
    answered), _WAIT (a producer unanswered), or _FETCH (all answered, a value left on
    its replica)."""
    out = _READY
    for _, p in w.promises:
        if not p._answered:
            out = _WAIT
        elif _error(p) is not None:
            return _READY
        elif out is _READY and _left_there(p):
            out = _FETCH
    return out


def _error(p: Promised) -> PolybusError | None:
    """The error of an answered promise (what `Slot.outcome` would raise), or None."""
    if type(p) is CallPromise:
        return p._rec.error  # type: ignore[no-any-return]
    b, i = p._rec, p._i
    if b.late is not None and i in b.late:
        return b.late[i]
    if b.error is not None:
        return b.error
    return b.fails.get(i) if b.fails is not None else None


def _left_there(p: Promised) -> bool:
    """Answered ``Ref``: its value stayed on its replica (fetched when used)."""
    if type(p) is CallPromise:
        return type(p._rec.value) is Ref
    b = p._rec
    return bool(b.values) and type(b.values[p._i]) is Ref


def _go(w: _Waiting) -> None:
    """Fail ``w``'s call with its first failed producer's failure (in argument order),
    or fill in the values and place it; a failure to place it (no replica left, a value
    that cannot be sent) is its own error, as a backlogged call's is."""
    rec = w.rec
    d = rec.dispatcher
    try:
        for _, p in w.promises:
            err = _error(p)
            if err is not None:
                raise _Upstream(p, err)
        for at, p in w.promises:
            # (as answered; else its value now, or fetched back if it was left there)
            value = w.got[at] if at in w.got else wire(p)
            if isinstance(at, int):
                rec.args[at] = value
            else:
                assert rec.kwargs is not None
                rec.kwargs[at] = value
        if d.priority is not None:  # (of the values as the program gave them)
            rec.prio = float(d.priority(tuple(_given(a) for a in rec.args),
                                        {k: _given(v) for k, v in (rec.kwargs or {}).items()}))
        if d.style.kind == "async-demand" or d.keep_args:  # (may be written later, or again)
            _keep_values(w)
        _place(d, rec)
    except _Upstream as up:
        _fail(rec, upstream_error(rec, up.producer, up.error))
    except PolybusError as exc:
        _fail(rec, exc)
    except Exception as exc:  # (the priority's expression, or a value that cannot be sent)
        _fail(rec, UsageError(f"{d.interface}(...): {type(exc).__name__}: {exc}"))
    finally:
        w.promises = []  # (the producers' promises go: their errors were said, or seen)


def held_values(w: _Waiting, producer: int) -> None:
    """The values ``producer`` (the id of a record or batch) answered for ``w``, kept as
    they are now (snapshot.py: a writable array copied), at the read that answered
    them, before the program can have them: the call, placed later, sends them as they
    were answered, as forwarding would (the program may change a value it waited for).
    A value left on its replica (``Ref``) is fetched when the call is placed."""
    rec = w.rec
    keep = rec.dispatcher.keep()
    for at, p in w.promises:
        if (at not in w.got and _key(p) == producer and p._answered
                and _error(p) is None and not _left_there(p)):
            w.got[at] = snapshot([wire(p)], keep)[0]


def _given(v: Any) -> Any:
    """An argument as the program gave it, from its travelling form (`wire`): what a
    priority expression is computed from."""
    t = type(v)
    if t is OutOfBand:
        return v.data
    if t is Nested:
        return v.value
    return v


class _Upstream(Exception):
    def __init__(self, producer: Promised, error: PolybusError) -> None:
        self.producer, self.error = producer, error


def _fail(rec: CallRecord, error: PolybusError) -> None:
    if rec.set_error(error):
        # never placed, or its send refused: its own forwarding consumers hear of it
        rec.dispatcher.forget(rec, sent=False)


def _keep_values(w: _Waiting) -> None:
    """The values just filled in, as they are now (snapshot.py): the call may be written
    later (held, backlogged) or again (migration)."""
    rec = w.rec
    keep = rec.dispatcher.keep()
    at = {a for a, _ in w.promises}
    args = snapshot([v if i in at else None for i, v in enumerate(rec.args)], keep)
    for i in at:
        if isinstance(i, int):
            rec.args[i] = args[i]
    if rec.kwargs:
        kw = snapshot_kwargs({k: v for k, v in rec.kwargs.items() if k in at}, keep)
        rec.kwargs.update(kw or {})


def _place(d: Dispatcher, rec: CallRecord) -> None:
    """Place ``rec`` as `Dispatcher.__call__` places a call of ``d``'s style."""
    if d.keep_args:
        d.reactor.work_left()  # (a migrator watches it)
    if d.style.kind != "async-demand":
        d._send(rec, pick_any(d))
        return
    i = (demand_pick(d.inflight, d.window, open_to_calls(d), loads(d), d.start)
         if not d._backlog else None)
    if i is not None:
        d._send(rec, d.links[i], hold=d.inflight[i] > 0)
        return
    if not any(alive(d)):
        raise NoReplicaError(f"no live replica serves {d.interface}")
    heapq.heappush(d._backlog, (-rec.prio, next(d._seq), rec))
    d.reactor.work_left()
