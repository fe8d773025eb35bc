"""The front door's polybus calls, made from its asyncio loop without blocking it.

The client reactor is driven by whoever needs an answer (client/reactor.py). Here that
is the event loop: each replica connection is watched with ``add_reader``; when one is
readable the reactor takes one non-blocking step, and the requests whose answers came
are woken. Calls are sent at once (``async``) or through the dispatcher's per-replica
window (``async-demand(N)``); the loop never waits inside the reactor. A send to a
replica that stopped reading (its queue full, ``overflow = "block"``) leaves what the
connection cannot take in it, written on as room comes (the socket watched for it):
the requests are held back there, each within its route's timeout, while the rest is
served. (The send waited for room: one replica that stopped reading held the whole
front door, other routes, timeouts and SIGTERM too.) What waits so is bounded by the
requests read, one a connection, each within ``max_body``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import BatchPromise, Slot
from polybus.client.calls import abandon
from polybus.client.promise import CallPromise, Promise, wait
from polybus.client.unseen import seen
from polybus.config.units import duration_text
from polybus.errors import CallTimeoutError, PolybusError, RemoteError
from polybus.errors import CancelledError as Cancelled
from polybus.http.revival import Revival
from polybus.plural import plural

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.session import Session

__all__ = ["CallBridge"]

_TICK_S = 0.05  # while calls are out: a step this often (TLS buffers, liveness, answers
#                 read while a send waited for room)


def _where(promise: Promise) -> str:
    """Where a call past its timeout was, as its 504 says it: still held at the front
    door, or sent to a replica (which, and what of the front door's was still unanswered
    there before it). Whether it had begun there is not known: a replica says nothing
    when a call begins (docs/protocol.md), only when it ends, and a message for it
    would be one more frame a call, each way past the replica's pool."""
    if type(promise) is not CallPromise:  # (an aggregated call: its batch's)
        return ""
    rec = promise._rec
    link = rec.link
    if link is None:
        return (": still held at the front door for a replica with room (callstyle "
                "async-demand), never sent")
    if any(c.id == rec.id for c in link.held):
        return f": still held at the front door to be written to replica {link.name}"
    if rec.sent_at:
        before = sum(1 for r in link.outstanding.values()
                     if r is not rec and r.sent_at <= rec.sent_at)
        text = (f": sent to replica {link.name} "
                f"{duration_text(max(0.0, time.perf_counter() - rec.sent_at))} before, "
                f"{plural(before, 'call')} sent there before it still unanswered")
    else:  # (when is stamped only under an automatic async-demand window: dispatch.py)
        others = sum(1 for r in link.outstanding.values() if r is not rec)
        text = (f": sent to replica {link.name}, {plural(others, 'other call')} of the "
                "front door's still unanswered there")
    if link.channel.unsent:
        text += "; that replica has stopped reading (its queue full): part of what was "
        text += "written to it is not sent yet"
    return text + ("; whether it had begun there is not known (a replica does not say "
                   "when a call begins)")


def _give_up(promise: Promise, error: PolybusError) -> bool:
    """Fail this one call with ``error`` (its answer, if it comes, is dropped); False if it
    was already answered. An aggregated call is one slot of its batch: the batch's other
    calls go on."""
    # (type(), not isinstance: isinstance of a promise looks at its answer's class, and
    # so waits for it, client/promise.py)
    if type(promise) is BatchPromise:
        slot = Slot(promise._rec, promise._i)
        if not slot.set_error(error):
            return False
        promise._rec.batcher.forget(slot)
        return True
    if type(promise) is not CallPromise:
        raise TypeError(f"not a call's promise: {type(promise).__name__}")
    rec = promise._rec  # the record is the dispatcher's to forget
    if not rec.set_error(error):
        return False
    abandon(rec)  # (and revoked at its replica if it has not started there)
    return True


