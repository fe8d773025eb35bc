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

`wants` probes each list, tuple or dict argument (and a dataclass, pickle off) once
(`holds_promise`: a msgspec encode of it) and hands the answers on (`Probes`), so that
the rest of the call's path, forwarding or not, takes them rather than probe it again
(`carried`, `wireargs.wired`).
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

__all__ = ["NONE_HELD", "NOT_FORWARDED", "Probes", "carried", "forwardable", "promise_inside", "wants"]

# What `wants` found of a call's containers (every list, tuple or dict argument, and
# dataclass with pickle off, is probed): the ids of those that hold a promise (or a
# handle); the others hold none. (The arguments live as long as the call is made.)
Probes = frozenset[int] | set[int]
NONE_HELD: Probes = frozenset()  # (probed, none holds one: the common case, no set made)
NOT_FORWARDED: tuple[bool, Probes | None] = (False, None)  # (None: nothing probed)
_FORWARDED: tuple[bool, Probes | None] = (True, None)
_CLEAN = (False, NONE_HELD)
_CLEAN_FORWARDED = (True, NONE_HELD)


def forwardable(f: Forwarder, d: Dispatcher, v: Any) -> bool:
    """``v`` is a promise whose value goes replica to replica to a call of ``d``: of this
    run (another run's is waited for through its own session: client/ended.py), its
    value not at the client, and not to be pickled for a module that takes no pickle."""
    return ((type(v) is CallPromise or type(v) is BatchPromise) and unsent_value(v)
            and run_of(v) is f.reactor and not pickles_for(v, d))


def wants(f: Forwarder, d: Dispatcher, args: tuple[Any, ...], kwargs: dict[str, Any]
          ) -> tuple[bool, Probes | None]:
    """Whether a promise of this run among the arguments, or inside them, has its value
    not at the client (False if one of its own is of a module with pickle on and ``d``'s
    has it off: `pickles_for`); and what was found probing the containers among them
    (`Probes`, None if none was), for the rest of the call's path."""
    # (loops, not any() over generators: this runs on every async call)
    found = probing = False
    held_ids: set[int] | None = None  # (made only when one holds a promise)
    for vs in (args, kwargs.values()) if kwargs else (args,):
        for a in vs:
            t = type(a)
            if t is CallPromise or t is BatchPromise:
                if unsent_value(a) and run_of(a) is f.reactor:
                    if pickles_for(a, d):  # (nothing said probed: the rest was not)
                        return NOT_FORWARDED
                    found = True
            elif t not in _LEAF:
                if t is list or t is tuple or t is dict or is_namedtuple(t):
                    items = a
                elif not d.pickle and dataclasses.is_dataclass(t):
                    items = None  # (its fields, looked into if it holds one)
                else:
                    continue
                probing = True
                if not holds_promise(a):
                    continue
                if held_ids is None:
                    held_ids = {id(a)}
                else:
                    held_ids.add(id(a))
                if not found and promise_inside(
                        _fields(a) if items is None else items,
                        lambda v: forwardable(f, d, v)):
                    found = True
    if held_ids is not None:
        return found, held_ids
    if probing:
        return _CLEAN_FORWARDED if found else _CLEAN
    return _FORWARDED if found else NOT_FORWARDED


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


def carried(value: Any, pickle: bool, forward: Callable[[Any], Any],
            probes: Probes | None = None) -> Any:
    """``value``, an argument of a forwarding call that is not a promise forwarded, as it
    travels: a list, tuple or dict (a dataclass, ``pickle`` off) holding promises made
    by `wireargs.inside`, each promise ``forward`` gives a Ref for left as that Ref
    (client/nested.py's ``Nested``); anything else as `wire` makes it. ``probes``:
    what `wants` found of the call's containers (not probed again)."""
    t = type(value)
    if t is list or t is tuple or t is dict or is_namedtuple(t):
        held = holds_promise(value) if probes is None else id(value) in probes
        return inside(value, forward) if held else value
    if not pickle and dataclasses.is_dataclass(t):
        held = holds_promise(value) if probes is None else id(value) in probes
        return inside(_fields(value), forward) if held else value
    return wire(value, pickle)

