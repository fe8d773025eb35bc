"""A plain async call's cached operands named without the general path (`Quick.quick`).

The general path (client/operands.py, `Comm.messages`) makes a call's messages for any
plan: keywords, containers holding broadcast handles, several operands that may not fit
the replica's cache together, aggregation, prefetch, "auto". The program that freezes
its operand and makes many small calls needs none of it: each call names its frozen
array, and the first call to each replica after a fresh operand puts it there (and
tells it to drop the one it replaces). `quick` does exactly that, and leaves anything
else to the general path: the same messages, in the same order, with the same counts,
in a few Python steps (matmul at n=10, a fresh frozen B each product over two replicas:
the two calls of each product that put B took ~50 us each the general way, ~2.3x what
the whole send of a stateless call took).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from polybus.client.counts import Counts
from polybus.client.held import held_bytes
from polybus.client.naming import Known, _freed, content_key, remembered
from polybus.wire.arrays import frozen
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Drop, Message, Put

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.policies.aggregate import Aggregator
    from polybus.client.reactor import Reactor

__all__ = ["Quick"]

_NO_LEAD: list[Message] = []  # (never changed: the common answer, no list made per call)


class Quick:
    """`Comm`'s quick path (a mixin: the plan below is set by Comm.__init__)."""

    known: Known
    reactor: Reactor
    counts: Counts
    positions: frozenset[int]
    rest_from: int | None
    auto: bool
    prefetch_all: bool
    aggregator: Aggregator | None
    _refs: dict[str, Ref]

    def quick(self, args: tuple[Any, ...], link: ReplicaLink
              ) -> tuple[list[Any], list[Message]] | None:
        """``args`` (a plain async call's, no keywords) with their cached operands named,
        and the messages to send before the call (a Drop of what ``link``'s replica may
        forget, a Put of the operand it lacks), when that is all `Comm.messages` would do;
        else None, and the call takes the general path. Taken: every cached argument is
        an array frozen through and through (named once, its name remembered:
        naming.py), the replica has been written to before, a Put is of a call's only
        operand (several, they might not fit the replica's cache together: `_apart`),
        and no aggregation, prefetch or "auto" applies. The caller sends them with the
        call (`send_quick`). A few µs a call where the
        general path took tens (design.md, "Operand caching")."""
        if (self.aggregator is not None or self.auto or self.prefetch_all
                or self.rest_from is not None or not self.positions):
            return None
        known = self.known
        held = known.by_replica.get(link.name)
        if held is None:  # (its first: the general path makes its Held)
            return None
        out = list(args)
        n = 0
        puts: list[Message] | None = None
        for i in self.positions:
            if i < len(out):
                x = out[i]
                key = remembered(x)
                if key is None:
                    # A frozen array not named yet (a fresh B): named now, as the general
                    # path would; anything else (writable, a view of a new place, not
                    # an array) is the general path's.
                    if type(x) is not np.ndarray or not frozen(x):
                        return None
                    key = content_key(x)
                    if key is None:  # (an array of objects: by value, the general way)
                        return None
                if key not in held:
                    if puts is None:
                        puts = []
                    puts.append(Put(key, x))
                ref = self._refs.get(key)
                if ref is None:
                    if len(self._refs) >= 64:  # (fresh operands each round: bounded)
                        self._refs.clear()
                    ref = self._refs[key] = Ref("op", key)  # (encoded once: codec.py)
                out[i] = ref
                n += 1
        if puts is not None:
            if n > 1:  # (a Put beside other operands: the general path's `_apart`)
                return None
            for p in puts:
                held.add(p.key, held_bytes(p.value))  # type: ignore[union-attr]
            self.counts.operands_put += len(puts)
            n -= len(puts)
        self.counts.operands_named += n
        # Asked after naming, as `Comm.messages` does: naming may have let go of an old
        # content (a fresh B's predecessor, freed), which goes in this same message.
        if known.dead or _freed or known.drops_pending(link):
            drops = known.drops_for(link)
            if drops:
                return out, [Drop(drops), *(puts or ())]
        return out, puts or _NO_LEAD

    def send_quick(self, link: ReplicaLink, lead: list[Message], call: Call) -> None:
        """Write ``lead`` (`quick`'s) and ``call`` to ``link``, after what is held for it,
        as `Comm.send` writes a call's messages; not written, the Puts are not held at
        the replica (a later call would name them for nothing)."""
        try:
            self.reactor.flush(link)
            self.reactor.send_many(link, [*lead, call])
        except BaseException:
            held = self.known.by_replica.get(link.name)
            if held is not None:
                held.unput(lead)
            raise
