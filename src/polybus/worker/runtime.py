"""A replica: serves a module's interfaces to authenticated clients.

Threads share one role, the poller: whoever holds it reads the sockets; on reading a
call it lets the role go and runs the call itself, so a call is never handed from an
I/O thread to a compute thread (a handoff costs ~20 us in CPython, a third of a
loopback round trip). ``pool`` threads run calls. One standby thread looks in every
few milliseconds and takes the poller role only when a call has been running since
its last look, so control messages (steal, cancel, stats) are answered during long
calls and the network never waits on compute; when the replica is idle the standby
looks less and less often (up to every 100 ms) and burns no CPU (standby.py). What a
connection brings in (reading, backpressure, each message handled) is intake.py's; one
turn of the poller is polling.py's.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from polybus.quieter import Quieter
from polybus.transport.channel import Channel
from polybus.transport.endpoints import Address, HandshakeGate, Listener, listen
from polybus.transport.greeting import Greeting
from polybus.transport.shm import ShmChannel
from polybus.transport.wake import Wake
from polybus.wire.messages import Call, Message, Result, Stats
from polybus.worker import batching, busy, direct, heeding, standby
from polybus.worker.bells import OwedBells, coalescing
from polybus.worker.cache import OperandCache
from polybus.worker.direct import DIRECT_TYPES
from polybus.worker.forwarding import Forwarding
from polybus.worker.lanes import LimitedQueue
from polybus.worker.options import ServeOptions
from polybus.worker.poller import ReadPoller, wanted
from polybus.worker.polling import WAKE, Polling
from polybus.worker.replies import (
    Corked,
    corkable,
    failure,
    internal_failure,
    send_quietly,
    text_of,
)
from polybus.worker.servicing import CallQueue, Job

log = logging.getLogger("polybus.worker")
_STOP_LOOK_S = 0.02  # a stop waiting for running calls looks again this often (`stop`)


class WorkerRuntime(Polling):
    """Serves ``functions`` (interface name -> callable) on ``address`` until `stop()`.

    ``address`` may be several (say tcp and ipc): the replica listens on each, and
    ``addresses`` says where it really is; ``address`` is the first.
    """

    idle_s = 1.0  # the longest a poller with nothing to do sleeps before looking again
    # The standby looks this often while calls run or came since its last look, then
    # twice as far apart at each idle look, up to ``standby_idle_s`` (standby.py)
    standby_look_s = 0.002
    standby_idle_s = 0.1

    def __init__(self, name: str, functions: dict[str, Callable[..., Any]], token: bytes,
                 address: str | Sequence[str] = "tcp://127.0.0.1:0",
                 options: ServeOptions | None = None) -> None:
        self.name = name
        self.options = options or ServeOptions()
        self.functions = functions
        # Each interface's own pool is the queue's to keep (lanes.py); a lone call of
        # such an interface is not run inline (direct.py), which would not count it.
        limited = {n for names, _ in self.options.limits for n in names}
        self._limited = bool(limited)
        self.lone_functions = ({n: f for n, f in functions.items() if n not in limited}
                               if limited else functions)
        self._token = token
        self._listening: dict[Address, Listener] = {}
        try:
            for text in [address] if isinstance(address, str) else address:
                sock, real = listen(Address.parse(text))
                sock.setblocking(False)
                self._listening[real] = sock
        except BaseException:
            for sock in self._listening.values():
                sock.close()
            raise
        self.addresses = list(self._listening)
        self._gates = {real: HandshakeGate() for real in self._listening}  # (accepting.py)
        self._greeting = Greeting(f"polybus-{name}-handshake")  # for stop() to end
        self.address = self.addresses[0]
        # Rung (once per call run while a client is paused, under the pool's lock) to end
        # the poller's sleep. Never blocks: sent blocking, a thread running a whole queue
        # filled its socket with no poller to read it, and the replica stopped for good.
        self._bell = Wake()
        self._sel = ReadPoller()
        for real, sock in self._listening.items():
            self._sel.register(sock, real)
        self._sel.register(self._bell, WAKE)
        self._channels: set[Channel] = set()
        self._new: list[Channel] = []
        self._paused: dict[Channel, None] = {}
        self._stuck: set[Channel] = set()  # clients not reading their answers (intake.py)
        self._stash: dict[Channel, Message] = {}  # a call read while the queue was full
        # shm channels read from in the last poll: the next poll spins on them first
        self._hot: set[ShmChannel] = set()
        self._awake: set[ShmChannel] = set()  # their rings' awake flag is up (intake._read)
        self._unwarm: set[Channel] = set()  # their next large frame would touch fresh memory
        self._selected = 0.0  # when the selector was last asked
        self._calls_seen = 0  # calls answered when the poller last looked (for its spin)
        self._queue = (LimitedQueue(self.options.queue, self.options.limits) if limited
                       else CallQueue(self.options.queue))
        self.cache = OperandCache(self.options.cache_bytes)
        self.forwarding = Forwarding(self)  # results sent on to a next stage
        self._lock = threading.Lock()           # guards queue and roles
        self._cv = threading.Condition(self._lock)  # idle threads wait on it
        self._running = 0
        self._polling = False
        self._heeding = 0  # threads waiting in `heed` for the poller role, on their own cv
        self._heed_cv = threading.Condition(self._lock)  # (a turn's end wakes no idle thread)
        self._stopping = False
        self._quiet = Quieter()
        self._quiet_calls = Quieter()
        self.calls = 0
        self.busy_s = 0.0  # the calls ended; with those under way: busy.py
        # a thread running calls -> (seconds of its calls ended, its call's start or 0)
        self._threads_busy: dict[int, tuple[float, float]] = {}
        self.queue_wait_s = 0.0
        self._started = 0  # calls started, for the standby's look
        self._corked = Corked()  # tiny answers written together (replies.py)
        self._bells = OwedBells()  # answers' bells held back at clients' asking (bells.py)
        self._stop_event = threading.Event()
        self._standby = standby.Standby()  # (when the standby looks next: standby.py)
        # A thread of the replica that ended unexpectedly: why (`_guarded`), and whom to
        # tell (serve() stops the worker, loudly): never a replica alive and deaf.
        self.died: str | None = None
        self.on_died: Callable[[], None] | None = None
        self._threads = [threading.Thread(target=self._guarded(self._thread_main), daemon=True,
                                          name=f"polybus-{name}-{i}")
                         for i in range(self.options.pool)]
        self._threads.append(threading.Thread(target=self._guarded(lambda: standby.run(self)),
                                              daemon=True, name=f"polybus-{name}-standby"))

    def start(self) -> WorkerRuntime:
        for t in self._threads:
            t.start()
        return self

    def _guarded(self, main: Callable[[], None]) -> Callable[[], None]:
        """``main``, a thread's loop, which ends only when the replica stops. Its steps
        fail a call or a connection alone, whatever they raise (SystemExit from a
        value's own code too); should the loop end by an exception all the same, the
        replica cannot go on as it was (the poller role may be lost with the thread):
        it is said in full, and `on_died` told, rather than a worker left deaf."""
        def guarded() -> None:
            try:
                main()
            except BaseException as exc:
                if self._stopping:
                    return
                died = (f"its thread {threading.current_thread().name} ended by "
                        f"{type(exc).__name__}: {text_of(exc)}")
                if self.died is None:  # (the first: those that follow may be its effects)
                    self.died = died
                log.critical("worker %s: %s; it stops serving\n%s", self.name, died,
                             "".join(traceback.format_exception(exc)).rstrip())
                if self.on_died is not None:
                    self.on_died()
        return guarded

    # -- who polls, who runs ------------------------------------------------------
    def _thread_main(self) -> None:
        polling = False  # this thread holds the poller role already (direct.py gave it back)
        while True:
            job: Job | None = None
            if not len(self._queue):
                self._release_held(every=True)
            with self._lock:  # the condition's own lock: cv.wait() below works under it
                while not polling:
                    if self._stopping:
                        return
                    if self._running < self.options.pool and (job := self._queue.pop()):
                        self._running += 1
                        self._started += 1
                        # The poller wakes one thread per burst; each woken thread wakes
                        # the next while work waits, so a burst fills the whole pool.
                        if len(self._queue) and self._running < self.options.pool:
                            self._cv.notify()
                        break
                    if not self._polling and not self._heeding:  # (heed: waits for it)
                        self._polling = True
                        break
                    self._cv.wait()
            polling = False
            if job is None:  # this thread polled; it runs what came, if anything
                job = self._poll_and_release(takes_job=True)
                if job is None:
                    continue
            try:
                self._run(job)
            except BaseException as exc:  # a fault in polybus's steps (or a SystemExit
                # from a value's own code, as it was encoded): the call fails alone
                self.fault(job.channel, job.call.id, exc)
            if not len(self._queue) and self._holding():
                self._release_held(every=True)  # (as the loop's top would: then lone below)
            with self._lock:
                self._running -= 1
                if self._limited:
                    self._queue.done(job)  # (the next call of its interface may run)
                self._room_for_paused()
                # Answered, nothing else to do: wait for that client's next call on its
                # connection alone (direct.py), holding the poller role.
                lone = (not self._polling and not self._running and not len(self._queue)
                        and not self._paused and not self._stopping and not self._corked.held
                        and not self._bells
                        and type(job.call) is Call and type(job.channel) in DIRECT_TYPES
                        # (dropped by whoever polled while the call ran: its client went,
                        # and its closed socket has no descriptor for direct.py's look)
                        and not job.channel.closed and not job.channel.unsent
                        # (a client not read meanwhile, one stuck or with a call held, is
                        # the intake's to take up again: read here, its held call was
                        # overwritten by the next, and lost)
                        and job.channel not in self._stuck
                        and job.channel not in self._stash)
                if lone:
                    self._polling = True
            if lone:
                try:
                    polling = direct.serve(self, job.channel)
                except BaseException:  # (only while it holds the role: it answers its calls' faults)
                    log.error("worker %s: serving %s failed; its connection is dropped\n%s",
                              self.name, job.channel.peer,
                              traceback.format_exc().rstrip())  # (text: intake._refuse)
                    self._drop(job.channel)
                    polling = True

    def heed(self, ch: Channel) -> None:
        """Before a large answer goes back on ``ch``: read what its client sent while the
        call ran, so that a Forward asked meanwhile is heeded (heeding.py)."""
        heeding.heed(self, ch)

    def fault(self, ch: Channel, call_id: int, exc: BaseException) -> None:
        """Call ``call_id`` met ``exc`` in polybus's own steps (not the user's function,
        whose errors are its answer): log it in full, and fail that call alone. Called
        by the thread that ran it: its call is under way no more, its seconds counted."""
        busy.faulted(self)
        log.error("worker %s: answering call %d failed", self.name, call_id, exc_info=exc)
        try:
            send_quietly(ch, internal_failure(self.name, call_id, exc))
        except BaseException:  # (it must not raise: its callers hold counts it would leave up)
            log.exception("worker %s: could not tell the client of call %d", self.name, call_id)

    def _poll_and_release(self, *, takes_job: bool) -> Job | None:
        """Poll once, let the role go, and (``takes_job``) take the next call to run."""
        job: Job | None = None
        try:
            self._poll_once()
        except BaseException:  # a bug here (or what a value raised) must not silence the replica
            log.exception("worker %s: poller failed", self.name)
        finally:
            with self._lock:
                self._let_role_go()
                if takes_job and self._running < self.options.pool and (job := self._queue.pop()):
                    self._running += 1
                    self._started += 1
                # The standby lets the role go: someone must hold it again. A pool thread
                # that goes to run a call wakes an idle one to poll meanwhile (else calls
                # that come wait for the standby's look, up to 100 ms on an idle replica);
                # not while a thread heeds (it takes the role) and no call waits.
                if ((not takes_job or (job is not None and self._running < self.options.pool))
                        and not (self._heeding and not len(self._queue))):
                    self._cv.notify()
        return job

    def _let_role_go(self) -> None:
        """(The lock held.) The poller's turn ends: threads waiting in `heed` for the
        role are told (each wakes; the first takes it), for they ring no more."""
        self._polling = False
        if self._heeding:
            self._heed_cv.notify_all()

    def _wake(self) -> None:
        self._bell.ring()

    def _room_for_paused(self) -> None:
        """A call has run (the lock held): if a client is paused and the queue has room,
        a poller that may be asleep is woken to resume it. With none holding the role,
        whoever polls next resumes it first thing (`_poll_once`), so no bell: a wake
        per call run was ~6% of a replica's time in a burst that had paused its client."""
        if self._paused and self._polling and not self._full():
            self._wake()

    # -- running a call ----------------------------------------------------------
    def _run(self, job: Job) -> None:
        if type(job.call) is not Call:  # (a CallBatch, or its RefusedRows: wire/undecodable.py)
            return batching.run(self, job)
        call: Call = job.call
        fn = self.functions[call.iface]
        if call.again:  # sent again after a loss: what is held is written first, and its
            self._release_held(every=True)  # own answer at once (Call.again), not corked
        t0 = time.perf_counter()
        me = busy.began(self, t0)
        self.queue_wait_s += t0 - job.enqueued
        reply: Message
        try:
            value = fn(*call.args, **call.kwargs) if call.kwargs else fn(*call.args)
            reply = Result(call.id, value)
        except BaseException as exc:  # (sys.exit() in user code too: the call fails alone)
            reply = failure(call.id, exc, fn, call.args, call.kwargs)
        spent = time.perf_counter() - t0
        if self.options.speed < 1.0:  # a slower machine, modelled: the difference waited out
            time.sleep(spent * (1.0 / self.options.speed - 1.0))
            spent = time.perf_counter() - t0
        self.calls += 1
        busy.ended(self, me, spent)
        reply = self.forwarding.finished(job.channel, call, reply)
        if job.channel.closed:
            return
        more = len(self._queue) and not call.again  # (one sent again: its answer at once)
        if self.busy_s < 1e-4 * self.calls and more and corkable(reply):
            # (the first corked is due in 2 ms, maybe before a bell owed already)
            held = bool(self._corked.held)
            self._corked.hold(job.channel, reply)  # tiny answers, more waiting: written together
        elif more and (within := coalescing(job.channel)) and not self._corked.held:
            held = self._holding()
            if self._bells.answer(job.channel, [reply], within):  # (`ring` below, or soon)
                held = False  # (a bell newly owed: it may fall due before what was held)
        else:
            held = True  # (nothing new held: no poller to wake)
            self._corked.send(job.channel, reply)  # (behind its answers corked, if any)
        if not held and self._holding():  # (held where nothing falling due as soon was)
            if self._polling:
                self._wake()  # a poller asleep bounds its sleep by when it falls due
            # and the standby looks by then: the next call may run with no one polling
            self._standby.due_in(min(self._bells.until_due(), self._corked.until_due()))
        if self._bells:
            self._bells.ring(every=not len(self._queue))

    def stats(self, req: int = 0) -> Stats:
        return Stats(self.name, self.calls, busy.now(self), self.queue_wait_s,
                     len(self._queue), self._running, self.options.speed, req,
                     self.options.pool)

    def stop(self, grace: float = 2.0) -> int:
        """Stop serving. Calls still running after ``grace`` seconds (all threads
        together, not each) are left to their threads, which are daemons: a pool of 100
        inside long calls used to hold a SIGTERMed worker 2 s per thread. The grace is
        for answers a client can still read: once every client connection has ended
        (the run that started the replica gave up, its connections closed: `wanted`), the
        running calls are not waited for. Returns how many calls it held go unanswered:
        those still running then, and those queued (a batch of aggregated calls counts
        as one)."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
            self._heed_cv.notify_all()
        self._stop_event.set()
        self._standby.wake()
        self._wake()
        deadline = time.monotonic() + grace
        self._greeting.end(timeout=min(grace, 1.0))  # handshakes under way end now
        me = threading.current_thread()
        while True:
            alive = [t for t in self._threads
                     if t is not me and t.ident is not None and t.is_alive()]  # (started)
            left = deadline - time.monotonic()
            if not alive or left <= 0:
                break
            # (every thread left runs a call, and no client is left to read its answer)
            if len(alive) <= self._running and not wanted(self._channels, self._new):
                break
            alive[0].join(timeout=min(left, _STOP_LOOK_S))
        for line in self._quiet.rest():  # (after the handshakes under way ended)
            log.warning("worker %s refused connections: %s", self.name, line)
        for line in self._quiet_calls.rest():
            log.warning("worker %s refused calls: %s", self.name, line)
        with self._lock:
            unanswered = self._running + len(self._queue)
            new, self._new = self._new, []
        if self._holding():  # what calls that ended meanwhile held back (more calls
            self._release_held(every=True)  # waited) is written before the connections
            # close: the pool's threads left at the stop, the standby too
        for ch in [*self._channels, *new]:  # (new: authenticated, not yet adopted)
            ch.close()
        self.forwarding.close()
        for s in self._listening.values():
            s.close()
        self._bell.close()
        self._sel.close()
        for where in self.addresses:
            if where.scheme in ("ipc", "shm"):
                try:
                    os.unlink(where.path)
                except OSError:
                    pass
        return unanswered