class CallBridge:
    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop,
                 stays: str | None = None) -> None:
        """``stays``: why a worker that ended is not started again (http/revival.py)."""
        self.session = session
        self.reactor = session.reactor
        self.loop = loop
        # keyed by id(): a promise's own hash and == would wait for its value
        self._pending: dict[int, tuple[Promise, asyncio.Future[Any]]] = {}
        self._fds: dict[int, int] = {}     # id(link) -> fd watched
        self._writing: set[int] = set()    # fds watched for room (unsent bytes in them)
        self.reactor.never_wait()
        self._step_soon = False
        self._ticker: asyncio.TimerHandle | None = None
        for link in self.reactor.links:
            self.watch(link)
        # A lost replica is looked for again (http/revival.py); a new link is watched.
        self.revival = Revival(session, loop, self.watch, stays, self._schedule)
        previous = self.reactor.on_lost

        def lost(link: ReplicaLink, error: PolybusError) -> None:
            fd = self._fds.pop(id(link), None)
            if fd is not None:  # the reactor closed it; stop watching the number
                loop.remove_reader(fd)
                if fd in self._writing:
                    self._writing.discard(fd)
                    loop.remove_writer(fd)
            previous(link, error)
            self.revival.lost(link, error)
            self._schedule()

        self.reactor.on_lost = lost
        # Calls given up while written to a replica, by (link, call id): who is told when
        # the replica says it dropped one before it began (its Revoke's `Released`)
        self._revoked: dict[tuple[int, int], tuple[ReplicaLink, Callable[[str], None]]] = {}
        was_released = self.reactor.on_released

        def released(link: ReplicaLink, ids: list[int], req: int) -> None:
            was_released(link, ids, req)
            for cid in ids:
                got = self._revoked.pop((id(link), cid), None)
                if got is not None:
                    got[1](f"the call given up was dropped at {link.name} before it began: "
                           "it never runs")

        self.reactor.on_released = released

    def watch(self, link: ReplicaLink) -> None:
        """Step the reactor whenever ``link``'s socket is readable."""
        fd = link.channel.sock.fileno()
        self._fds[id(link)] = fd
        self.loop.add_reader(fd, self._step)

    async def call(self, name: str, kwargs: dict[str, Any], timeout: float | None,
                   dropped: Callable[[str], None] | None = None) -> Any:
        """The answer of the bound name ``name``; raises its typed error. ``timeout``
        runs over a wait for a lost replica too (http/revival.py). A call given up (its
        timeout, its client's close) that its replica then drops before it began is
        said to ``dropped`` (serve's log of its request)."""
        promise: Any = None
        try:
            async with asyncio.timeout(timeout):
                if self.revival.keys:  # (a replica was lost: with none live, looked for)
                    await self.revival.ready(name)
                promise = self.session.call(name, (), kwargs)
                self._room()
                if not isinstance(promise, Promise):  # (a sync dispatcher answers at once)
                    return promise
                if promise.done:
                    return wait(promise)
                fut: asyncio.Future[Any] = self.loop.create_future()
                self._pending[id(promise)] = (promise, fut)
                if self._held():  # async-demand holds calls for a busy replica: next step
                    self._schedule()
                elif self._ticker is None:  # (the answer itself wakes _step: add_reader)
                    self._ticker = self.loop.call_later(_TICK_S, self._tick)
                return await fut
        except TimeoutError as exc:
            if isinstance(exc, RemoteError):  # (the function's own: errors.RemoteException)
                raise
            text = f"no answer from {name} within {duration_text(timeout or 0.0)}"
            if promise is None:  # (no call was made: it waited for a lost replica)
                text += ": none of its lost replicas came back in that time"
            else:
                text += _where(promise)
            late = CallTimeoutError(text, interface=name)
            if promise is None or _give_up(promise, late):  # (None: it waited for a replica)
                self._revoking(promise, dropped)
                raise seen(late) from None  # (its 504 is how it is looked at)
            return wait(promise)  # its answer came in the same instant
        except asyncio.CancelledError as exc:  # (its client hung up, or serve stops):
            # given up as a timeout gives it up, revoked if it has not begun
            if isinstance(promise, Promise):
                why = str(exc.args[0]) if exc.args else "its request was given up"
                if _give_up(promise, seen(Cancelled(why, interface=name))):
                    self._revoking(promise, dropped)
            raise
        finally:
            if promise is not None:
                self._pending.pop(id(promise), None)

    def _revoking(self, promise: Any, dropped: Callable[[str], None] | None) -> None:
        """``promise``'s call, just given up, is revoked at its replica (written there):
        ``dropped`` is told if the replica's `Released` names it. Those whose end is
        known since (a late answer, or the replica lost) are forgotten here."""
        if dropped is None or type(promise) is not CallPromise:
            return
        rec = promise._rec
        link = rec.link
        if link is None or link.dead or rec.id not in link.abandoned:
            return  # (never sent, or already answered: nothing revoked)
        self._revoked = {k: v for k, v in self._revoked.items()
                         if not v[0].dead and k[1] in v[0].abandoned}
        self._revoked[(id(link), rec.id)] = (link, dropped)

    def after_loss(self, name: str) -> tuple[str, bool]:
        """What a 502 for the bound ``name``'s lost replicas adds, and whether they may
        come back (http/revival.py)."""
        return self.revival.after_loss(name)

    def ended(self, replica: str) -> str:
        """How the worker of the lost ``replica`` ended, for the 502 of a call lost with
        it ("" if the engine did not say)."""
        how = self.session.ended.get(replica)
        return f"; worker {replica} {how}" if how else ""

    def _room(self) -> None:
        """Watch for room the connections a send left bytes in, and no longer those it
        has all gone from (each `_step` writes on with them)."""
        for link in self.reactor.links:
            fd = self._fds.get(id(link))
            if fd is None:
                continue
            if link.channel.unsent and not link.dead:
                self.reactor.unfinished = True  # (so that the step writes on)
                if fd not in self._writing:
                    self._writing.add(fd)
                    self.loop.add_writer(fd, self._step)
            elif fd in self._writing:
                self._writing.discard(fd)
                self.loop.remove_writer(fd)

    def _held(self) -> bool:
        return any(link.held for link in self.reactor.links)

    def _schedule(self) -> None:
        if not self._step_soon:
            self._step_soon = True
            self.loop.call_soon(self._step)

    def _step(self) -> None:
        self._step_soon = False
        self.reactor.step(timeout=0)
        self._room()
        for promise, fut in list(self._pending.values()):
            if promise._answered and not fut.done():
                try:
                    fut.set_result(wait(promise))
                except Exception as exc:  # the call's own typed error, for its request
                    fut.set_exception(exc)
        if self._pending and self._ticker is None:
            self._ticker = self.loop.call_later(_TICK_S, self._tick)

    def _tick(self) -> None:
        self._ticker = None
        self._step()

    def close(self) -> None:
        self.revival.close()
        if self._ticker is not None:
            self._ticker.cancel()
        for fd in self._fds.values():
            self.loop.remove_reader(fd)
        for fd in self._writing:
            self.loop.remove_writer(fd)
        self._writing.clear()
        self._fds.clear()
