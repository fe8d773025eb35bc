"""A batch of aggregated calls at the client, and the promise of one call in it.

`Pending` is one batch (open, in flight, or answered); a call's promise is a
`BatchPromise` on (batch, index), so a call costs no record of its own. `Slot` is made
only when a promise is waited for before its batch is answered: it is what the
reactor's wait needs of a call (client/batching.py places the batches, batchsend.py
writes them).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from polybus.client.calls import error_from, expire, told, waited_on
from polybus.client.calltext import call_text
from polybus.client.fwdbatch import fetched, settle
from polybus.client.policies.aggregate import arg_bytes
from polybus.client.promise import Promise, behave_as_promise
from polybus.client.pump import enter, leave
from polybus.client.unseen import forgotten, raised
from polybus.client.waitwatch import waited
from polybus.errors import PolybusError
from polybus.wire.codec import Ref
from polybus.wire.messages import BatchResult, CallBatch
from polybus.worker.heldvalue import CACHE_ENTRY_BYTES

if TYPE_CHECKING:
    from polybus.client.batching import Batcher
    from polybus.client.calls import ReplicaLink
    from polybus.client.fwdbatch import EntryRecord

class Pending:
    """One batch: open (taking calls), in flight on ``link``, or answered."""

    # A BatchPromise is a Struct, which msgspec encodes field by field: the codec that
    # meets its batch (its first field) answers the message's promises and starts again.
    __polybus_promise_inside__ = True

    __slots__ = ("__weakref__", "args", "attempts", "batcher", "clean", "dispatcher", "done",
                 "entries", "error", "fails", "id", "late", "link", "only", "opbytes",
                 "opened", "ops", "placed", "resent", "size", "spared", "values")

    def __init__(self, batcher: Batcher, now: float) -> None:
        self.batcher = batcher
        self.dispatcher = batcher  # what Dispatcher.lost() and the reactor look at
        self.args: list[tuple[Any, ...]] = []
        self.opened = now
        self.placed = now  # (time.monotonic()) when last sent to a replica: batchplace.place
        self.size = 0
        self.id = 0
        self.link: ReplicaLink | None = None
        self.attempts = 0
        # Of those, tries lost that never reached their replica (client/unwritten.py):
        # run again, but no failed try (the poison rule counts ``attempts - spared``)
        self.spared = 0
        self.done = False
        self.clean = False  # answered, and no call of it failed or was given up on
        self.values: list[Any] = []
        self.fails: dict[int, PolybusError] | None = None
        self.error: PolybusError | None = None  # the whole batch failed
        self.late: dict[int, PolybusError] | None = None  # calls given up on (timeout)
        # The calls sent, by index, once some could not be (each failed alone, in late):
        # the CallBatch carries only these, and its answers are put back in their places.
        self.only: list[int] | None = None
        self.resent = False  # sent again after a cache miss (client/operands.py: missed)
        # With operand caching: the distinct cached operands its calls name (object id ->
        # bytes) and their bytes together (joins).
        self.ops: dict[int, int] | None = None
        self.opbytes = 0
        # Its calls whose promises were passed to forwarding calls, by index: their
        # values go replica to replica (client/fwdbatch.py).
        self.entries: dict[int, EntryRecord] | None = None

    @property
    def deadline(self) -> float:
        """When its calls' timeout runs out (time.monotonic()), counted from when it was
        sent to a replica; 0.0 with no timeout (calls.overdue)."""
        limit = self.batcher.timeout
        return 0.0 if limit is None else self.placed + limit

    def joins(self, ops: dict[int, int], bound: int) -> bool:
        """Whether a call naming the cached operands ``ops`` (id -> bytes) may join this
        batch: yes if its distinct operands stay within ``bound`` with them (the replica's
        cache_bytes: its Puts then evict none the batch names), or it has none yet (one
        call's are let in whatever their size). They are counted in if so."""
        have = self.ops
        if have is None:
            self.ops, self.opbytes = ops, sum(ops.values())
            return True
        if self.opbytes > bound and len(have) > 1:
            return False  # (it goes by value, that call alone: by_value)
        new = 0
        for k, n in ops.items():
            if k not in have:
                new += n
        if new:
            if self.opbytes + new > bound:
                return False
            have.update(ops)
            self.opbytes += new
        return True

    def by_value(self, bound: int, most: int) -> bool:
        """Whether its cached operands go by value: more than one, which together pass
        ``bound``, so never all in the replica's cache at once (Put, each would evict
        another, and the batch miss). Only one call of it names operands (joins). Not if
        they pass ``most`` (half a frame): named as usual, the batch goes with values,
        and fails with MessageTooLarge, only if it misses twice (operands.py, missed)."""
        return (self.ops is not None and len(self.ops) > 1
                and bound < self.opbytes <= most)

    def misfit(self, msg: BatchResult) -> str:
        """What makes ``msg`` no answer to this batch, "" if it is one: another count
        of values than the calls it carries, or a Fail for a call it does not have."""
        if self.done:
            return ""  # (answered or failed already: `answered` lets it go)
        n = len(self.args) if self.only is None else len(self.only)
        if len(msg.values) != n:
            return f"a BatchResult of {len(msg.values)} values for a batch of {n} calls"
        for f in msg.fails:
            if not 0 <= f.id < n:
                return f"a Fail for call {f.id} of a batch of {n} calls"
        return ""

    def answered(self, link: ReplicaLink, msg: BatchResult) -> None:
        if self.done:
            return
        only = self.only
        if msg.fails:
            iface = self.batcher.interface
            self.fails = {}
            for f in msg.fails:
                j = f.id if only is None else only[f.id]
                row = self.args[j] if j < len(self.args) else ()
                self.fails[j] = error_from(f, iface, link.name, call=call_text(iface, row, None))
            self.batcher.failed.add(self)
        if only is None:
            self.values = msg.values
        else:
            self.values = [None] * len(self.args)
            for k, j in enumerate(only):
                self.values[j] = msg.values[k]
        self.done = True
        self.clean = not msg.fails and self.late is None
        link.calls += len(self.args) if only is None else len(only)
        self.args = []  # not sent again: the arguments need not live as long as the promises
        self.batcher.completed(self, link)
        if self.entries is not None:
            settle(self)

    # The reactor treats a Fail with the batch's id like one for a single call.
    def set_error(self, error: PolybusError) -> bool:
        if self.done:
            return False
        self.error, self.done = error, True
        self.batcher.failed.add(self)
        told(self.batcher, self)
        if self.id:
            # Sealed (no call joins it any more) and never sent again: its arguments go,
            # as on an answer. An argument holding one of its promises then makes no
            # cycle the collector cannot see (promises are not tracked).
            self.args = []
        if self.entries is not None:
            settle(self)
        return True

    def __del__(self) -> None:
        # The last promise of the batch is gone: an error of one of its calls that the
        # program never saw is said (client/unseen.py).
        self.say_unseen()

    def say_unseen(self) -> None:
        """Say each error of its calls that the program never saw (once: each is then
        marked seen). Also at the end of a run (unseen.settle): a batch whose error was
        raised is kept by the traceback's frames through its untracked promises, a cycle
        the collector cannot see, so it may never be freed."""
        if self.clean:
            return
        interface = self.batcher.interface
        entries = self.entries or {}
        for errors in (self.late, self.fails):
            for i, error in (errors or {}).items():
                if not self._passed_on(entries.get(i), error):
                    forgotten(error, interface)
        if self.error is not None:
            waits = False
            for rec in entries.values():  # (each that waits is marked: not any()'s first)
                waits = self._passed_on(rec, self.error) or waits
            if not waits:
                forgotten(self.error, interface)

    @staticmethod
    def _passed_on(rec: Any, error: PolybusError) -> bool:
        """Whether ``error``, a forwarded call's (``rec``, its EntryRecord), waits to be
        seen in a consumer's error: decided when that consumer ends, as for a single
        call's promise (promise.py; a new user's pipeline said a call 'never looked at'
        whose error the program had caught in the last stage's)."""
        if rec is None or rec.error is not error or not waited_on(rec):
            return False
        rec.orphan = True  # (no promise of its own: said then if no consumer says it)
        return True

    def rows(self) -> list[tuple[Any, ...]]:
        """The argument tuples this batch sends (all, unless some could not be sent)."""
        if self.only is None:
            return self.args
        return [self.args[j] for j in self.only]

    def message(self) -> CallBatch:
        return CallBatch(self.id, self.batcher.interface, self.rows())  # type: ignore[arg-type]


def operand_bytes(args: tuple[Any, ...], at: tuple[int, ...], rest: int | None,
                  auto: int, named: list[int] | None = None) -> dict[int, int] | None:
    """The operands of ``args`` its binding caches, as its Comm finds them (operands.py,
    ``_name``): arrays and bytes at the positions ``at`` (sorted), at every position from
    ``rest`` on, or of ``auto`` bytes or more anywhere; by object (id -> bytes). With
    ``named``, its first item grows by their bytes as the call passes them, each time it
    does (one passed twice goes as two names: `sized_named`)."""
    out: dict[int, int] | None = None
    n = len(args)
    for i in (range(n) if rest is not None or auto else at):
        if i >= n:
            break
        a = args[i]
        size = (a.nbytes if isinstance(a, np.ndarray)
                else len(a) if isinstance(a, bytes | bytearray) else 0)
        if size and (i in at or (rest is not None and i >= rest) or 0 < auto <= size):
            if out is None:
                out = {}
            out[id(a)] = size + CACHE_ENTRY_BYTES  # (as the replica counts it: cache.py)
            if named is not None:
                named[0] += size
    return out


def sized_named(args: tuple[Any, ...], named: int) -> int:
    """What a call adds to its batch with operand caching: its arguments (arg_bytes),
    less the ``named`` bytes of its cached operands (`operand_bytes`: each time the call
    passes one), as the batch names each by a Ref. A batch that sends them by value
    instead (Pending.by_value) holds at most half a frame of them."""
    return max(8, arg_bytes(args) - named)


class Slot:
    """One call of a batch as the reactor's wait sees it (the parts of CallRecord it
    uses); made only when a promise is waited for before its batch is answered."""

    __slots__ = ("batch", "i")

    def __init__(self, batch: Pending, i: int) -> None:
        self.batch = batch
        self.i = i

    @property
    def done(self) -> bool:
        b = self.batch
        return b.done or (b.late is not None and self.i in b.late)

    @property
    def deadline(self) -> float:
        return self.batch.deadline

    @property
    def link(self) -> ReplicaLink | None:
        return self.batch.link

    @property
    def dispatcher(self) -> Batcher:
        return self.batch.batcher

    @property
    def id(self) -> int:
        return self.batch.id

    @property
    def sent_at(self) -> float:
        """When its batch was last sent, on ``time.perf_counter``'s clock, as a call's
        (calls.waiting_for: a Ctrl-C or --timeout in this wait raised AttributeError)."""
        placed = self.batch.placed
        return placed + (time.perf_counter() - time.monotonic()) if placed else 0.0

    def set_error(self, error: PolybusError) -> bool:
        if self.done:
            return False
        b = self.batch
        if b.late is None:
            b.late = {}
        b.late[self.i] = error
        b.clean = False
        b.batcher.failed.add(b)
        told(b.batcher, b)
        if b.entries is not None:
            settle(b)
        return True

    def outcome(self) -> Any:
        b = self.batch
        if b.late is not None and self.i in b.late:
            raise raised(b.late[self.i])
        if b.error is not None:
            raise raised(b.error)
        if b.fails is not None and self.i in b.fails:
            raise raised(b.fails[self.i])
        value = b.values[self.i]
        return value if type(value) is not Ref else fetched(b, self.i)


class BatchPromise(msgspec.Struct, Promise, gc=False):
    """The promise of call ``_i`` of batch ``_rec``: no record of its own, so a call
    costs two small objects (this and its argument tuple) however it is waited for.

    A msgspec Struct made with ``gc=False``: the cyclic garbage collector never tracks
    it. A program that makes 10^5-10^6 calls before it waits holds as many promises;
    tracked, they set off full collections over all of them again and again (measured:
    about a quarter of the client's time at 4e5 calls/s). It can be in no cycle: it
    refers only to its batch, which never refers back to it."""

    _rec: Pending
    _i: int

    def __polybus_value__(self) -> Any:
        b = self._rec
        if b.clean:
            value = b.values[self._i]
            if type(value) is not Ref:
                return value
            waited(self)  # (fetched: see CallPromise's)
            return fetched(b, self._i)
        slot = Slot(b, self._i)
        if slot.done:
            if self._i < len(b.values) and type(b.values[self._i]) is Ref:
                waited(self)  # (fetched by outcome)
            return slot.outcome()
        waited(self)
        if b.batcher.reactor.closed:  # (its run ended: nothing more is written, ended.py)
            return b.batcher.reactor.wait(slot, b.batcher.timeout)  # type: ignore[arg-type]
        # Written first if still open or held back: the reactor's lone-call wait reads
        # without flushing. (In the gate: the batches are the pump's too, pump.py.)
        gate = b.batcher.reactor.gate
        enter(gate)
        try:
            b.batcher.flush()
            return b.batcher.reactor.wait(slot, b.batcher.timeout)  # type: ignore[arg-type]  # (a Slot is what wait uses of a record)
        finally:
            leave(gate)

    @property
    def done(self) -> bool:
        slot = Slot(self._rec, self._i)
        if not slot.done:
            self._rec.batcher.reactor.poll(batches=False)  # (see Promise.done)
        return slot.done

    @property
    def _answered(self) -> bool:
        return Slot(self._rec, self._i).done

    def _read_answers(self, seconds: float) -> None:
        # (One read of whatever comes, as CallPromise's: waiting for this call's own
        # answer held as_completed up behind it, other replicas' batches answered.)
        self._rec.batcher.reactor.step(None, seconds)

    def _expire(self, now: float) -> None:
        b = self._rec.batcher
        expire(Slot(self._rec, self._i), b.timeout, now, b.reactor.poll)  # type: ignore[arg-type]  # (a Slot is what it uses of a record)

    def cancel(self) -> bool:
        from polybus.client.cancelbatch import cancel_slot

        return cancel_slot(self._rec, self._i)

    def cancelled(self) -> bool:
        from polybus.client.cancelbatch import slot_cancelled

        return slot_cancelled(self._rec, self._i)

behave_as_promise(BatchPromise)


__all__ = ["BatchPromise", "Pending", "Slot", "arg_bytes", "operand_bytes"]
