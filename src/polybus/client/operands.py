"""Client side of operand caching, broadcast and aggregation: how a call's messages are made.

A ``Comm`` sits between a dispatcher and the reactor when the configuration asks for
``cache``, ``aggregate`` or the program uses `broadcast`. Cached operands are named by
their content (client/naming.py), sent to a replica in a ``Put`` the first time and as
``Ref("op", key)`` after; a replica that lost one answers ``cache-miss`` and the call is
named again after a ``Put`` of it (`Comm.missed`); a call whose operands, more than one,
pass the replica's cache bound together sends their values at once (`Comm._apart`: Put,
they would evict each other, and it would miss twice). An aggregated batch follows what its
Puts evict at the replica (client/held.py). When the last live array of a
content is freed or changed, each replica it was sent to is told (``Drop``, in the next
message to that replica) and forgets it: a program that sends a fresh B every round
keeps one B per replica, and its memory, over ``shm`` the sender's segment, is reused
warm instead of faulted in anew (~1 ms per MB on these machines).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import Pending
from polybus.client.cachedargs import CachedArgs
from polybus.client.counts import Counts, uncount
from polybus.client.held import Held, held_bytes, named_keys, spare
from polybus.client.naming import Known, content_key
from polybus.client.nested import Nested
from polybus.client.policies.aggregate import Aggregator
from polybus.client.quickname import Quick
from polybus.client.shared import AUTO_THRESHOLD, Shared, copy_of
from polybus.client.snapshot import snapshot, snapshot_kwargs
from polybus.errors import MessageTooLarge
from polybus.wire.codec import Ref
from polybus.wire.messages import CallBatch, Drop, Message, Put

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.dispatch import Dispatcher
    from polybus.client.reactor import Reactor

# prefetch's Puts to other replicas, left for the caller to write (Comm.batch_messages)
Pushes = list[tuple["ReplicaLink", Message]]


class Comm(CachedArgs, Quick):
    """Makes and sends the messages of one dispatcher's calls (which arguments it caches:
    client/cachedargs.py; a plain async call's quick path: client/quickname.py)."""

    def __init__(self, dispatcher: Dispatcher, reactor: Reactor, known: Known, *,
                 positions: frozenset[int] = frozenset(), names: frozenset[str] = frozenset(),
                 rest_from: int | None = None, other_names: frozenset[str] | None = None,
                 auto: bool = False, prefetch_all: bool = False,
                 aggregator: Aggregator | None = None, cache_bytes: int | None = None,
                 capacity: int = 0) -> None:
        self.dispatcher = dispatcher
        self.reactor = reactor
        self.known = known
        # Which arguments are cached: positions (of named positional parameters), every
        # position from rest_from on (cache names the *args parameter), keywords by name,
        # and any keyword not in other_names (cache names the **kwargs parameter).
        self.positions = positions
        self.names = names
        self.rest_from = rest_from
        self.other_names = other_names
        self.auto = auto
        self.prefetch_all = prefetch_all
        self.aggregator = aggregator
        self.cache_bytes = cache_bytes  # define.cache_bytes (an aggregated batch's bound)
        self.capacity = capacity  # its replicas' cache bound (ModuleSpec.cache_bytes)
        self.resent = 0  # calls re-sent after a cache miss
        # The binding's counts for the run's report (client/counts.py)
        self.counts = dispatcher.counts if dispatcher is not None else Counts()
        self._refs: dict[str, Ref] = {}  # `quick`'s Refs, by key (quickname.py)

    def copy_plan(self, other: Comm) -> None:
        """Cache the same arguments as ``other`` and aggregate with its aggregator."""
        self.positions, self.names, self.auto = other.positions, other.names, other.auto
        self.rest_from, self.other_names = other.rest_from, other.other_names
        self.prefetch_all, self.aggregator = other.prefetch_all, other.aggregator
        self.cache_bytes, self.capacity = other.cache_bytes, other.capacity

    def holds(self, link: ReplicaLink) -> Held:
        """What ``link``'s replica holds from this session, as far as it knows."""
        return self.known.of(link, self.capacity)

    # -- making messages ---------------------------------------------------------
    def _name(self, args: Any, known: Held | None, puts: list[Message],
              link: ReplicaLink, seen: dict[int, Any] | None = None,
              inside: list[int | str] | None = None) -> list[Any] | None:
        """``args`` with its cached operands named by Ref (a new list), or None if it has
        none; a Put for each operand ``link``'s replica has not been sent is appended to
        ``puts``. With ``known`` None (a call that missed twice) they go by value. ``seen``
        (the calls of one batch) maps objects already named to their Refs: a batch's
        calls that share B hash it, and encode its name, once. With ``inside`` (a single
        call's), the handles in a list, tuple or dict argument (client/nested.py) are
        named too, and the argument's position appended there."""
        out = None
        positions, auto = self.positions, self.auto
        rest = len(args) if self.rest_from is None else self.rest_from
        for i, a in enumerate(args):
            t = type(a)
            if t is Nested:  # (a list, tuple or dict holding a handle; a batch has none)
                if inside is not None:
                    if out is None:
                        out = list(args)
                    out[i] = self._nested(a, known, puts, link, inside, i)
                continue
            if i not in positions and i < rest and t is not Shared and not auto:
                continue  # (the common argument, looked at no further)
            if seen is not None and (ref := seen.get(id(a))) is not None:
                if out is None:
                    out = list(args)
                out[i] = ref
                self.counts.operands_named += 1
                continue
            op = self._operand(i, a)
            if op is not None:
                if out is None:
                    out = list(args)
                out[i] = self._ref(op, known, puts, link)
                if seen is not None:
                    seen[id(a)] = out[i]  # (a lives while the batch is written)
        return out

    def _nested(self, a: Nested, known: Held | None, puts: list[Message],
                link: ReplicaLink, inside: list[int | str], at: int | str) -> Any:
        """``a``'s container with its handles named (`_ref`), and ``at`` marked in
        ``inside`` when they are Refs (not values: ``known`` None), or it holds
        forwarded values' Refs (client/fwdargs.py), which the replica must find."""
        if known is not None or a.fwd:
            inside.append(at)
        return a.named(lambda h: self._ref((h.key, h.value), known, puts, link))

    def _ref(self, op: tuple[str, Any], known: Held | None, puts: list[Message],
             link: ReplicaLink) -> Any:
        key, value = op
        if known is None:
            return value
        c = self.counts  # (the run's report: client/counts.py)
        if key not in known:  # (prefetch pushes it after the naming: `_prefetch`)
            known.add(key, held_bytes(value))
            puts.append(Put(key, value))
            c.operands_put += 1
        else:
            c.operands_named += 1
        return Ref("op", key)

    def messages(self, rec: CallRecord, link: ReplicaLink, inline: bool = False) -> list[Message]:
        call = rec.message()
        puts: list[Message] = []
        known = None if inline else self.holds(link)
        inside: list[int | str] = []
        named = self._name(call.args, known, puts, link, inside=inside)
        names = named is not None
        if named is not None:
            call.args = named
        if call.kwargs:
            kw = dict(call.kwargs)
            for k, v in kw.items():
                if type(v) is Nested:
                    kw[k] = self._nested(v, known, puts, link, inside, k)
                    names = True
                    continue
                op = self._operand(k, v)
                if op is not None:
                    kw[k] = self._ref(op, known, puts, link)
                    names = True
            call.kwargs = kw
        if inside:  # (the replica looks into these arguments alone: worker/cache.py)
            call.inside = inside
        if names and known is not None:
            keys = named_keys(call.args)
            if call.kwargs:
                keys += named_keys(call.kwargs.values())
            for at in inside:  # (and the handles inside its arguments)
                nested = rec.args[at] if isinstance(at, int) else (rec.kwargs or {})[at]
                keys += [h.key for h in nested.handles()]
            if len(keys) > 1:
                named_here = len(keys)
                keys = list(dict.fromkeys(keys))
                if len(keys) > 1 and self._apart(known, keys):
                    known.unput(puts)  # (not sent: nor to the other replicas, no prefetch)
                    uncount(self.counts, puts, named_here)
                    return self.messages(rec, link, inline=True)
            if puts:  # (its Puts spare the other operands it names)
                self._prefetch(puts, link)
                spare(puts, keys)
        puts.append(call)
        # Asked after naming this call's operands: an array changed in place since its
        # last call released its old content just now, which goes in this same message.
        drops = self.known.drops_for(link)
        if drops:
            puts.insert(0, Drop(drops))
        return puts

    def _apart(self, known: Held, keys: list[str]) -> bool:
        """Whether the operands ``keys`` (a call's, more than one, each put or held at
        ``known``'s replica) pass that replica's cache bound together: it could never
        hold them at once. Put, the last would evict another (an operand over the bound
        is kept alone), the call would miss, be sent again after a Put of that one (which
        evicted the next), miss again and go with values: 2.9x the bytes of sending them
        with the call at once, which `messages` does instead."""
        cap = known.capacity or self.capacity
        if not cap:
            return False
        get = known.get
        return sum(get(k, 0) for k in keys) > cap

    def named_inline(self, args: Any, link: ReplicaLink) -> None:
        """Hash the operands of ``args`` this binding caches, as `batch_messages` would
        (raising as it would for one that cannot be named), naming nothing."""
        self._name(args, None, [], link)

    def by_ref(self, args: Any) -> list[Any]:
        """``args`` as a batch's frame carries them: each operand this binding names left
        out (b""), as it goes by a Ref of a few bytes, its Put a message of its own."""
        return [b"" if self._operand(i, a) is not None else a for i, a in enumerate(args)]

    def batch_messages(self, batch: Pending, link: ReplicaLink,
                       pushes: Pushes | None = None) -> list[Message]:
        """What an aggregated batch sends to ``link`` (client/batching.py): one CallBatch
        whose calls name their cached operands, after a Put of each operand the replica
        lacks (and a Drop of those it may forget). With ``pushes`` (the linger timer, which
        must not send through the reactor), prefetch's Puts to the other replicas are
        appended there for the caller to write, instead of sent."""
        known = self.holds(link)
        puts: list[Message] = []
        rows = batch.rows()
        out: list[Any] | None = None
        seen: dict[int, Any] = {}
        try:
            for j, args in enumerate(rows):
                named = self._name(args, known, puts, link, seen)
                if named is not None:
                    if out is None:
                        out = list(rows)
                    out[j] = named
        except (TypeError, ValueError):  # an operand that cannot be named (batching.py)
            known.unput(puts)  # not sent: the replica does not have them
            raise
        if seen:
            keys = list(dict.fromkeys(named_keys(seen.values())))  # (in the order looked up)
            if puts:
                self._prefetch(puts, link, pushes)
                spare(puts, keys)
            known.settle(keys)
        puts.append(CallBatch(batch.id, batch.batcher.interface,
                              out if out is not None else rows))  # type: ignore[arg-type]
        drops = self.known.drops_for(link)
        if drops:
            puts.insert(0, Drop(drops))
        return puts

    def _prefetch(self, puts: list[Message], link: ReplicaLink,
                  pushes: Pushes | None = None) -> None:
        """prefetch = "all": the operands of ``puts`` (a message's to ``link``, whose
        naming is done) go to every other replica too. Pushed once the message is known
        to Put them, never while its operands are named: a call whose operands pass the
        cache bound together goes by value (`_apart`), and its pushes were sent before
        that was known (bytes no call needed, and replicas believed to hold what they
        had evicted)."""
        if self.prefetch_all:
            for p in puts:
                if type(p) is Put:
                    self._push_all(p.key, p.value, link, pushes)

    def _push_all(self, key: str, value: Any, skip: ReplicaLink,
                  pushes: Pushes | None = None) -> None:
        """Every replica of this interface but ``skip``'s gets the operand now (or, with
        ``pushes``, its Put is left there for the caller to write)."""
        for other in self.dispatcher.links:
            if other is not skip and not other.dead:
                k = self.holds(other)
                if key not in k:
                    k.add(key, held_bytes(value))
                    self.counts.operands_put += 1
                    if pushes is not None:
                        pushes.append((other, Put(key, value)))
                    else:
                        self.reactor.send(other, Put(key, value))

    # -- sending -----------------------------------------------------------------
    def send(self, rec: CallRecord, link: ReplicaLink, hold: bool = False) -> None:
        aggregated = self.aggregator is not None and self.dispatcher.style.kind != "sync"
        if aggregated and not (hold or self.dispatcher.keep_args):  # (or done already)
            keep = self.keep()  # held in a batch: as it is now, and re-sent so after a miss
            rec.args = snapshot(rec.args, keep)
            rec.kwargs = snapshot_kwargs(rec.kwargs, keep)
        elif not (hold or self.dispatcher.keep_args) and self.dispatcher.style.kind != "sync":
            self._keep_cached(rec)  # written now, but sent again by value after a miss
        msgs = self.messages(rec, link)
        try:
            if aggregated:
                if len(msgs) > 1:
                    # Its Puts (and Drop) go now, the call is held: a value is encoded
                    # when it is written, and an array changed in place meanwhile would
                    # reach the replica under the name of the content it had when hashed.
                    self.reactor.send_many(link, msgs[:-1])
                    msgs = msgs[-1:]
                self.aggregator.add(link, msgs)  # type: ignore[union-attr]
            elif hold and len(msgs) == 1:
                self.reactor.hold(link, msgs[0])  # type: ignore[arg-type]
            elif len(msgs) == 1:
                self.reactor.send(link, msgs[0])
            else:
                self.reactor.flush(link)
                self.reactor.send_many(link, msgs)
        except BaseException:  # not written: the call is failed or forgotten by its
            # caller (Dispatcher._send), and its Puts are not held there (a later call
            self.holds(link).unput(msgs)  # would name them for nothing)
            raise

    def send_many(self, link: ReplicaLink, recs: list[CallRecord]) -> None:
        msgs: list[Message] = []
        for r in recs:
            msgs.extend(self.messages(r, link))
        self.reactor.flush(link)
        self.reactor.send_many(link, msgs)

    def missed(self, rec: CallRecord | Pending, link: ReplicaLink, key: str) -> None:
        """The replica no longer holds ``key`` (a batch's miss: each operand it lacks, by
        spaces): forget them there and send again, named again, a Put of each operand the
        replica lacks first, and with values only if it misses again (its operands do not
        fit in the replica's cache together, or others' Puts evicted them). A call
        or an aggregated batch (whole) alike. Named, not with values, so that the
        function gets what a hit gives it: the cache's one read-only array (a call sent
        with values got a writable copy of its own on that call alone, and the replica
        kept nothing); and with values a batch's calls would each carry their own copy
        of the B they share (64 calls, 64 copies in one frame, which may pass max_frame)."""
        known = self.holds(link)
        for k in key.split():  # (a batch's miss names every operand it lacks)
            known.discard(k)
        self.resent += 1
        self.counts.cache_misses += 1
        link.outstanding[rec.id] = rec  # type: ignore[assignment]
        if link.dead:  # (it runs again elsewhere, with what the replica held)
            (rec.batcher if type(rec) is Pending else self.dispatcher).lost(link, _gone(link))
        elif type(rec) is Pending:
            try:
                if rec.resent:  # (its operands do not all fit in the replica's cache)
                    self.reactor.send(link, rec.message())
                else:
                    rec.resent = True
                    self.reactor.send_many(link, self.batch_messages(rec, link))
            except MessageTooLarge as exc:  # nothing was written: the batch fails whole
                left: Any = link.outstanding.pop(rec.id, None)
                if left is rec and rec.set_error(exc):
                    rec.batcher.completed(rec, link)
        else:
            # (a slot no call sets until it misses: CallRecord's hot path is untouched)
            again = getattr(rec, "resent", False)
            rec.resent = True
            self.reactor.send_many(link, self.messages(rec, link, inline=again))  # type: ignore[arg-type]


def _gone(link: ReplicaLink) -> Any:
    from polybus.errors import ConnectionLostError

    return ConnectionLostError(f"{link.name} is gone")


__all__ = ["AUTO_THRESHOLD", "Comm", "Known", "Shared", "content_key", "copy_of"]
