"""A replica answering one client's calls as they come, without the general poll.

A sync client sends its next call a few microseconds after its answer arrives. The
thread that has just answered (with nothing else running or waiting) takes the poller
role and looks at that one connection for the spin window: a call that comes runs
right there, with no selector, queue or hand-off between threads (on one CPU every
microsecond of either side adds to the round trip). The role is let go while the
call runs, as in the general path, so another thread (or the standby) reads the other
connections and the control messages meanwhile. A cached operand's Put (or a Drop)
is kept where it is read; anything else but a plain call (control, cached operands
that are missing, a full or busy queue) goes to the general intake;
and after a millisecond, or a spin window with nothing, the general poll takes over
(so other connections and new clients are looked at at least every millisecond).

Over a plain tcp or ipc socket the lone calls are first taken by worker/socketserve.py,
which does the same in one Python frame and hands anything else to the loop here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from threading import get_ident
from typing import TYPE_CHECKING, Any

from polybus.errors import PolybusError, ProtocolError, TransportError
from polybus.transport.channel import Channel
from polybus.transport.shm import ShmChannel
from polybus.wire.messages import Call, Drop, Message, Put, Result
from polybus.worker import unread
from polybus.worker.bells import coalescing
from polybus.worker.busy import IDLE
from polybus.worker.cache import Forwarded
from polybus.worker.cache import resolve as resolve_operands
from polybus.worker.forwarding import to_finish
from polybus.worker.replies import UNSENDABLE, failure, write
from polybus.worker.servicing import Job
from polybus.worker.socketserve import serve_socket, usable

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime


#: connection types whose ``fill_soon`` polls only that connection (others: general poll)
DIRECT_TYPES = (Channel, ShmChannel)
_FAIR_S = 0.001  # the other connections are looked at within this long


def serve(rt: WorkerRuntime, ch: Channel) -> bool:
    """Answer ``ch``'s lone calls inline. Called holding the poller role; True if it
    returns still holding it (nothing waits in the queue), False if it let it go."""
    functions = rt.lone_functions
    queue = rt._queue
    lock = rt._lock
    clock = time.perf_counter
    spin_s = rt.options.spin_s
    ring = type(ch) is ShmChannel and ch._rx is not None
    # Calls waiting behind this one in the ring, with one thread to run calls and no
    # priorities to order them by, run here as they come, not through the queue: a
    # queued call cost the replica ~12 us of its own against ~10 run here (10-call bursts
    # of 100-byte calls). Within a millisecond of the last general look, as lone calls.
    # Not with ``coalesce``: answered here, each would ring its client's bell at once.
    burst = ring and rt.options.pool == 1 and rt.options.in_order and not coalescing(ch)
    msg: Message | None
    first: Message | None = None  # a message serve_socket read and handed over
    if not ring and usable(rt, ch):  # a plain socket: its lone calls in one frame
        done, first = serve_socket(rt, ch, _FAIR_S)
        if done is not None:
            if done and ch.decoder.wants_spare:
                rt._unwarm.add(ch)
            return done
    while True:
        try:
            if first is not None:
                msg, first = first, None
            elif ring:  # (the same steps as below, the ring's in fewer Python calls)
                msg = ch.take_soon(0.0)  # type: ignore[attr-defined]
                if msg is None:
                    if ch.closed or clock() - rt._selected >= _FAIR_S or rt._stopping:
                        break
                    msg = ch.take_soon(spin_s)  # type: ignore[attr-defined]
                    rt._awake.add(ch)  # type: ignore[arg-type]  # (its flag: see below)
                    if msg is None:
                        if not ch.buffered():
                            rt._calls_seen = rt.calls  # the window was spent here
                        break
            elif (msg := ch.next_message()) is None:
                if ch.closed or clock() - rt._selected >= _FAIR_S or rt._stopping:
                    break
                if not ch.fill_soon(spin_s, True):
                    rt._calls_seen = rt.calls  # the window was spent here: sleep next
                    break
                continue
        except ProtocolError as exc:
            rt._refuse(ch, exc)
            return True
        except PolybusError as exc:
            rt._lost(ch, exc)
            return True
        if (type(msg) is Put or type(msg) is Drop) and not ch.unsent:
            # A cached operand (and what the client's replicas may forget), sent ahead of
            # the call that names it: kept here, as the intake would, the role held (a
            # program sending a fresh B each round sent every round's calls through the
            # general intake and the queue). Not from a client that reads no answers:
            # the intake reads no more of it (_stick).
            try:
                rt._handle(ch, msg)
            except ProtocolError as exc:  # (a key over the limit: keylimits.py)
                rt._refuse(ch, exc)
                return True
            except BaseException:  # (as the intake: a fault in polybus's own steps)
                rt._fault_reading(ch)
                return True
            continue
        # More bytes read with it (but for a burst, above): not a lone call. They go to
        # the queue now, while this thread holds the role: once it lets the role go to
        # run the call, the poller that takes it sleeps in the selector, which cannot
        # see frames already in the decoder, nor those left in an shm ring (they
        # waited for the client's next frame: for ever over tcp).
        # (a NaN prio too: Intake._admit answers it bad-call, on every path)
        # (a call sent again after a loss too: `WorkerRuntime._run` writes what is held
        # first, answers held by other threads meanwhile, and its own answer at once)
        general = (type(msg) is not Call or msg.iface not in functions or bool(queue._live)
                   or bool(rt._paused) or msg.prio != msg.prio or msg.again
                   or bool(ch.unsent)  # (answers it has not read: intake's _stick)
                   # (a burst only from the ring: frames the decoder holds are seen by
                   # no poller's look at the ring, and would wait for a next frame)
                   or (ch.buffered() and not (burst and not msg.prio and ch.decoder.empty
                                              and clock() - rt._selected < _FAIR_S)))
        if general:
            # The general intake takes it (and what follows it). A call held there already
            # (never here: `lone` and `heed` leave such a client to the intake) goes first.
            assert ch not in rt._stash, "a held call would be overwritten"
            rt._stash[ch] = msg
            rt._take(ch)
        elif (miss := resolve_operands(rt.cache, msg, ch)) is not None:  # type: ignore[arg-type]
            # A cached operand is not here, or a forwarded value: Intake._enqueue's answer
            # (the miss counted once).
            general = True
            if isinstance(miss, Forwarded):
                rt.forwarding.hold(ch, msg, miss.nested)  # type: ignore[arg-type]
            else:
                rt._send_quietly(ch, miss)
        if general:
            # queued work (the pool runs it, someone polls), or a client not reading
            # its answers, whom the intake has stopped reading (intake.py, _stick)
            if len(queue) or rt._paused or ch.unsent:
                with lock:
                    rt._let_role_go()
                    rt._cv.notify()
                return False
            if ch.closed:
                return True
            continue
        call: Call = msg  # type: ignore[assignment]  # (not general: a Call)
        if ring:  # (still holding the role: frames behind it, the next sleeper looks first)
            rt._awake.add(ch)  # type: ignore[arg-type]
        with lock:  # run it, the role let go meanwhile (as _poll_and_release does)
            rt._polling = False
            if rt._heeding:  # (`WorkerRuntime._let_role_go`'s steps, written out)
                rt._heed_cv.notify_all()
            rt._running += 1
            rt._started += 1
            if rt._running < rt.options.pool:
                rt._cv.notify()
        try:
            if rt.options.speed < 1.0:
                rt._run(Job(call, ch, clock()))  # (the general run models a slower machine)
            else:
                _answer(rt, ch, call, functions[call.iface])
        except BaseException as exc:  # a fault in polybus's steps: the call fails alone
            rt.fault(ch, call.id, exc)
        with lock:
            rt._running -= 1
            if (rt._polling or rt._running or len(queue) or rt._stopping or rt._corked.held
                    or rt._paused or ch.unsent):
                rt._room_for_paused()
                return False
            rt._polling = True
    if ch.decoder.wants_spare:  # a large frame came: the idle poller readies the next one's memory
        rt._unwarm.add(ch)
    return True


def _answer(rt: WorkerRuntime, ch: Channel, call: Call, fn: Callable[..., Any]) -> None:
    """`WorkerRuntime._run`'s steps for a plain call that never waited in the queue."""
    clock = time.perf_counter
    threads_busy, me = rt._threads_busy, get_ident()  # (busy.py's steps, inlined)
    done = threads_busy.get(me, IDLE)[0]
    t0 = clock()
    threads_busy[me] = (done, t0)
    reply: Message
    try:
        value = fn(*call.args, **call.kwargs) if call.kwargs else fn(*call.args)
        reply = Result(call.id, value)
    except BaseException as exc:  # (as WorkerRuntime._run)
        reply = failure(call.id, exc, fn, call.args, call.kwargs)
    spent = clock() - t0
    threads_busy[me] = (done + spent, 0.0)
    rt.busy_s += spent
    rt.calls += 1
    if to_finish(rt.forwarding, reply):
        reply = rt.forwarding.finished(ch, call, reply)
    if ch.closed:
        return
    try:
        unread.send(ch, reply)
    except TransportError:
        pass  # the client is gone; the poller drops its connection
    except UNSENDABLE:
        write(ch, [reply])  # answers the call with why its result cannot be sent
