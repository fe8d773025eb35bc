"""The pump: calls waiting at the client move while the program computes.

The client has no I/O thread: a program thread that waits for an answer reads the
replicas itself (client/reactor.py), and what waits at the client for a replica's room
moves on its reads: an ``async-demand`` backlog, calls held to be written with the next
(corking), aggregated batches queued behind full windows, migration's ticks. A program
that made its calls and then computed left them there: four 0.3 s calls under
``async-demand(4)`` to one replica, made before the program computed for 2 s, started
at 0.0, 2.0, 2.3 and 2.6 s, the replica idle in between.

A session with such work (a binding under async-demand, aggregation or migration) has a
`Gate` and, from the first time it leaves work behind, a `Pump`: one daemon thread that
does what a waiting program thread would do (write what is held, take in what has
arrived, refill), but only while no program thread is inside polybus. The gate counts
them: every stub call, every read of the reactor and `broadcast` enter it. The pump acts
under the gate's lock, so a thread entering meanwhile waits for that one turn, and only
once the program has stayed outside for a grace period: a program in a loop of calls is
back within microseconds, and its calls are written together as before. Between turns
it sleeps on the replicas' sockets with their rings' flags down, so the answer that
makes room wakes it; with nothing left to move it raises the flags again and sleeps
until the program next leaves work behind.

A turn is a poll: it never waits for a replica. Its writes do not wait for room
(`Reactor.take_in` sends with transport/channel.py's LATER): a replica that stopped
reading (``overflow = "block"`` and its queue full) leaves the rest of the bytes in its
channel (``Channel.unsent``, ``Reactor.unfinished``), and the next send on that
connection writes them first, the next turn writes on with them, and so does every read
of a program thread, none of them waiting for room (a read then sleeps at most
``reactor.UNSENT_S``). A turn that waited for room held every program thread entering
polybus for as long, whatever it came for: a call to another module waited until the
full replica had run a call (tests/unit/test_pump.py, tests/integration/test_pump.py).
(A program thread's own send still waits for room, reading meanwhile, as it always has:
its bytes go after those already begun on that connection.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from polybus.client import rings
from polybus.transport.ready import ready
from polybus.transport.wake import Wake

if TYPE_CHECKING:
    from polybus.client.reactor import Reactor

__all__ = ["GRACE_S", "Gate", "Pump", "enter", "gated", "leave"]

GRACE_S = 0.001  # outside polybus this long, the program has left its calls to the pump
MOST_S = 0.008   # the longest the pump sleeps while it has work (a missed bell costs this)

P = ParamSpec("P")
R = TypeVar("R")


class Gate:
    """Which program threads are inside polybus, and the pump's turns.

    Entering and leaving are on every call, so they take no lock: ``inside`` holds one
    item per thread inside (``list.append`` and ``pop`` are atomic under the GIL) and a
    thread that enters then looks at ``busy``; the pump sets ``busy`` under ``lock`` and
    then looks at ``inside``. One of the two sees the other (Python's steps are seen in
    order by every thread): the pump stands back, or the thread waits on ``lock`` for
    the end of the turn (a poll: it never waits for a replica, not even to write)."""

    __slots__ = ("busy", "came", "dirty", "inside", "lock", "pump")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside: list[None] = []
        self.busy = False
        self.came = False   # a program thread left since the pump last looked
        self.dirty = False  # work may have been left for the pump since it last looked
        self.pump: Pump | None = None

    def enter(self) -> None:
        self.inside.append(None)
        if self.busy:
            self.wait_turn()

    def wait_turn(self) -> None:
        """Entered during the pump's turn: out again until it ends (the lock), then in."""
        self.inside.pop()
        with self.lock:
            self.inside.append(None)

    def leave(self) -> None:
        inside = self.inside
        inside.pop()
        self.came = True
        if self.dirty and not inside:
            self.left_work()

    def left_work(self) -> None:
        """The last thread left, and work may wait: wake the pump if it sleeps."""
        with self.lock:
            if self.inside:  # one came in meanwhile: it looks on its way out
                return
            self.dirty = False  # (a pump awake looks for itself at its next turn)
            pump = self.pump
            if pump is not None and pump.idle:
                pump.wake()

    def poke(self) -> None:
        """Work was left from outside the program's threads (the linger timer)."""
        self.dirty = True
        if not self.inside:
            self.left_work()


