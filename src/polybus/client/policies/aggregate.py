"""Aggregation: small calls to one replica held briefly and written as one Batch.

A window opens with the first call held for a replica and closes (the calls are
written, packed into one ``Batch`` frame by the reactor) when it holds ``count`` calls,
or ``nbytes`` bytes of arguments, or the next call comes ``linger`` seconds after the
first, or the program waits for any answer (the reactor writes everything held before
it reads). A window never takes a call that would bring it past half the frame limit
(``frame_cap``): it is written first, so calls that each fit in a frame do not make a
batch that does not (``max_frame`` of 1 MiB and forty 100 KB calls with ``aggregate =
64`` failed the program on a message it never made). The size is a guess (a list's
items at 9 bytes each): an aggregated batch that passes the limit all the same fails
each of its calls, saying why (client/batchsend.py, ``_together``). So with one call in flight the added delay is at most the linger, and in
practice none: waiting for its answer sends it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from polybus.wire.framing import DEFAULT_MAX_FRAME
from polybus.wire.messages import Batch, Call, Message

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.reactor import Reactor

CALL_OVERHEAD = 48  # bytes a call adds to a batch besides its array and bytes arguments
_SCALARS = frozenset({int, float, bool, type(None)})


def arg_bytes(args: tuple[Any, ...] | list[Any]) -> int:
    """Roughly what ``args`` adds to a batch: arrays, bytes and strings by their size, a
    list, tuple or dict at 9 bytes an item (a float's msgpack), anything else 8."""
    n = 8
    for a in args:  # (on every aggregated call: the common types by exact type first)
        t = type(a)
        if t is bytes or t is str:
            n += len(a)
        elif t in _SCALARS:
            n += 8
        else:
            s = getattr(a, "nbytes", None)
            if isinstance(s, int):
                n += s
            elif isinstance(a, list | tuple | dict):
                n += 9 * len(a)
            else:
                n += 8
    return n


def approx_size(msg: Message) -> int:
    """What ``msg`` adds to a window: its positional and keyword arguments (arg_bytes)."""
    args = getattr(msg, "args", None) or ()
    kwargs = getattr(msg, "kwargs", None)
    return CALL_OVERHEAD - 8 + arg_bytes([*args, *kwargs.values()] if kwargs else args)


def frame_cap(max_frame: int) -> int:
    """The estimated bytes a batch may hold: half the frame limit, as the estimate is rough."""
    return max(1, max_frame // 2)


class Aggregator:
    """Per-replica windows of held calls for one dispatcher (pure bookkeeping + flush)."""

    def __init__(self, reactor: Reactor, count: int | None, nbytes: int | None,
                 linger: float, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.reactor = reactor
        reactor.aggregating = True  # (its flushes' Batches are counted: client/counts.py)
        self.count = count if count is not None else (1 << 30 if nbytes else 64)
        self.nbytes = nbytes if nbytes is not None else 1 << 62
        self.cap = frame_cap(max_frame)
        self.linger = linger
        self._opened: dict[str, float] = {}
        self._bytes: dict[str, int] = {}
        self.batches = 0

    def add(self, link: ReplicaLink, msgs: list[Message]) -> None:
        now = time.monotonic()
        name = link.name
        adds = sum(approx_size(m) for m in msgs)
        if link.held and self._bytes.get(name, 0) + adds > self.cap:
            self.batches += 1
            self.reactor.flush(link)  # (the window is written; these open the next)
        if not link.held:
            self._opened[name] = now
            self._bytes[name] = 0
        link.held.extend(msgs)  # type: ignore[arg-type]
        self.reactor.work_left()
        size = self._bytes[name] = self._bytes.get(name, 0) + adds
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
