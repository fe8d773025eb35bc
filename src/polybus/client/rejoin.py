"""A run whose workers were started apart takes its lost replicas back (as serve does).

A run with its own workers keeps the replicas it dialled at its start: what the engine
started and lost is lost (reliability.md). A run at a shared registry (``--registry``,
or the hosts engine) uses workers something else starts and restarts (systemd, a
container runtime, a hand), so a lost replica is looked for again as the front door's
Revival does it (http/revival.py, client/revive.py): its module is looked up at the
registry, and a replica registered without a live link (the same worker once it
answers again, one started again under its name, or another of the module) is dialled
and put in the lost one's place. Looks are rate-limited per group of links: the first
LOOK_S after the loss, then twice as far apart each time one leaves a place empty, up to
LOOK_MAX_S, while a place is empty; a call that finds no live replica looks at once if
the last look is LOOK_S old, and again each LOOK_S, for ``bound`` seconds at most.

Nothing here is on a call's path while every replica is live. The looks run on a thread
of their own (`dial` blocks: the registry, the handshakes) and touch no session state;
a link found is put in place (`install`) by a thread the session is driven from: the
next call of a binding that uses the lost link (its entry is wrapped from the loss until
every place is filled again), or the next read's after-step (`tick`: a program thread
waiting for an answer, or the pump). A call made while no replica of its binding is live
waits for the looks, ``bound`` s at most, then fails with NoReplicaError saying so; a
call lost with every replica (idempotent) waits in the binding's backlog the same way
(`Dispatcher.rejoins`, client/backlog.py), and so does an aggregating binding's batch,
lost with every replica, closed while none is live, or given back by a steal once none
is (migrate.py), in its Batcher's queue (batchsend.py, batchplace.py); then each fails
with the ConnectionLostError a run with its own workers gives at once, with what was
waited for. A Batcher's state is changed under its lock, only tried (`install`): while
another thread holds it, a replica found waits, its connection open, for a later tick.
`close` ends the look under way (a wait for the registry's answer or a replica's
counters cut short) and waits for its thread: no connection of it is left open once the
session is closed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polybus.client.picking import alive
from polybus.client.rejoinwaits import back_note, give_up, placed, waiting_on
from polybus.client.revive import (
    LOOK_MAX_S,
    LOOK_S,
    Found,
    Halt,
    back_line,
    dial,
    install,
    key_of,
    wanted,
)
from polybus.errors import NoReplicaError, PolybusError
from polybus.transport.endpoints import HANDSHAKE_TIMEOUT

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.dispatch import Dispatcher
    from polybus.client.session import Session

__all__ = ["Rejoin"]

log = logging.getLogger("polybus.client")


@dataclass
class _Key:
    gap: float = LOOK_S
    last: float = -1e9                 # time.monotonic() of the last look's start
    due: float | None = None           # when the next look is planned
    looking: bool = False
    found: list[Found] = field(default_factory=list)  # dialled, not yet put in place
    none_since: float | None = None    # when its last live link was lost
    error: tuple[str, PolybusError] | None = None  # the last loss: (replica, why)
    said: str = ""                     # why the last look left a place empty


class Rejoin:
    """A run session's lost replicas, looked for again at its shared registry."""

    def __init__(self, session: Session, bound: float) -> None:
        self.session = session
        self.bound = bound
        self.cv = threading.Condition()
        self.keys: dict[str, _Key] = {}
        self.plain: dict[str, Any] = {}  # bound name -> its entry, while it is wrapped
        # one thread puts found links in place at a time (re-entered: a send in it may read)
        self.placing = threading.RLock()
        self.closed = False
        self.thread: threading.Thread | None = None
        self.halt = Halt()  # (ends the look under way as the session closes)

    # -- on the session's threads --------------------------------------------------
    def lost(self, link: ReplicaLink, error: PolybusError) -> None:
        """``link`` was lost (Session._lost): a look is planned, and the entries of the
        bindings that use it look first until its place is filled."""
        key = key_of(self.session, link)
        if key is None or self.closed:
            return
        now = time.monotonic()
        with self.cv:
            k = self.keys.setdefault(key, _Key())
            k.error = (link.name, error)
            if k.none_since is None and all(lk.dead for lk in self.session.links[key]):
                k.none_since = now
            k.gap = LOOK_S  # (however far apart the looks for an earlier loss had grown)
            self._plan(k, max(now + LOOK_S, k.last + k.gap))
        entries = self.session.entries
        with self.cv:  # (a place filled on another thread gives entries back: _place)
            for name, d in self.session.dispatchers.items():
                if id(link) in d._index and name in entries and name not in self.plain:
                    self.plain[name] = entry = entries[name]
                    entries[name] = self._wrapped(name, d, entry)

    def swap(self, name: str, was: Any, now: Any) -> bool:
        """The bound ``name``'s entry changes from ``was`` to ``now`` while it is wrapped
        (`broadcast`: a sync binding leaves its hot path): the one given back once its
        places are filled; False if it is not wrapped."""
        with self.cv:
            if name not in self.plain:
                return False
            if self.plain[name] == was:
                self.plain[name] = now
            return True

    def _wrapped(self, name: str, d: Dispatcher, entry: Any) -> Callable[..., Any]:
        plain = self.plain

        def call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            self.before(d)
            return plain.get(name, entry)(args, kwargs)  # (as `swap` left it)
        return call

    def before(self, d: Dispatcher) -> None:
        """Before a call of ``d``'s binding: what the looks found put in place; with no
        live replica, the looks waited for (``bound`` s at most), else NoReplicaError."""
        self.tick()
        if any(alive(d)) or not d.links:
            return
        key = key_of(self.session, d.links[0])
        if key is None:
            return
        deadline = time.monotonic() + self.bound
        while not self.closed:
            with self.cv:
                k = self.keys.setdefault(key, _Key())
                now = time.monotonic()
                if not k.looking and not k.found:
                    self._plan(k, max(now, k.last + LOOK_S))
                wait = 0.0 if k.found else max(0.0, min(deadline, k.due or deadline) - now)
                seen = (k.last, k.looking)
            if wait:
                self._wait(k, seen, wait)
            self.tick()
            if any(alive(d)):
                return
            if time.monotonic() >= deadline:
                break
            if k.found:  # (left for a Batcher's lock, held on another thread: install)
                self._pause()
        raise NoReplicaError(self._none_text(d.interface, key))

    def _wait(self, k: _Key, seen: tuple[float, bool], seconds: float) -> None:
        """Wait for ``k``'s look (``seen``: its last start, and whether one was under
        way), outside the pump's gate: the pump moves what the program's other threads
        left meanwhile (client/pump.py), as it would while this thread computed. (The
        gate is left and entered again outside ``cv``: a pump's turn takes it inside.)"""
        gate = self.session.gate
        if gate is not None:
            gate.leave()
        try:
            with self.cv:
                if not k.found and (k.last, k.looking) == seen and not self.closed:
                    self.cv.wait(seconds)
        finally:
            if gate is not None:
                gate.enter()

    def _pause(self) -> None:
        """A moment outside the pump's gate, for a lock's holder to let it go."""
        gate = self.session.gate
        if gate is not None:
            gate.leave()
        try:
            time.sleep(0.001)
        finally:
            if gate is not None:
                gate.enter()

    def tick(self) -> None:
        """Put what the looks found in place; fail the calls that waited for a live
        replica past the bound (the session's after-step, and before a wrapped call)."""
        if not self.keys:
            return
        with self.placing:
            for key, k in list(self.keys.items()):
                with self.cv:
                    found, k.found = k.found, []
                if found:
                    self._place(key, k, found)
                if k.none_since is not None:
                    self._waited(key, k)

    def _place(self, key: str, k: _Key, found: list[Found]) -> None:
        s = self.session
        busy: list[Found] = []  # (a Batcher's lock held elsewhere: put in place later)
        for link in install(s, key, found, busy):
            if link.back:
                log.warning("polybus: %s", back_line(link))
        if busy:
            with self.cv:  # (closed meanwhile, on another thread: `close` kept none)
                if self.closed:
                    _close((busy, []))
                else:
                    k.found[:0] = busy
        links = s.links.get(key, [])
        if placed(s, key):
            k.none_since = None
        if wanted(s, key) is None:  # every place filled: the plain entries again
            k.gap = LOOK_S
            with self.cv:  # (and a loss on another thread wraps them: lost)
                for name in list(self.plain):
                    user = s.dispatchers.get(name)
                    if user is not None and any(id(lk) in user._index for lk in links):
                        s.entries[name] = self.plain.pop(name)
        elif not busy:
            with self.cv:
                self._plan(k, max(time.monotonic(), k.last + k.gap))

    def _waited(self, key: str, k: _Key) -> None:
        """Calls (and batches) waiting in a backlog with no live replica: a look due
        now, and those that waited past the bound failed."""
        users = waiting_on(self.session, key)
        if not users:
            return
        now = time.monotonic()
        assert k.none_since is not None
        if now - k.none_since < self.bound:
            with self.cv:
                if not k.looking and not k.found:
                    self._plan(k, max(now, k.last + LOOK_S))
            return
        give_up(users, k.error, back_note(self.session, key, self.bound))

    def _none_text(self, interface: str, key: str) -> str:
        return f"no live replica serves {interface}{back_note(self.session, key, self.bound)}"

    # -- the looks, on a thread of their own ----------------------------------------
    def _plan(self, k: _Key, when: float) -> None:
        """(cv held) A look at ``when`` at the latest."""
        if k.looking:
            return
        if k.due is None or when < k.due:
            k.due = when
        if self.thread is None and not self.closed:
            self.thread = threading.Thread(target=self._run, daemon=True,
                                           name="polybus-rejoin")
            self.thread.start()
        self.cv.notify_all()

    def _run(self) -> None:
        while True:
            with self.cv:
                while not self.closed:
                    now = time.monotonic()
                    due = [(k.due, key) for key, k in self.keys.items() if k.due is not None]
                    if due and min(due)[0] <= now:
                        key = min(due)[1]
                        break
                    self.cv.wait(min(due)[0] - now if due else None)
                if self.closed:
                    return
                k = self.keys[key]
                k.due, k.looking, k.last = None, True, time.monotonic()
            w = wanted(self.session, key)
            out: tuple[list[Found], list[str]] | Exception = ([], [])
            if w is not None:
                try:
                    out = dial(w, self.halt)
                except Exception as exc:  # (said, and looked for again later)
                    out = exc
            with self.cv:
                k.looking = False
                if self.closed:
                    _close(out)
                    return
                if isinstance(out, Exception):
                    why = f"the registry could not be asked: {out}"
                else:
                    k.found.extend(out[0])
                    why = "; ".join(out[1])
                if w is not None and (isinstance(out, Exception)
                                      or len(out[0]) < len(w.lost)):
                    why = why or "none registered in their place yet"
                    if why != k.said:  # (once, not at every look)
                        k.said = why
                        log.warning("polybus: module %r: lost replica(s) %s not back yet "
                                    "(%s); looked for again, at most %g s apart",
                                    w.module, ", ".join(w.lost), why, LOOK_MAX_S)
                    k.gap = min(k.gap * 2, LOOK_MAX_S)
                    self._plan(k, k.last + k.gap)
                self.cv.notify_all()

    def close(self, wait: bool = True) -> None:
        """No more looks; the one under way ended (a wait for the registry's answer, or
        a replica's counters, cut short) and waited for, its connections closed: none
        is left open once the run returns. A handshake under way with a replica ends
        within its own bound (``wait`` False, an interrupted run: not waited for)."""
        with self.cv:
            self.closed = True
            for k in self.keys.values():
                _close((k.found, []))
                k.found = []
            self.cv.notify_all()
        self.halt.halt()
        t = self.thread
        if t is not None and t is not threading.current_thread():
            t.join(2 * HANDSHAKE_TIMEOUT + 1.0 if wait else 0.1)


def _close(out: tuple[list[Found], list[str]] | Exception) -> None:
    """The channels of a look that came too late to be used."""
    if not isinstance(out, Exception):
        for f in out[0]:
            f.channel.close()
