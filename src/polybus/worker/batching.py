"""A replica's side of aggregation: a ``CallBatch`` is one queued job run in a tight loop.

The calls of a batch run in order on one thread; each call's exception is caught on its
own (its slot in the answer is nil and a ``Fail`` with its index says why), so one
failing call fails alone. All answers go back as one ``BatchResult``; a call whose
value the client asked to be forwarded (``Forward``/``Keep`` with its index) has it sent
to the next stage first, and ``Ref("fwd", ...)`` in its slot (worker/forwarding.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from polybus.errors import MessageTooLarge, PolybusError
from polybus.wire.messages import BatchResult, CallBatch, Fail, Result
from polybus.worker import unread
from polybus.worker.replies import failure, unsendable, unsendable_text

if TYPE_CHECKING:
    from polybus.transport.channel import Channel
    from polybus.worker.runtime import WorkerRuntime
    from polybus.worker.servicing import Job


def run(rt: WorkerRuntime, job: Job) -> None:
    batch: CallBatch = job.call
    fn = rt.functions[batch.iface]
    t0 = time.perf_counter()
    rt.queue_wait_s += t0 - job.enqueued
    values: list[Any] = []
    fails: list[Fail] = []
    append = values.append
    refused = getattr(batch, "refused", None)  # (calls that did not unpickle: undecodable.py)
    rows = batch.args if refused is None else _unrefused(batch.args, refused, values, fails)
    for args in rows:
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
    rt.busy_s += spent
    ch = job.channel
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
    """Send ``reply``, each of whose values encodes; while the whole is over the frame
    limit, its largest value fails instead (as a single call's would, saying why), so every
    call of the batch is answered, the calls whose values fit with their values."""
    sizes = sorted(((_size(ch, i, v), i) for i, v in enumerate(reply.values)
                    if v is not None), reverse=True)
    failed = {f.id for f in reply.fails}
    while True:
        try:
            unread.send(ch, reply)
            return
        except MessageTooLarge as exc:
            while sizes and sizes[0][1] in failed:
                sizes.pop(0)
            if not sizes:
                return  # (nothing left to take out: not the values' doing)
            size, i = sizes.pop(0)
            reply.values[i] = None
            failed.add(i)
            reply.fails.append(Fail(i, "exception", "TypeError", unsendable_text(exc) + (
                f" (the batch's answers together; this value, about {size} bytes, is the "
                "largest of them): aggregate fewer calls (`aggregate`), or raise max_frame")))
        except PolybusError:
            return  # the client is gone; the poller drops its connection


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
            reply.fails.append(unsendable(i, exc))
    return reply
