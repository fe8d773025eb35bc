"""Sends decided by a read made inside a send: written once that send is done.

A send that finds its connection full reads meanwhile (`Reactor._drain`), so client and
replica never both wait on full buffers. What such a read takes in may call for a send
of its own: a cache miss is re-sent with its operand's ``Put`` first (operands.py), a
lost replica's calls run again on another. Written there and then, that send would nest
inside the first: on the same connection it would wait forever for the lock the first
holds (a client sending aggregated calls over ``shm`` whose operands the replica kept
evicting hung so), and its frame cannot go in the middle of another anyway. So while a
thread reads inside a send, every send it decides on waits here, in order, and the send
that read for it writes them when it is done (`Reactor.send`, ``send_many``), as does
the next read if that send was not the reactor's own (a sync lane's).

A step that makes several sends which must reach a replica as one write gathers them
(`Later.gathered`): a call migration moves and what is asked of its answer there
(client/migrate.py), each replica's sends as one write whatever went to others
between. Written one by one, the replica could read the call, run it and answer it by
value before the client, preempted between the two writes, wrote the ``Forward``; the
value then went through the client.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from polybus.errors import MessageTooLarge
from polybus.wire.messages import Batch, Call, CallBatch, Message

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.sending import Sending

__all__ = ["Later", "get_ident"]

get_ident = threading.get_ident


class Later:
    """The sends one reactor's reads left for after the send they were made in."""

    __slots__ = ("queue", "reader", "writing")

    def __init__(self) -> None:
        self.reader: int | None = None  # the thread reading inside a send, if one is
        self.queue: list[tuple[ReplicaLink, list[Message]]] = []
        self.writing = False

    def defer(self, link: ReplicaLink, msgs: list[Message]) -> bool:
        """Keep ``msgs`` for later if this thread is reading inside a send."""
        if self.reader is not None and self.reader == get_ident():
            self.queue.append((link, msgs))
            return True
        return False

    @contextmanager
    def gathered(self, reactor: Sending) -> Iterator[None]:
        """The sends this thread makes in the block wait, then go when it ends, each
        replica's as one write, in order (a send to another replica between two to one
        does not split them: a moved call and its Forward, the Cancel to the replica it
        left between). In the read turn only (no other thread reads inside a send
        meanwhile). Inside a read inside a send they are gathered so too, and wait for
        that send. One message too large fails the calls of the write it is in (none of
        it written)."""
        outer = self.reader
        if outer is not None and outer != get_ident():  # (never in the read turn)
            yield
            return
        start = len(self.queue)
        self.reader = get_ident()
        try:
            yield
        finally:
            self.reader = outer
            joined: dict[int, tuple[ReplicaLink, list[Message]]] = {}
            for link, msgs in self.queue[start:]:  # (this thread's alone: `defer`)
                if (got := joined.get(id(link))) is not None:
                    got[1].extend(msgs)
                else:
                    joined[id(link)] = (link, list(msgs))
            self.queue[start:] = joined.values()
            if outer is None:
                self.write(reactor)

    def write(self, reactor: Sending) -> None:
        """Write what waits (once no read inside a send is under way, by one thread at
        a time); a message too large now fails its own call, not the one being sent."""
        if self.writing or self.reader is not None:
            return
        self.writing = True
        try:
            while self.queue:
                link, msgs = self.queue.pop(0)
                if link.dead:
                    continue  # (its calls were given to another replica, or failed, with it)
                try:
                    if len(msgs) == 1:
                        reactor.send(link, msgs[0])
                    else:
                        reactor.send_many(link, msgs)
                except MessageTooLarge as exc:
                    _fail(link, msgs, exc)
                except BaseException:  # (RecursionError, Ctrl-C: none written) kept for
                    self.queue.insert(0, (link, msgs))  # the next write, not dropped
                    raise
        finally:
            self.writing = False


def _fail(link: ReplicaLink, msgs: list[Message], exc: MessageTooLarge) -> None:
    """The calls (or aggregated batches) of ``msgs`` fail with ``exc``: none was written.
    Only calls: a Forward or Keep among them names by ``id`` the producer it asks
    something of, a call written before and still in flight."""
    for m in msgs:
        t = type(m)
        if t is Batch:  # (held calls packed into one frame: client/sending.py `flush`)
            _fail(link, [i for i in m.items if type(i) is Call], exc)  # type: ignore[union-attr]
            continue
        if t is not Call and t is not CallBatch:
            continue
        owner: Any = link.outstanding.pop(m.id, None)  # type: ignore[union-attr]
        if owner is not None and owner.set_error(exc):
            by = getattr(owner, "batcher", None) or owner.dispatcher
            by.completed(owner, link)
