"""The order a client's calls reach a replica in, whatever holds some of them back.

A call may wait at the client before it is written: in an aggregating binding's open
batch or in a batch held for a busy replica (client/batching.py), or held to be
written with the next ones (``Reactor.hold``: ``async-demand``, and the general path's
aggregation, policies/aggregate.py). A call of another binding written meanwhile to the
same replica would overtake it, and a program whose functions share state (a ``put``,
then a ``get`` of the same key) would compute another result under another
``aggregate``. So the calls a client makes over one set of connections (a module's
replicas; a binding with a ``transport`` of its own has connections of its own), on
any of their bindings, are written in the order the program made them: a call of a
binding other than the one whose call came last first writes what they all hold back
(`switch`), then is made. A program that calls one binding many times in a row keeps
its batches whole; one that alternates bindings sends smaller batches, in order. A sync
call writes everything held back first anyway (Dispatcher.call_sync).

Not ordered, by design: a call in ``async-demand``'s backlog (it waits for a replica
with room, and goes to whichever has it first), a call waiting at the client for the
value of a promise passed to it (client/awaiting.py: it is made when the value comes),
and a call run again after its replica was lost.

`Order` is per set of connections: ``taking`` names the binding (its Dispatcher, or its
Batcher for the calls its batches carry) whose call came last. A binding claims it
before it writes what the others hold, so a call another thread makes meanwhile finds
the claim gone and writes in turn; a Batcher looks at its claim again under its own
lock, where it adds the call to its batch (batching.py). Only connections with a
binding that can hold calls back have an Order (`order_calls`), and only bindings that
share them with another binding pay for the look (`Ordered`): the others pay nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import BatchPromise
from polybus.client.fwdargs import promise_inside
from polybus.client.wireargs import holds_promise, is_namedtuple

if TYPE_CHECKING:
    from polybus.client.batchcalls import Pending
    from polybus.client.batching import Batcher
    from polybus.client.dispatch import Dispatcher
    from polybus.client.reactor import Reactor

__all__ = ["Order", "Ordered", "arrange", "order_calls", "switch", "taken_written"]

Entry = Callable[[tuple[Any, ...], dict[str, Any]], Any]


class Order:
    """The calls over one set of connections: whose came last, and what may hold some."""

    __slots__ = ("batchers", "reactor", "taking")

    def __init__(self, reactor: Reactor) -> None:
        self.reactor = reactor
        self.taking: object = None  # the Dispatcher or Batcher whose call came last
        self.batchers: list[Batcher] = []  # the aggregating bindings among them


def switch(order: Order, me: Dispatcher | Batcher) -> None:
    """A call of ``me`` comes after a call of another binding: ``me`` claims the order,
    and what the bindings hold back is written first (`_write`)."""
    order.taking = me  # (first: see the module docstring)
    _write(order, me)


def _write(order: Order, me: Dispatcher | Batcher, keep: object = None,
           links: bool = True) -> None:
    """What the bindings of ``order`` hold back, written: their batches (an open one
    closed; not ``keep``'s) and, with ``links``, the calls held for company on ``me``'s
    replicas. A batch the linger timer took to write is waited for (it writes outside
    the locks: client/linger.py), a moment at most: its write never waits for room."""
    for bt in order.batchers:
        if bt is not keep:
            bt.flush()
    if links:
        reactor = order.reactor
        for link in me.links:
            if link.held:
                reactor.flush(link)
    taken_written(order)


def taken_written(order: Order) -> None:
    """Wait while the linger timer writes batches it took from a ``held`` (it writes
    outside the locks, never waiting for room: a moment at most): a sync call, which
    writes what is held back first (Dispatcher.call_sync), comes after them too."""
    for bt in order.batchers:
        while bt.taken:
            time.sleep(0)


def arrange(order: Order, d: Dispatcher, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> None:
    """Before a call of ``d`` on the general path (not an aggregated one), whose call
    did not come last: `switch`; but a call that takes a promise of the open batch of
    the binding whose call did leaves that batch open and claims nothing, so a
    pipeline's stages keep their batches. It waits for the value (a wait writes every
    batch), or waits at the client until it comes (placed after the read that brought
    it, and every read writes every batch first), or goes now and waits on its replica
    until the value comes there, once the whole batch has run, with its calls made
    before this one. Held for company itself (an aggregating binding's general path),
    it leaves the calls held before it too: they are written before it."""
    t = order.taking
    for bt in order.batchers:
        if bt is t:
            b = bt.open
            if b is not None and _takes(b, args, kwargs):
                comm = d.comm
                _write(order, d, keep=bt, links=comm is None or comm.aggregator is None)
                return
            break
    switch(order, d)


def _takes(b: Pending, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A promise of a call of batch ``b`` among the arguments, or inside a list, tuple
    or dict among them: one there is forwarded as one of its own is (client/fwdargs.py),
    or waited for at the call (a wait writes every batch)."""
    for vs in (args, kwargs.values()) if kwargs else (args,):
        for a in vs:
            t = type(a)
            if t is BatchPromise:
                if a._rec is b:
                    return True
            elif (t is list or t is tuple or t is dict or is_namedtuple(t)) and \
                    holds_promise(a) and promise_inside(
                        a, lambda v: type(v) is BatchPromise and v._rec is b):
                return True
    return False


class Ordered:
    """``entry``, the call path of ``d``'s binding, writing first what calls of the
    other bindings hold back (`arrange`)."""

    __slots__ = ("d", "entry", "order")

    def __init__(self, order: Order, d: Dispatcher, entry: Entry) -> None:
        self.order, self.d, self.entry = order, d, entry

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.order.taking is not self.d:
            arrange(self.order, self.d, args, kwargs)
        return self.entry(args, kwargs)


def order_calls(reactor: Reactor, dispatchers: dict[str, Dispatcher],
                entries: dict[str, Any], batchers: list[Batcher]) -> None:
    """Give each set of connections whose bindings may hold calls back an Order, and
    each async binding sharing it with another (its ``entries`` entry) the look
    `Ordered` makes: an aggregating binding's Batcher looks itself, and its general
    path with it (batching.py); a sync binding's call writes what is held back first
    (with ``reactor.refills`` it does anyway; its ``order`` makes it do so here) and
    waits for what the linger timer took to write (`taken_written`). The reactor's
    ``refills`` is left as it is: set, every sync call of every module would write
    first and take the after-step path, which a module without held calls need not."""
    of = {id(bt.d): bt for bt in batchers}
    groups: dict[int, list[tuple[str, Dispatcher]]] = {}
    for name, d in dispatchers.items():
        if d.links:
            groups.setdefault(id(d.links[0]), []).append((name, d))
    for group in groups.values():
        holds = [id(d) in of or d.style.kind == "async-demand"
                 or (d.comm is not None and d.comm.aggregator is not None) for _, d in group]
        if not any(holds) or (len(group) == 1 and id(group[0][1]) not in of):
            continue  # (nothing held back, or nothing to overtake it)
        order = Order(reactor)
        for name, d in group:
            bt = of.get(id(d))
            if bt is not None:
                bt.order = order
                order.batchers.append(bt)
            elif d.style.kind == "sync":
                d.order = order
            elif len(group) > 1:
                entries[name] = Ordered(order, d, entries[name])
