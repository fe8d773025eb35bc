"""What comes in on a replica's connections: reading, backpressure, and each message
handled (calls queued after their cached operands resolve, control answered at once).

A mixin of `WorkerRuntime` (runtime.py), which owns the state declared here; kept
apart so the leader/follower core there stays short.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from polybus.errors import PolybusError, ProtocolError
from polybus.lazynumpy import is_plain_array
from polybus.quieter import Quieter
from polybus.transport.channel import Channel
from polybus.transport.endpoints import Address, HandshakeGate, Listener
from polybus.transport.greeting import Greeting
from polybus.transport.shm import ShmChannel
from polybus.wire.messages import (
    Batch,
    Call,
    CallBatch,
    Cancel,
    Deliver,
    Drop,
    Fail,
    Fetch,
    Forward,
    Goodbye,
    Heartbeat,
    Keep,
    Message,
    Ping,
    Pong,
    Put,
    Register,
    Released,
    Resolve,
    Revoke,
    Stats,
    StatsRequest,
    Steal,
)
from polybus.wire.undecodable import Refusal, sent_as
from polybus.worker.accepting import Accepting
from polybus.worker.cache import Forwarded, OperandCache, resolve_batch
from polybus.worker.cache import resolve as resolve_operands
from polybus.worker.forwarding import Forwarding
from polybus.worker.heldvalue import freeze_inside
from polybus.worker.keylimits import KEYED, key_fault
from polybus.worker.options import ServeOptions
from polybus.worker.poller import ReadPoller
from polybus.worker.replies import send_quietly
from polybus.worker.servicing import CallQueue

log = logging.getLogger("polybus.worker")


class Intake(Accepting):
    """Reads and handles what clients send; the state is the runtime's."""

    name: str
    functions: dict[str, Callable[..., Any]]
    lone_functions: dict[str, Callable[..., Any]]  # those a lone call runs inline of
    options: ServeOptions
    cache: OperandCache
    forwarding: Forwarding
    _sel: ReadPoller
    _lock: threading.Lock
    _queue: CallQueue
    _channels: set[Channel]
    _paused: dict[Channel, None]  # (in the order held back: `_resume_paused` takes turns)
    _stuck: set[Channel]  # not read while answers wait for them to read (unread.py)
    _stash: dict[Channel, Message]
    _hot: set[ShmChannel]
    _awake: set[ShmChannel]
    _unwarm: set[Channel]
    _running: int
    _limited: bool  # some interface has a pool of its own (lanes.py)
    _quiet: Quieter  # connections refused: logged once a minute per kind
    _quiet_calls: Quieter  # calls refused (stop() says the rest of each apart)
    _token: bytes
    _listening: dict[Address, Listener]
    _gates: dict[Address, HandshakeGate]  # handshakes under way, per listener
    _greeting: Greeting  # the same handshakes, for stop() to end
    _new: list[Channel]  # authenticated, for the poller to adopt
    _stopping: bool

    def stats(self, req: int = 0) -> Stats:
        raise NotImplementedError  # the runtime's

    def _wake(self) -> None:
        raise NotImplementedError  # the runtime's

    def _full(self, call: Message | None = None) -> bool:
        """No room for ``call`` (None: any call a free handler may take): ``queue``
        calls would wait even once every free handler has taken one. The poller reads a
        burst before any handler takes a call, so the free ones count: a burst fills the
        handlers and then the queue, under either overflow (a call of an interface at
        its own pool waits, whatever is free: lanes.py). Exact under the lock (a handler
        takes a call and counts itself running in one step under it); without it, a
        look that may be off by that one call (`_resume_paused`: `_take` asks again)."""
        return self._queue.full(self.options.pool - self._running, call)

    def _full_now(self, call: Message | None = None) -> bool:
        with self._lock:
            return self._full(call)

    def _read(self, ch: Channel) -> None:
        try:
            ch.fill(wait=False)  # it is ready: what is there, without a wait
        except ProtocolError as exc:  # (shm: the peer's ring or descriptors)
            self._refuse(ch, exc)
            return
        except PolybusError as exc:  # the peer went (or broke the connection)
            self._lost(ch, exc)
            return
        except BaseException:  # a fault in polybus's steps: this peer alone is dropped
            self._fault_reading(ch)
            return
        if type(ch) is ShmChannel:
            self._hot.add(ch)
            # This client is active: until the poller next sleeps (which looks at the
            # ring first, polling._rings_down), its calls need no doorbell.
            ch.stay_awake(True)
            self._awake.add(ch)
        if ch.decoder.wants_spare:
            self._unwarm.add(ch)
        self._take(ch)

    def _take(self, ch: Channel) -> None:
        """Handle the messages ``ch`` has sent while the queue has room. Backpressure: a
        call that does not fit is held (one per peer) and the peer is not read until there
        is room, so no more calls than the bound ever wait (`_full`; a Batch is taken
        whole)."""
        block = self.options.overflow == "block"
        try:
            while not ch.closed:
                if ch.unsent:  # answers it has not read: read no more of it till then
                    self._stick(ch)
                    return
                msg = self._stash.pop(ch, None)
                if msg is None:
                    msg = ch.next_message()
                    if msg is None:
                        return
                t = type(msg)
                if block and (t is Call or (t is not Put and t is not Drop and isinstance(
                        msg, Batch | CallBatch))) and self._full_now(msg):
                    self._stash[ch] = msg
                    if ch not in self._paused:
                        # (not read till there is room; its end is seen meanwhile:
                        # `_ended`, its calls not run for nobody)
                        self._sel.watch_end(ch.sock, ch)
                        self._paused[ch] = None
                        if type(ch) is ShmChannel:  # it rings from now on (see _resume)
                            ch.stay_awake(False)
                            self._awake.discard(ch)
                    return
                self._handle(ch, msg)
        except ProtocolError as exc:
            self._refuse(ch, exc)
        except PolybusError as exc:  # the peer went as a frame was read (shm: its socket)
            self._lost(ch, exc)
        except BaseException:  # (left to the poller, the same bytes failed it on every poll)
            self._fault_reading(ch)

    def _stick(self, ch: Channel) -> None:
        """``ch``'s client has not read all its answers (unread.py): nothing more is read
        from it, no call of its run, until they are written (`_unstick`). So what a
        client that stops reading can leave waiting is bounded by what it sent before."""
        if ch in self._stuck or ch in self._paused or ch.closed:
            return
        try:
            self._sel.unregister(ch.sock)
        except (KeyError, ValueError):
            pass
        self._stuck.add(ch)
        if type(ch) is ShmChannel:
            ch.stay_awake(False)  # (it rings again when it sends)
            self._awake.discard(ch)
            self._hot.discard(ch)
        if not ch.unsent:  # written meanwhile: its on_caught_up came before this
            self._unstick(ch)

    def _caught_up(self, ch: Channel) -> None:
        """From the thread that wrote ``ch``'s last unsent bytes: the poller's next turn
        reads that client again (`_unstick`)."""
        self._wake()

    def _unstick(self, ch: Channel) -> None:
        self._stuck.discard(ch)
        if ch not in self._channels:
            return
        if ch.closed:  # it went while stuck (its writer found so): no poll would see it
            self._drop(ch)
            return
        self._sel.register(ch.sock, ch)
        self._take(ch)  # what it sent meanwhile, already read
        if type(ch) is ShmChannel and not ch.closed and ch not in self._stuck \
                and ch not in self._paused and ch.ring_ready():
            self._read(ch)  # (written to its ring with no doorbell: none may come)

    def _refuse(self, ch: Channel, exc: ProtocolError) -> None:
        # (The text, not the error: a log handler that keeps its records, as a test's
        # capture does, would keep the error's frames and so a view of ch's ring,
        # which then stays mapped after ch is closed.)
        log.warning("worker %s: bad input from %s: %s", self.name, ch.peer, str(exc))
        self._send_quietly(ch, Goodbye(f"protocol error: {exc}"))
        self._drop(ch)

    def _lost(self, ch: Channel, exc: PolybusError) -> None:
        """``ch``'s peer went (``exc`` says how): dropped; logged if it went in the
        middle of a frame, which is lost (a peer going between frames is no news; nor
        one cut for its frame stalled, said then: accepting.py)."""
        lost = ch.decoder.partial()
        if lost and not ch.stalled:
            log.warning("worker %s: %s went in the middle of a frame (%s received; "
                        "dropped): %s", self.name, ch.peer, lost, exc)
        self._drop(ch)

    def _ended(self, ch: Channel) -> None:
        """``ch``'s client, held back (its call did not fit the queue), closed the
        connection or was cut off: gone without a goodbye (its process killed, or its
        run ended by an error or a time limit: a run that ends well has taken in every
        answer first). Its calls not yet started, queued or unread, are for nobody:
        dropped with it, as for a client whose connection ends while it is read."""
        self._drop(ch)

    def _fault_reading(self, ch: Channel) -> None:
        """Reading or handling what ``ch`` sent raised (not a ProtocolError): a fault in
        polybus's own steps. Logged in full, and that connection dropped: left to the
        poller, a frame that fails stays where it is (an shm ring's head) and fails every
        poll after, and the replica serves no one."""
        log.error("worker %s: reading %s failed; its connection is dropped\n%s",
                  self.name, ch.peer, traceback.format_exc().rstrip())  # (text, as _refuse)
        self._send_quietly(ch, Goodbye("the replica failed reading this connection "
                                       "(its log says why)"))
        self._drop(ch)

    def _drop(self, ch: Channel) -> None:
        self._stash.pop(ch, None)
        if ch in self._channels:
            self._channels.discard(ch)
            self._paused.pop(ch, None)  # (watched for its end: unregistered below)
            if ch in self._stuck:
                self._stuck.discard(ch)
            else:
                try:
                    self._sel.unregister(ch.sock)
                except (KeyError, ValueError):
                    pass
        with self._lock:
            self._queue.remove_channel(ch)  # a dead client's waiting calls are not run
        self.forwarding.dropped(ch)
        self.cache.release(ch)  # and the operands only it used are freed
        ch.close()

    def _handle(self, ch: Channel, msg: Message) -> None:
        if type(msg) is Call:  # the common case, ahead of the match
            self._enqueue(ch, msg)
            return
        t = type(msg)
        if t in KEYED and (fault := key_fault(msg)) is not None:
            raise ProtocolError(fault)  # (a key over the limit: never kept, keylimits.py)
        if t is Put and is_plain_array(msg.value):  # type: ignore[union-attr]
            # (a cached array, and the Drops of a fresh one each round: ahead of the match)
            self.cache.put(msg.key, msg.value, ch, msg.keep)  # type: ignore[union-attr]
            return
        if t is Drop:
            self.cache.drop(msg.keys, ch)  # type: ignore[union-attr]
            return
        match msg:
            case CallBatch():  # aggregated calls: one job (worker/batching.py)
                miss = resolve_batch(self.cache, msg, ch)
                if miss is not None:
                    self._send_quietly(ch, miss)
                    return
                self._admit(ch, msg)
            case Put(key=key, value=value, keep=keep):
                if type(value) is dict or type(value) is list or hasattr(
                        type(value), "__dataclass_fields__"):  # (pickle on: as itself)
                    freeze_inside(value)  # (a broadcast value's arrays, as an array is)
                self.cache.put(key, value, ch, keep)
            case Drop(keys=keys):
                self.cache.drop(keys, ch)
            case Forward() | Keep() | Deliver() | Fetch():
                self.forwarding.handle(ch, msg)
            case Batch(items=items):
                for item in items:
                    if isinstance(item, Call):
                        self._enqueue(ch, item)
                    elif isinstance(item, Refusal):
                        self._refused(ch, item)
                    else:  # (an answer in a batch of calls: as one sent alone)
                        self._not_taken(ch, item)
                        return
            case Refusal():  # a value in it did not unpickle (wire/undecodable.py)
                self._refused(ch, msg)
            case Cancel(ids=ids, keys=keys):
                with self._lock:
                    self._queue.remove_ids(ch, set(ids))
                self.forwarding.forget(ch, ids)
                if keys:  # (their consumer ended, having been given back by this replica)
                    self.forwarding.ended(keys)
            case Revoke(ids=ids, req=req):  # (p.cancel(): client/cancel.py)
                self._revoke(ch, ids, req)
            case Steal(n=n, req=req):
                with self._lock:
                    jobs = self._queue.steal(ch, n)
                ids = [j.call.id for j in jobs]
                self.forwarding.released(ch, ids)  # (before the client can send them again)
                self._send_quietly(ch, Released(ids, req))
            case StatsRequest(req=req):
                self._send_quietly(ch, self.stats(req))
            case Ping(req=req):
                self._send_quietly(ch, Pong(req, len(self._queue), self._running))
            case Goodbye():
                self._drop(ch)
            case _:
                self._not_taken(ch, msg)

    def _revoke(self, ch: Channel, ids: list[int], req: int) -> None:
        """Drop those of ``ch``'s calls ``ids`` that have not started (queued, or held for
        forwarded values): under the lock a handler takes a call with, so each is either
        taken already (running: left) or dropped here, never both. Those dropped are
        forgotten as a Steal's given back are, their Forward and Keep requests too; the
        client is told which (``Released``)."""
        wanted = set(ids)
        with self._lock:
            gone = [j.call.id for j in self._queue.remove_ids(ch, wanted)]
        gone += self.forwarding.revoke(ch, wanted.difference(gone))
        self.forwarding.released(ch, gone)  # (the keys they took: given back)
        self.forwarding.forget(ch, gone)
        self._send_quietly(ch, Released(gone, req))

    def _not_taken(self, ch: Channel, msg: Message) -> None:
        """``msg`` is not for a worker: the peer is told what it sent, and dropped."""
        kind = sent_as(msg)  # (as sent: not this side's own class for it)
        log.warning("worker %s: %s sent %s, which a worker does not take; dropped",
                    self.name, ch.peer, kind)
        # (a client given a worker's address for the registry's is told so)
        what = (f"that is polybus worker {self.name}, not a registry (it does not "
                f"take {kind}; `polybus registry` prints the address to give)"
                if isinstance(msg, Resolve | Register | Heartbeat)
                else f"a worker does not take {kind}")
        self._send_quietly(ch, Goodbye(what))
        self._drop(ch)

    def _enqueue(self, ch: Channel, call: Call) -> bool:
        """Queue ``call``, or hold it for the forwarded values it names; False if it was
        answered at once instead (an operand missing, refused: `_admit`)."""
        miss = resolve_operands(self.cache, call, ch)
        if isinstance(miss, Forwarded):  # it waits for values from other stages (or hold
            self.forwarding.hold(ch, call, miss.nested)  # queues it)
            return True
        if miss is not None:
            self._send_quietly(ch, miss)
            return False
        return self._admit(ch, call)

    def _admit(self, ch: Channel, item: Call | CallBatch) -> bool:
        """Queue a call (or an aggregated batch, one job) unless no function here has
        its interface or a rejecting queue is full; either is answered at once (False)."""
        if item.prio != item.prio:  # NaN: no order among the others' calls (heap, fifo)
            self._send_quietly(ch, Fail(item.id, "bad-call", "ValueError",
                                        f"{self.name}: priority {item.prio!r} is not a number"))
            return False
        if item.iface not in self.functions:
            self._send_quietly(ch, Fail(item.id, "no-interface", "LookupError",
                                        f"{self.name} does not serve {item.iface!r}; it serves "
                                        f"{', '.join(sorted(self.functions)) or 'nothing'}"))
            return False
        with self._lock:
            busy = self.options.overflow == "reject" and self._full(item)
            if not busy:
                self._queue.push(item, ch, time.perf_counter())
        if busy:
            self._send_quietly(ch, Fail(item.id, "busy", "BusyError",
                                        self.options.full_text(self.name, item.iface)))
        return not busy

    def _refused(self, ch: Channel, refusal: Refusal) -> None:
        if said := self._quiet_calls.let(f"from {ch.peer}: {refusal.reason}"):  # (the caller is told)
            log.warning("worker %s: %s", self.name, said)
        if refusal.answer is not None:
            self._send_quietly(ch, refusal.answer)

    def _send_quietly(self, ch: Channel, msg: Message) -> None:
        send_quietly(ch, msg)
