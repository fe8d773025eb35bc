"""The front door gets its lost replicas back (client/revive.py does the dialling).

`polybus run` ends with its program, and a replica it loses stays lost. The front door
lives on, so when a replica is lost (its connection closed, or taken for dead after
three silent heartbeats while its process may be alive: a call holding the GIL), its
module's replicas are looked up in the registry again and those registered without a
live link are dialled: the same worker once it answers again, or a replacement
registered meanwhile (a worker started by hand, or one the engine restarted). Looks
are rate-limited per module: the first LOOK_S after the loss, then twice as far apart
each time one leaves a place empty, up to LOOK_MAX_S, for as long as a place is empty;
a request for a module with no live replica looks at once if the last look is LOOK_S
old (waiting for it at most WAIT_S: the loop is never blocked, the look runs in a
thread of its own). The session never holds more links to a module than it started
with.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from polybus.client.revive import (
    LOOK_MAX_S,
    LOOK_S,
    WAIT_S,
    Found,
    Wanted,
    dial,
    install,
    key_of,
    wanted,
)

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


class Revival:
    """Looks for the session's lost replicas; ``watch`` is told of each link made."""

    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop,
                 watch: Callable[[ReplicaLink], None], stays: str | None = None) -> None:
        """``stays``: why a worker that ended is not started again ("[serve] restart =
        false"), None if it is (or no engine started them)."""
        self.session = session
        self.loop = loop
        self.watch = watch
        self.stays = stays
        self.keys: dict[str, _Key] = {}
        self.closed = False

    def lost(self, link: ReplicaLink) -> None:
        """``link`` was lost: a look for its module's replicas is planned."""
        key = key_of(self.session, link)
        if key is not None and not self.closed:
            self._plan(key, self.keys.setdefault(key, _Key()))

    async def ready(self, name: str) -> None:
        """Before a call of the bound ``name``: with no live replica left for it, look
        now (unless the last look was too recent) and wait for that look, bounded."""
        d = self.session.dispatchers.get(name)
        if d is None or self.closed or any(not lk.dead for lk in d.links) or not d.links:
            return
        key = key_of(self.session, d.links[0])
        if key is None:
            return
        k = self.keys.setdefault(key, _Key())
        if k.look is None and time.monotonic() - k.last >= LOOK_S:
            self._look(key, k)
        if k.look is not None:
            try:
                async with asyncio.timeout(WAIT_S):
                    await asyncio.shield(k.look)
            except TimeoutError:
                pass  # (the request gets its 502; the look goes on)

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
        if k.timer is not None or k.look is not None:
            return
        delay = max(0.0, k.last + k.gap - time.monotonic())
        k.timer = self.loop.call_later(delay, self._due, key)

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
                _say(f"replica {link.name} of module {link.module!r} is back: dialled again")
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
        k.gap = min(k.gap * 2, LOOK_MAX_S)
        self._plan(key, k)

    def close(self) -> None:
        self.closed = True
        for k in self.keys.values():
            if k.timer is not None:
                k.timer.cancel()
            if k.look is not None:
                k.look.cancel()


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
