"""The lone call's path of the client's reactor (client/reactor.py): a plain sync call,
or a wait, while nothing else is going on.

While one call is all that is in flight (no other thread waiting, no other replica
busy, nothing held back or left unsent), its thread writes the call and reads the
answer off its replica's connection itself, in one loop, with none of the general
loop's steps (the latency hot path). As soon as anything else goes on, it leaves the
call to the general loop (`Reactor.wait`), so no replica goes unread behind it.
`Reactor` inherits these; they use its state and steps, named below for the checker.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from polybus.client import rings
from polybus.client.calls import CallRecord, ReplicaLink, waiting_for
from polybus.client.later import get_ident
from polybus.client.unsendable import not_sent
from polybus.errors import MessageTooLarge, PolybusError, TransportError, UnsendableError
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Message, Result

if TYPE_CHECKING:
    from polybus.client.liveness import Liveness

__all__ = ["LoneCalls"]

_NOTHING = object()


class LoneCalls:
    """`Reactor`'s lone-call path (a mixin: the reactor's state and steps below are its)."""

    links: list[ReplicaLink]
    liveness: Liveness[ReplicaLink] | None
    unfinished: bool
    refills: bool  # (the session has after-step work: a backlog, a batcher, a migrator)
    step_owed: bool  # (a read inside a send left the after-step work: Sending._drain_held)
    flushers: list[Callable[[], None]]  # (open aggregated batches: Batcher.flush)
    # Calls waiting at the client for their promises' values (client/awaiting.py, which
    # sets its own): while any waits, each read is followed by a look at them, so no
    # call is alone.
    unplaced: Collection[object] = ()
    _fast: bool
    _waiters: int
    _lock: threading.Lock
    _reader: int | None  # the thread holding ``_lock`` (Sending._drain)
    _rings: rings.Rings

    if TYPE_CHECKING:
        def send(self, link: ReplicaLink, msg: Message) -> None: ...
        def flush_all(self, batches: bool = True) -> None: ...
        def _wait(self, rec: CallRecord, timeout: float | None = None) -> Any: ...
        def _drain_held(self) -> None: ...
        def _handle(self, link: ReplicaLink, msg: Message) -> None: ...
        def _check_liveness(self) -> None: ...
        def _lost(self, link: ReplicaLink, error: PolybusError) -> None: ...
        def _stepped(self) -> None: ...

    def call_alone(self, rec: CallRecord, link: ReplicaLink) -> Any:
        """Send ``rec`` (already outstanding on ``link``) and wait for its outcome: the
        plain sync call's whole round trip in one loop (the latency hot path). While it
        is alone it reads ``link`` itself and takes its own answer straight from the
        message; anything else (another thread waiting, other replicas busy, a message
        for someone else, the replica lost) goes the general way (`send`, `wait`)."""
        # (open batches and held calls were written by its caller, Dispatcher.call_sync)
        if not self._fast or self._waiters or not self._alone(link) \
                or not self._lock.acquire(blocking=False):
            try:
                self.send(link, rec.message())
            except (TypeError, ValueError, OverflowError) as exc:
                raise not_sent(rec, exc) from None
            except BaseException:  # (RecursionError, MemoryError, Ctrl-C: as it is)
                rec.dispatcher.forget(rec, sent=False)  # not written: not in flight
                raise
            return self._wait(rec)
        self._reader = get_ident()  # (its sends inside its reads read: Sending._drain)
        ch = link.channel
        rid = rec.id
        value: Any = _NOTHING
        try:
            try:
                ch.send(Call(rid, rec.dispatcher.interface, rec.args, rec.kwargs),
                        self._drain_held)
            except (TypeError, ValueError, OverflowError) as exc:
                raise not_sent(rec, exc) from None
            except TransportError:  # (the connection broke: the call, outstanding there,
                raise  # is lost with its replica below, run again or failed as any is)
            except BaseException:  # (RecursionError, MemoryError, Ctrl-C: as it is)
                rec.dispatcher.forget(rec, sent=False)  # not written: not in flight
                raise
            while not link.dead:
                msg = ch.next_message()
                if msg is None:
                    if self._waiters or not self._alone(link):
                        break
                    before = ch.bytes_received
                    ch.fill(wait=True, stay=True)  # (rings.up on the way out)
                    if ch.bytes_received == before and self.liveness is not None:
                        self._check_liveness()  # a heartbeat passed in silence
                elif type(msg) is Result and msg.id == rid:
                    del link.outstanding[rid]
                    link.calls += 1
                    rec.dispatcher.completed(rec, link)
                    value = msg.value
                    break
                else:
                    self._handle(link, msg)
                    if rec.done or self.refills:  # (as in _wait_alone: the general
                        break  # wait places what the answer made room for, then waits)
        except (MessageTooLarge, UnsendableError):
            raise  # (never sent, forgotten above)
        except PolybusError as exc:
            self._lost(link, exc)
        except KeyboardInterrupt as exc:  # (as Reactor._wait: what the wait was for)
            exc.add_note(waiting_for(rec))
            raise
        finally:
            if self._rings:  # (tcp and ipc links have none: no call on the hot path)
                rings.up(self._rings)
            self._reader = None
            self._lock.release()
        self._stepped()
        if value is _NOTHING:  # not answered here: the general loop waits for it
            return self._wait(rec)
        if type(value) is Ref:  # forwarded: the record fetches it (forward.py)
            rec.set_value(value)
            return rec.outcome()
        rec.value = value
        return value

    def _alone(self, link: ReplicaLink) -> bool:
        """Only ``link`` has calls in flight, and nothing is held back for any replica
        (nor left unsent by the pump, nor waiting at the client for a promise's value)."""
        links = self.links
        if len(links) == 1:  # one replica: the common sync case
            return (not links[0].held and not self.unfinished and not self.unplaced
                    and not self.step_owed)
        # (the general loop writes on with the pump's writes, places calls waiting at the
        # client, awaiting.py, and does the after-step work a send's reads left owed)
        if self.unfinished or self.unplaced or self.step_owed:
            return False
        # (a replica still running a call given up on counts: its late answer must be
        # read, or the replica would stay passed over for good)
        return not any(lk.held or ((lk.outstanding or lk.abandoned or lk.watch)
                                   and lk is not link) for lk in links)

    def _wait_alone(self, rec: CallRecord, link: ReplicaLink) -> None:
        """`step`'s one-blocking-read path, kept in one loop while ``rec`` waits: the
        sync call's hot path. It stays only while it is alone: once another thread
        waits, or another replica has calls in flight, it leaves ``rec`` to `wait`'s
        general loop (which reads every busy replica and hands answers out), so no
        replica goes unread (and so unheard, for liveness) behind this one."""
        if not self._lock.acquire(blocking=False):
            return
        self._reader = get_ident()
        ch = link.channel
        try:
            while not rec.done and not link.dead:
                if self._waiters:
                    break
                msg = ch.next_message()
                if msg is None:
                    if not self._alone(link):
                        break
                    before = ch.bytes_received
                    ch.fill(wait=True, stay=True)  # (rings.up on the way out)
                    if ch.bytes_received == before and self.liveness is not None:
                        self._check_liveness()  # a heartbeat passed in silence
                else:
                    self._handle(link, msg)
                    if self.refills:  # an answer may make room for a call waiting at
                        break  # the client, which ``rec`` may need: placed by `_stepped`
        except PolybusError as exc:
            self._lost(link, exc)
        finally:
            if self._rings:  # (tcp and ipc links have none: no call on the hot path)
                rings.up(self._rings)
            self._reader = None
            self._lock.release()
        self._stepped()
