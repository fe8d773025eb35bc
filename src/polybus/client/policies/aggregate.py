"""Aggregation: small calls to one replica held briefly and written as one Batch.

A window opens with the first call held for a replica and closes (the calls are
written, packed into one ``Batch`` frame by the reactor) when it holds ``count`` calls,
or ``nbytes`` bytes of arguments, or the next call comes ``linger`` seconds after the
first, or the program waits for any answer (the reactor writes everything held before
it reads). So with one call in flight the added delay is at most the linger, and in
practice none: waiting for its answer sends it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from polybus.wire.messages import Batch, Call, Message

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.reactor import Reactor

CALL_OVERHEAD = 48  # bytes a call adds to a batch besides its array and bytes arguments


def approx_size(msg: Message) -> int:
    n = CALL_OVERHEAD
    for a in getattr(msg, "args", None) or ():
        s = getattr(a, "nbytes", None)
        n += s if isinstance(s, int) else (len(a) if isinstance(a, bytes | str) else 8)
    return n


class Aggregator:
    """Per-replica windows of held calls for one dispatcher (pure bookkeeping + flush)."""

    def __init__(self, reactor: Reactor, count: int | None, nbytes: int | None,
                 linger: float) -> None:
        self.reactor = reactor
        self.count = count if count is not None else (1 << 30 if nbytes else 64)
        self.nbytes = nbytes if nbytes is not None else 1 << 62
        self.linger = linger
        self._opened: dict[str, float] = {}
        self._bytes: dict[str, int] = {}
        self.batches = 0

    def add(self, link: ReplicaLink, msgs: list[Message]) -> None:
        now = time.monotonic()
        name = link.name
        if not link.held:
            self._opened[name] = now
            self._bytes[name] = 0
        link.held.extend(msgs)  # type: ignore[arg-type]
        size = self._bytes[name] = self._bytes.get(name, 0) + sum(approx_size(m) for m in msgs)
        if (len(link.held) >= self.count or size >= self.nbytes
                or now - self._opened.get(name, now) >= self.linger):
            self.batches += 1
            self.reactor.flush(link)


def pack(msgs: list[Any]) -> list[Message]:
    """Runs of consecutive calls become one Batch each; other messages keep their place."""
    out: list[Message] = []
    run: list[Call] = []
    for m in msgs:
        if type(m) is Call:
            run.append(m)
            continue
        if run:
            out.append(Batch(run) if len(run) > 1 else run[0])  # type: ignore[arg-type]
            run = []
        out.append(m)
    if run:
        out.append(Batch(run) if len(run) > 1 else run[0])  # type: ignore[arg-type]
    return out
