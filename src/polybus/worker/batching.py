"""A replica's side of aggregation: a ``CallBatch`` is one queued job run in a tight loop.

The calls of a batch run in order on one thread; each call's exception is caught on its
own (its slot in the answer is nil and a ``Fail`` with its index says why), so one
failing call fails alone. A batch whose client went (its connection closed by the
poller) runs no more of its calls: the one running finishes, the rest are not begun.
All answers go back as one ``BatchResult``; a call whose value the client asked to be
forwarded (``Forward``/``Keep`` with its index) has it sent to the next stage first,
and ``Ref("fwd", ...)`` in its slot (worker/forwarding.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from polybus.errors import MessageTooLarge, PolybusError
from polybus.wire.messages import BatchResult, CallBatch, Fail, Result
from polybus.wire.unsendablepath import at
from polybus.worker import busy, unread
from polybus.worker.replies import TOO_LARGE, failure, failure_room, fitted, unsendable

if TYPE_CHECKING:
    from polybus.transport.channel import Channel
    from polybus.worker.runtime import WorkerRuntime
    from polybus.worker.servicing import Job


def run(rt: WorkerRuntime, job: Job) -> None:
    batch: CallBatch = job.call
    fn = rt.functions[batch.iface]
    t0 = time.perf_counter()
    me = busy.began(rt, t0)
    rt.queue_wait_s += t0 - job.enqueued
    values: list[Any] = []
    fails: list[Fail] = []
    append = values.append
    refused = getattr(batch, "refused", None)  # (calls that did not unpickle: undecodable.py)
    rows = batch.args if refused is None else _unrefused(batch.args, refused, values, fails)
    ch = job.channel
    for args in rows:
        if ch.closed:  # (its client went: the calls not begun are for nobody, as its
            break      # queued ones, which the poller dropped with its connection)
        try:
            append(fn(*args))
        except BaseException as exc:  # (as WorkerRuntime._run)
            fails.append(failure(len(values), exc, fn, args))
            append(None)
    spent = time.perf_counter() - t0
    if rt.options.speed < 1.0:  # a slower machine, modelled as in WorkerRuntime._run
        time.sleep(spent * (1.0 / rt.options.speed - 1.0))
        spent = time.perf_counter() - t0
    rt.calls += len(values)
    busy.ended(rt, me, spent)
    if ch.closed:
        return
    reply = BatchResult(batch.id, values, fails)
    rt.forwarding.finished_batch(ch, reply)  # (values asked for by other stages go there)
    try:
        unread.send(ch, reply)
    except (TypeError, ValueError, OverflowError):
        _send_what_fits(ch, _sendable(ch, reply))
    except PolybusError:
        pass  # the client is gone; the poller drops its connection


def _unrefused(rows: list[list[Any]], refused: dict[int, Fail], values: list[Any],
               fails: list[Fail]) -> Iterator[list[Any]]:
    """The rows to run, each refused one answered in its slot instead (its index is the
    number of slots filled when it comes up: each row run fills one)."""
    for i, row in enumerate(rows):
        if i in refused:
            fails.append(refused[i])
            values.append(None)
        else:
            yield row


def _send_what_fits(ch: Channel, reply: BatchResult) -> None:
    """Send ``reply`` (each of its values encodes), which is over the frame limit as a
    whole: its failures' texts are cut first (`_cut_fails`), then its largest values fail
    instead (each saying why) while that makes it smaller, planned from each value's
    size, encoded once; if it still does not fit (many small answers: a failure is no
    smaller than each), the whole batch fails in one short message. Either way every
    call of the batch is answered."""
    limit = ch.codec.max_frame
    why = ("its value did not fit in one frame with the rest of its batch's answers "
           f"(max_frame {limit} bytes): aggregate fewer calls, or raise max_frame")
    fail_size = _size(ch, 0, Fail(0, "exception", TOO_LARGE, why))
    sizes = sorted(((_size(ch, i, v), i) for i, v in enumerate(reply.values)
                    if v is not None), reverse=True)
    total = sum(n for n, _ in sizes) + _cut_fails(ch, reply, sum(n for n, _ in sizes))
    for size, i in sizes:
        if total <= limit * 0.95 or size <= fail_size:  # (5% for the frame's own bytes)
            break
        reply.values[i] = None
        reply.fails.append(Fail(i, "exception", TOO_LARGE, why))
        total += fail_size - size
    try:
        unread.send(ch, reply)
        return
    except MessageTooLarge:
        pass
    except PolybusError:
        return  # the client is gone; the poller drops its connection
    try:  # (the client fails every call of a batch answered by a Fail of the batch's id)
        unread.send(ch, Fail(reply.id, "exception", TOO_LARGE,
                             f"the answers of this batch of {len(reply.values)} calls do not "
                             f"fit in one frame together (max_frame {limit} bytes): "
                             "aggregate fewer calls, or raise max_frame"))
    except PolybusError:
        pass


def _cut_fails(ch: Channel, reply: BatchResult, values: int) -> int:
    """The bytes of ``reply``'s failures, once those too large to share the frame with
    its values (``values`` bytes) are cut to fit (replies.fitted: a function's exception
    with a 200 KB message). They share what the values leave, and at least a quarter of
    the frame, before a value is failed for its size: a failure cut keeps its type and
    the head of its message, a value failed is lost whole. (It made the whole batch fail:
    "the answers of this batch ... do not fit in one frame together".)"""
    if not reply.fails:
        return 0
    limit = ch.codec.max_frame
    share = max(int(limit * 0.95) - values, limit // 4) // len(reply.fails)
    sizes = [_size(ch, 0, f) for f in reply.fails]
    if all(n <= share for n in sizes):
        return sum(sizes)
    reply.fails[:] = [fitted(f, failure_room(share)) if n > share else f
                      for f, n in zip(reply.fails, sizes, strict=True)]
    return sum(_size(ch, 0, f) for f in reply.fails)


def _size(ch: Channel, i: int, value: Any) -> int:
    """About how many bytes ``value`` takes in an answer."""
    header, bufs = ch.codec.encode_parts(Result(i, value))
    return len(header) + sum(len(b) if isinstance(b, bytes) else b.nbytes for b in bufs)


def _sendable(ch: Channel, reply: BatchResult) -> BatchResult:
    """``reply`` with each value that cannot be encoded replaced by its own failure."""
    failed = {f.id for f in reply.fails}
    for i, v in enumerate(reply.values):
        if i in failed:
            continue
        try:
            ch.codec.encode_parts(Result(i, v))
        except (TypeError, ValueError, OverflowError) as exc:
            reply.values[i] = None
            reply.fails.append(unsendable(i, exc, at(v, exc, ch.codec.allow_pickle, "result")))
    return reply
