"""A forwarding call's arguments: which promises go replica to replica (client/forward.py).

A promise of this run whose value is not at the client is forwarded when it is an
argument of its own, and when it is inside a list, tuple (a namedtuple too) or dict
argument, at most `MAX_DEPTH` containers deep (client/nested.py), as a broadcast handle
is named there: the call is sent at once with ``Ref("fwd", key)`` in its place, in a
copy of the containers on the way to it (`wireargs.inside`), and the argument marked in
``Call.inside`` (operands.py), so the replica holds the call until the value has come
and puts it in its place (worker/cache.py, worker/fwdheld.py). A dataclass instance
travels as the dict of its fields where its module has pickle off, and its promises
are forwarded so too; with pickle on it travels as itself, pickled, where no Ref can be
found: its promises are waited for at the call. So are those in a dict's key, a set, a
list subclass or deeper than MAX_DEPTH, as any promise is there (the codec answers it).

A top-level promise of a module with pickle on, passed to a binding with it off
(`pickles_for`), keeps the call off the forwarding path (client/awaiting.py waits for
it); one inside a container is waited for at the call, the others there forwarded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import BatchPromise
from polybus.client.fwdedge import pickles_for, run_of, unsent_value
from polybus.client.nested import MAX_DEPTH
from polybus.client.promise import CallPromise
from polybus.client.wireargs import _LEAF, _fields, holds_promise, inside, is_namedtuple, wire

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher
    from polybus.client.forward import Forwarder

__all__ = ["carried", "forwardable", "promise_inside", "wants"]


def forwardable(f: Forwarder, d: Dispatcher, v: Any) -> bool:
    """``v`` is a promise whose value goes replica to replica to a call of ``d``: of this
    run (another run's is waited for through its own session: client/ended.py), its
    value not at the client, and not to be pickled for a module that takes no pickle."""
    return ((type(v) is CallPromise or type(v) is BatchPromise) and unsent_value(v)
            and run_of(v) is f.reactor and not pickles_for(v, d))


def wants(f: Forwarder, d: Dispatcher, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A promise of this run among the arguments, or inside them, whose value is not at
    the client. False if one of its own is of a module with pickle on and ``d``'s has it
    off (`pickles_for`)."""
    # (loops, not any() over generators: this runs on every async call)
    found = False
    for vs in (args, kwargs.values()) if kwargs else (args,):
        for a in vs:
            t = type(a)
            if t is CallPromise or t is BatchPromise:
                if unsent_value(a) and run_of(a) is f.reactor:
                    if pickles_for(a, d):
                        return False
                    found = True
            elif not found and t not in _LEAF and _holds(f, d, a, t):
                found = True
    return found


def _holds(f: Forwarder, d: Dispatcher, a: Any, t: type) -> bool:
    """Argument ``a`` (of type ``t``) holds a promise `forwardable` where it is looked for."""
    def hit(v: Any) -> bool:
        return forwardable(f, d, v)

    if t is list or t is tuple or t is dict or is_namedtuple(t):
        return holds_promise(a) and promise_inside(a, hit)
    if not d.pickle and dataclasses.is_dataclass(t) and holds_promise(a):
        return promise_inside(_fields(a), hit)
    return False


def promise_inside(x: Any, hit: Callable[[Any], bool], depth: int = 1) -> bool:
    """A call's promise for which ``hit`` is true among ``x``'s items (a dict's values),
    or in the lists, tuples and dicts among them, as deep as `wireargs.inside` looks
    (a promise there is forwarded: also order.py's question)."""
    for v in x.values() if type(x) is dict else x:
        t = type(v)
        if t in _LEAF:
            continue
        if t is CallPromise or t is BatchPromise:
            if hit(v):
                return True
        elif ((t is list or t is tuple or t is dict or is_namedtuple(t)) and depth < MAX_DEPTH
              and promise_inside(v, hit, depth + 1)):
            return True
    return False


def carried(value: Any, pickle: bool, forward: Callable[[Any], Any]) -> Any:
    """``value``, an argument of a forwarding call that is not a promise forwarded, as it
    travels: a list, tuple or dict (a dataclass, ``pickle`` off) holding promises made
    by `wireargs.inside`, each promise ``forward`` gives a Ref for left as that Ref
    (client/nested.py's ``Nested``); anything else as `wire` makes it."""
    t = type(value)
    if t is list or t is tuple or t is dict or is_namedtuple(t):
        return inside(value, forward) if holds_promise(value) else value
    if not pickle and dataclasses.is_dataclass(t) and holds_promise(value):
        return inside(_fields(value), forward)
    return wire(value, pickle)