def enter(gate: Gate | None) -> None:
    """`Gate.enter` where there may be no gate (the rarer entries: a batch's first wait,
    `as_completed`'s looks, the run's last drain)."""
    if gate is not None:
        gate.enter()


def leave(gate: Gate | None) -> None:
    if gate is not None:
        gate.leave()


def gated(gate: Gate, fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` (a reactor's read) inside ``gate`` while it runs: what a session with a
    gate binds in place of the plain method (Reactor.open_gate); one without pays
    nothing."""
    inside = gate.inside

    def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        inside.append(None)  # (Gate.enter and leave, written out: every read's)
        if gate.busy:
            gate.wait_turn()
        try:
            return fn(*args, **kwargs)
        finally:
            inside.pop()
            gate.came = True
            if gate.dirty and not inside:
                gate.left_work()

    return inner


class Pump:
    """The session's thread that moves held calls and backlogs while the program is
    outside polybus. ``pending()``: is anything waiting at the client for a replica
    (read under the gate's lock)."""

    def __init__(self, reactor: Reactor, gate: Gate, pending: Callable[[], bool]) -> None:
        self.reactor = reactor
        self.gate = gate
        self.pending = pending
        self.idle = True  # asleep until woken (read and set under the gate's lock)
        self._bell = Wake()
        self._thread: threading.Thread | None = None
        self._stopped = False
        gate.pump = self

    def wake(self) -> None:
        """From under the gate's lock: there may be work; start the thread the first time."""
        self.idle = False
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, daemon=True,
                                            name="polybus-pump")
            self._thread.start()
        else:
            self._bell.ring()

    def on_thread(self) -> bool:
        """True on the pump's own thread (its turn must never wait for a program's lock)."""
        return self._thread is threading.current_thread()

    def stop(self) -> None:
        self._stopped = True
        self._bell.ring()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            try:
                t.join(5)
            except RuntimeError:  # (made by a wake on another thread, not started yet:
                pass              # once it starts it sees _stopped and returns at once)
        self._bell.close()

    # -- the thread ------------------------------------------------------------------
    def _main(self) -> None:
        gate = self.gate
        grace = GRACE_S
        while not self._stopped:
            if self.idle:
                self._sleep(None)
                grace = GRACE_S
                continue
            gate.came = False
            if grace:
                self._sleep(grace)
            if self._stopped:
                return
            with gate.lock:
                gate.busy = True
                try:
                    if gate.inside or gate.came:  # the program is at it: later
                        grace = min(max(2 * grace, GRACE_S), MOST_S)
                        continue
                    grace = GRACE_S
                    self.reactor.take_in()
                    if not self.pending():
                        self.idle = True
                        self._flags(up=True)
                        continue
                finally:
                    gate.busy = False
            self._wait_answers()
            grace = 0.0  # an answer came (or the wait ran out): look at once

    def _sleep(self, seconds: float | None) -> None:
        try:  # (a poll: select() takes no descriptor past 1,023)
            ready([self._bell.fileno()], [], seconds)
        except (OSError, ValueError):  # (closed under it: stopping)
            return
        self._bell.clear()

    def _flags(self, up: bool) -> list[Any]:
        """The rings' awake flags, raised (as a running client keeps them) or lowered
        (replicas ring their doorbells): taken only if no program thread reads."""
        reactor = self.reactor
        if not reactor._rings or not reactor._lock.acquire(blocking=False):
            return []
        try:
            if up:
                rings.up(reactor._rings)
                return []
            return rings.down(reactor._rings)
        finally:
            reactor._lock.release()

    def _wait_answers(self) -> None:
        """Sleep until a replica sends something, the program leaves more work, a socket
        with bytes left unsent has room, or MOST_S (a program that read meanwhile raised
        the flags: its bells are missed; a ring's room comes with no bell)."""
        if self._flags(up=False):
            return  # frames are already in a ring
        bell = self._bell.fileno()
        links = [lk for lk in self.reactor.links if not lk.dead]
        fds = [lk.channel.sock.fileno() for lk in links]
        full = [lk.channel.sock.fileno() for lk in links
                if lk.channel.unsent and getattr(lk.channel, "_tx", None) is None]
        try:  # (a poll: select() raised ValueError for a descriptor past 1,023)
            woke = ready([*fds, bell], full, MOST_S)[0]
        except (OSError, ValueError):  # a socket closed under it (a replica lost)
            return
        if bell in woke:
            self._bell.clear()
