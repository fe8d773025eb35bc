"""The front door gets its lost replicas back (client/revive.py does the dialling).

`polybus run` ends with its program, and a replica it loses stays lost. The front door
lives on, so when a replica is lost (its connection closed, or taken for dead after
three silent heartbeats while its process may be alive: a call holding the GIL), its
module's replicas are looked up in the registry again and those registered without a
live link are dialled: the same worker once it answers again, or a replacement
registered meanwhile (a worker started by hand, or one the engine restarted). Looks
are rate-limited per module: the first LOOK_S after the loss, then twice as far apart
each time one leaves a place empty, up to LOOK_MAX_S, for as long as a place is empty;
a worker of the module registering at the engine's own registry brings the next look
forward to LOOK_S after the last (`registered`: serve's local engine tells it);
a request for a module with no live replica looks at once if the last look is LOOK_S
old (waiting for it at most WAIT_S: the loop is never blocked, the look runs in a
thread of its own). The session never holds more links to a module than it started
with.

Where lost workers come back (the engine starts them again, or something else started
them: ``stays`` None), calls wait for them as a run at a shared registry's do
(client/rejoin.py; the steps both take are client/rejoinwaits.py): a request that finds no live replica waits
for the looks, one each LOOK_S, WAIT_S at most (or serve's --wait-for-workers, if
longer), then gets NoReplicaError saying what it
waited for; a call lost with every replica (idempotent: client/backlog.py) waits in its
binding's backlog (``Dispatcher.rejoins``) and runs on the replica that comes back, as
a call lost with its replica runs on another (counted as a loss: a call lost with 3
replicas in a row fails with PoisonCallError), or fails WAIT_S after the last replica
was lost with the ConnectionLostError it got at once before. Looks are each LOOK_S while
anything waits. The route's own timeout runs over the wait too (its 504). Where they do
not come back, a call lost with every replica, and a request that finds none, fail at
once (after one look, for the request); so do they from serve's first stop signal on,
which stops its workers being started again (`halt`).

The 502 of a request that finds its replicas gone says how each lost one's worker ended,
when the engine that started it could tell (`Session.ended`), and whether it may come
back: "retry later", unless every lost replica's worker ended and nothing starts it
again (``[serve] restart = false``; an engine that restarts none), when the route
answers 502 until serve is restarted (`after_loss`).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from polybus.client.rejoinwaits import back_note, give_up, placed, waiting_on
from polybus.client.revive import (
    LOOK_MAX_S,
    LOOK_S,
    WAIT_S,
    Found,
    Wanted,
    back_line,
    dial,
    install,
    key_of,
    wanted,
)
from polybus.errors import NoReplicaError, PolybusError

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.session import Session

__all__ = ["Revival"]


@dataclass
class _Key:
    gap: float = LOOK_S
    last: float = -1e9                        # time.monotonic() of the last look's start
    look: asyncio.Future[Any] | None = None   # the look under way
    timer: asyncio.TimerHandle | None = None  # the next look planned
    said: str = ""                            # why the last look left a place empty
    none_since: float | None = None           # when its last live link was lost
    error: tuple[str, PolybusError] | None = None  # the last loss: (replica, why)
    asking: int = 0                           # requests waiting in `ready` for a replica
    again: bool = False                       # one registered while a look was under way
    overdue: asyncio.TimerHandle | None = None  # when the calls lost with every one fail


class Revival:
    """Looks for the session's lost replicas; ``watch`` is told of each link made."""

    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop,
                 watch: Callable[[ReplicaLink], None], stays: str | None = None,
                 wake: Callable[[], None] = lambda: None) -> None:
        """``stays``: why a worker that ended is not started again ("[serve] restart =
        false"), None if it is (or no engine started them): then calls wait for it.
        ``wake``: the session is to be stepped (calls placed or failed here)."""
        self.session = session
        self.loop = loop
        self.watch = watch
        self.stays = stays
        self.wake = wake
        self.holds = stays is None  # calls wait for lost replicas to come back
        # How long at most: WAIT_S, or --wait-for-workers if longer (as a run's Rejoin)
        self.bound = max(WAIT_S, session._wait[0])
        self.keys: dict[str, _Key] = {}
        self.closed = False
        self._halted = asyncio.Event()  # (`halt`: the waits in `ready` end)
        if self.holds:  # (a call lost with every replica waits in its backlog)
            for d in session.dispatchers.values():
                d.rejoins = True

    def lost(self, link: ReplicaLink, error: PolybusError) -> None:
        """``link`` was lost: a look for its module's replicas is planned; with none
        left, the calls lost with them fail WAIT_S from now unless one comes back."""
        key = key_of(self.session, link)
        if key is None or self.closed:
            return
        k = self.keys.setdefault(key, _Key())
        k.error = (link.name, error)
        k.gap = LOOK_S  # (a loss: its first look LOOK_S after the last at most, however
        # far apart the looks for an earlier one had grown)
        if (self.holds and k.none_since is None
                and all(lk.dead for lk in self.session.links[key])):
            k.none_since = time.monotonic()
            k.overdue = self.loop.call_later(self.bound, self._overdue, key)
        self._plan(key, k)

    async def ready(self, name: str) -> None:
        """Before a call of the bound ``name``: with no live replica left for it, look
        now (unless the last look was too recent) and wait for that look, bounded;
        where lost replicas come back, wait for one (looking each LOOK_S), WAIT_S at
        most, then NoReplicaError."""
        d = self.session.dispatchers.get(name)
        if d is None or self.closed or any(not lk.dead for lk in d.links) or not d.links:
            return
        key = key_of(self.session, d.links[0])
        if key is None:
            return
        k = self.keys.setdefault(key, _Key())
        if not self.holds:
            if k.look is None and time.monotonic() - k.last >= LOOK_S:
                self._look(key, k)
            if k.look is not None:
                try:
                    async with asyncio.timeout(WAIT_S):
                        await asyncio.shield(k.look)
                except TimeoutError:
                    pass  # (the request gets its 502; the look goes on)
            return
        k.asking += 1
        try:
            async with asyncio.timeout(self.bound):
                while self.holds and not self.closed and all(lk.dead for lk in d.links):
                    if k.look is None and time.monotonic() - k.last >= LOOK_S:
                        self._look(key, k)
                    look = k.look
                    # (one that ended, its `_looked` not yet run, is not awaited: a
                    # done future's await does not yield, and this loop would spin)
                    if look is not None and not look.done():
                        await self._unless_halted(asyncio.shield(look))
                    else:  # (the next look LOOK_S after the last: _plan)
                        self._plan(key, k)
                        await self._unless_halted(
                            asyncio.sleep(max(0.01, k.last + LOOK_S - time.monotonic())))
        except TimeoutError:
            raise NoReplicaError(f"no live replica serves {d.interface}"
                                 + back_note(self.session, key, self.bound)) from None
        finally:
            k.asking -= 1

    async def _unless_halted(self, waited: Awaitable[Any]) -> None:
        """``waited`` awaited, cut short by `halt` (the look a shield's: it goes on)."""
        first = asyncio.ensure_future(waited)
        halted = asyncio.ensure_future(self._halted.wait())
        try:
            await asyncio.wait({first, halted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            first.cancel()
            halted.cancel()

    def halt(self, why: str) -> None:
        """Lost workers are not started again from now on (serve stops, ``why``): what
        waits for them fails now, as where they are never started again; a request
        waiting in `ready` gets its 502 at once, not WAIT_S later."""
        if not self.holds or self.closed:
            return
        self.holds, self.stays = False, why
        self._halted.set()
        for d in self.session.dispatchers.values():
            d.rejoins = False
        for key, k in self.keys.items():
            if k.overdue is not None:
                k.overdue.cancel()
                k.overdue = None
            users = waiting_on(self.session, key)
            if users:  # (after_loss says they are not started again, and why)
                give_up(users, k.error, "")
        self.wake()

    def _waiting(self, key: str, k: _Key) -> bool:
        """Requests or lost calls wait for a replica of ``key``: looks each LOOK_S."""
        return bool(k.asking) or (self.holds and bool(waiting_on(self.session, key)))

    def _overdue(self, key: str) -> None:
        """WAIT_S since the last live replica of ``key`` was lost, none back: the calls
        lost with them fail (their 502s)."""
        k = self.keys[key]
        k.overdue = None
        if self.closed or k.none_since is None:
            return
        users = waiting_on(self.session, key)
        if users:
            give_up(users, k.error, back_note(self.session, key, self.bound))
            self.wake()

    def after_loss(self, name: str) -> tuple[str, bool]:
        """What the 502 of a call of the bound ``name`` that was lost, or found no live
        replica, adds to its error (how its lost replicas' workers ended, and whether
        they may come back), and whether they may: the front door then adds
        Retry-After."""
        d = self.session.dispatchers.get(name)
        dead = list(dict.fromkeys(lk.name for lk in d.links if lk.dead)) if d else []
        ended = self.session.ended
        text = "".join(f"; worker {n} {ended[n]}" for n in dead if n in ended)
        if d is not None and all(lk.dead for lk in d.links) and self._for_good(dead):
            return (text + f"; not started again ({self.stays}): this route answers 502 "
                    "until serve is restarted", False)
        return text + "; lost replicas are looked for again: retry later", True

    def _for_good(self, names: list[str] | tuple[str, ...]) -> bool:
        """Every one of these lost replicas' workers ended, and none is started again."""
        return (self.stays is not None and bool(names)
                and all(n in self.session.ended for n in names))

    def _plan(self, key: str, k: _Key) -> None:
        """The next look, ``k.gap`` after the last; LOOK_S while anything waits (a look
        planned later is brought forward)."""
        if k.look is not None:
            return
        gap = LOOK_S if self._waiting(key, k) else k.gap
        at = self.loop.time() + max(0.0, k.last + gap - time.monotonic())
        if k.timer is not None:
            if k.timer.when() <= at:
                return
            k.timer.cancel()
        k.timer = self.loop.call_at(at, self._due, key)

    def _due(self, key: str) -> None:
        k = self.keys[key]
        k.timer = None
        if not self.closed and k.look is None:
            self._look(key, k)

    def _look(self, key: str, k: _Key) -> None:
        w = wanted(self.session, key)
        if w is None:  # nothing lost (any more)
            k.gap = LOOK_S
            return
        if k.timer is not None:
            k.timer.cancel()
            k.timer = None
        k.last = time.monotonic()
        fut: asyncio.Future[Any] = self.loop.create_future()
        k.look = fut
        threading.Thread(target=self._dial, args=(w, fut), daemon=True,
                         name="polybus-redial").start()
        fut.add_done_callback(lambda f: self._looked(key, k, f))

    def _dial(self, w: Wanted, fut: asyncio.Future[Any]) -> None:
        """In a thread of its own: the registry and the handshakes may take seconds."""
        try:
            out: Any = dial(w)
        except Exception as exc:  # (said, and looked for again later)
            out = exc
        try:
            self.loop.call_soon_threadsafe(_settle, fut, out)
        except RuntimeError:  # the loop is closed: serve is stopping
            _close(out)

    def _looked(self, key: str, k: _Key, fut: asyncio.Future[Any]) -> None:
        k.look = None
        again, k.again = k.again, False
        out = None if fut.cancelled() else fut.result()
        if self.closed or out is None:
            _close(out)
            return
        if isinstance(out, Exception):
            why = f"the registry could not be asked: {out}"
        else:
            found, failed = out
            for link in install(self.session, key, found):
                self.watch(link)
                if link.back:
                    _say(back_line(link))
            if found and placed(self.session, key):  # (the calls that waited: sent)
                k.none_since = None
                if k.overdue is not None:
                    k.overdue.cancel()
                    k.overdue = None
                self.wake()
            why = "; ".join(failed)
        w = wanted(self.session, key)
        if w is None:
            k.gap = LOOK_S
            return
        if not why:
            why = (f"their workers ended, and are not started again: {self.stays}"
                   if self._for_good(w.lost) else "none registered in their place yet")
        if why != k.said:  # (once, not at every look)
            k.said = why
            _say(f"module {w.module!r}: lost replica(s) {', '.join(w.lost)} not back yet "
                 f"({why}); looked for again, at most {LOOK_MAX_S:g} s apart")
        k.gap = LOOK_S if again else min(k.gap * 2, LOOK_MAX_S)
        self._plan(key, k)

    def registered(self, module: str) -> None:
        """A worker of ``module`` registered at the engine's own registry (one serve
        started again, or one taken for dead that answers again): its lost replicas are
        looked for now, LOOK_S after the last look at most, not at the next look the
        gaps planned (seconds later: its place stayed empty that long)."""
        if self.closed:
            return
        for key, k in self.keys.items():
            links = self.session.links.get(key)
            if not links or links[0].module != module or not any(lk.dead for lk in links):
                continue
            k.gap = LOOK_S
            if k.look is not None:  # (it may have asked the registry before that)
                k.again = True
            else:
                self._plan(key, k)

    def close(self) -> None:
        self.closed = True
        for k in self.keys.values():
            if k.timer is not None:
                k.timer.cancel()
            if k.look is not None:
                k.look.cancel()
            if k.overdue is not None:
                k.overdue.cancel()


def _settle(fut: asyncio.Future[Any], out: Any) -> None:
    if fut.cancelled():
        _close(out)
    else:
        fut.set_result(out)


def _close(out: Any) -> None:
    """The channels of a look that came too late to be used."""
    if isinstance(out, tuple):
        for f in out[0]:
            if isinstance(f, Found):
                f.channel.close()


def _say(text: str) -> None:
    print(f"polybus serve: {text}", file=sys.stderr, flush=True)
