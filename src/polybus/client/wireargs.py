"""Arguments as they travel: promises answered, large bytes out of band.

`wire` is applied to each argument of a call that may hold a promise or large bytes
(client/dispatch.py takes a faster way for the common types, `AS_IS_ASYNC`);
`holds_promise` says whether a list, tuple or dict holds a promise (or broadcast
handle) anywhere, `holds_handle` a handle; `plain_args`, whether a call's arguments
need `wire` at all. A list, tuple (a namedtuple too) or dict argument that holds a
broadcast handle becomes a `Nested` (client/nested.py), whose handles the binding's Comm
names; a handle in another container (a set, a list subclass) goes by value, said once
(`by_value_note`). A dict key cannot be named either, and a handle of an array there
would go by value as an array, which no dict can take as a key (it failed at the
replica): `inside` puts a `_KeyRefused` in its place, which fails the call at the
client, naming the argument, as any value the codec cannot carry does.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from polybus.client.batchcalls import BatchPromise
from polybus.client.counts import passed_on
from polybus.client.held import held_bytes
from polybus.client.lane import _AS_IS
from polybus.client.nested import FWD, HANDLE, MAX_DEPTH, Nested, Places
from polybus.client.promise import CallPromise, Promise, wait
from polybus.client.shared import Shared
from polybus.wire.codec import OOB_BYTES, PROMISE_INSIDE, OutOfBand

__all__ = ["AS_IS_ASYNC", "HOLDERS", "by_value_note", "general", "holds_handle",
           "holds_promise", "inside", "is_namedtuple", "plain_args", "probed", "wire",
           "wired"]

log = logging.getLogger("polybus.client")

# Argument types `wire` passes on as they are (by type, not isinstance: a subclass
# takes `wire`'s way), and small bytes.
AS_IS_ASYNC = _AS_IS | {np.ndarray}


def wire(value: Any, pickle: bool = False) -> Any:
    """An argument as it travels: promises answered, large bytes out of band, and a
    list, tuple (or namedtuple) or dict holding a broadcast handle made a `Nested`
    (`inside`); a handle in any other container goes by value, said (`by_value_note`).
    ``pickle``: the binding's module has pickle on, so a dataclass travels as itself
    (`_answered`), not as the map of its fields (`_fields`).

    A promise inside a list, tuple or dict is waited for here, when the call is made:
    met only while the message is encoded (the link's send lock held), a wait that must
    itself send on that link (an open batch, a held call) would deadlock. (A forwarding
    call leaves those it forwards as Refs instead: client/fwdargs.py.)"""
    t = type(value)
    if t in _PLAIN:  # (the common arguments first: this runs for each of every call's)
        return value
    if t is CallPromise or t is BatchPromise:
        got = value.__polybus_value__()
        passed_on(value)  # (its value went through the client: counts.py)
        return got
    if t is bytes:
        return OutOfBand(value) if len(value) >= OOB_BYTES else value
    if t is list or t is tuple or t is dict or is_namedtuple(t):
        return inside(value) if holds_promise(value) else value
    if dataclasses.is_dataclass(t) and holds_promise(value):
        return _answered(value) if pickle else inside(_fields(value))
    if isinstance(value, HOLDERS) and holds_handle(value):  # a set, a list subclass...
        by_value_note(_left(value), t.__name__)
    return value


def wired(args: tuple[Any, ...], kwargs: dict[str, Any] | None, pickle: bool,
          probes: frozenset[int] | set[int] | None = None
          ) -> tuple[list[Any], dict[str, Any] | None]:
    """A call's arguments as they travel (`wire`): positional, and keywords (or None).
    ``probes``: the containers (by id) a forwarding binding's look found holding a
    promise, the others it probed holding none (client/fwdargs.py's `wants`): not probed
    again (`probed`)."""
    if probes is not None:
        return ([probed(a, pickle, probes) for a in args],
                {k: probed(v, pickle, probes) for k, v in kwargs.items()} if kwargs else None)
    return ([wire(a, pickle) for a in args],
            {k: wire(v, pickle) for k, v in kwargs.items()} if kwargs else None)


def probed(value: Any, pickle: bool, probes: frozenset[int] | set[int]) -> Any:
    """`wire`'s ``value``, a container probed (a list, tuple or dict; a dataclass with
    ``pickle`` off) taken as holding a promise if its id is in ``probes``, and none if
    not (`wire`'s other steps apply to none of them)."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is list or t is tuple or t is dict or is_namedtuple(t):
        return inside(value) if id(value) in probes else value
    if not pickle and dataclasses.is_dataclass(t):
        return inside(_fields(value)) if id(value) in probes else value
    return wire(value, pickle)


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass instance as the codec carries it (a map of the fields it holds: it
    arrives as a dict, docs/configuration.md), so the promises in it are answered here,
    with the others of the call's arguments. Met only while the message was encoded,
    with the link's send lock held, a promise not yet answered was waited for there
    (a sync call hung), and one that had failed was taken for the connection breaking
    (its healthy replica declared lost)."""
    held = getattr(value, "__dict__", None)
    names = [f.name for f in dataclasses.fields(value)]
    if held is not None:
        return {n: held[n] for n in names if n in held}
    return {n: getattr(value, n) for n in names if hasattr(value, n)}  # (slots=True)


def _answered(value: Any) -> Any:
    """A dataclass instance holding a promise (or handle) as it travels where pickle is
    on: a copy (the program's own is left as it is) with its fields' promises answered
    here, as `_fields` has them answered; a handle in it goes by value, inside the
    pickle (wire/pickling.py), said (`by_value_note`)."""
    got = inside(_fields(value))
    if type(got) is Nested:
        by_value_note(got.handles(), type(value).__name__)
        got = got.value
    out = copy.copy(value)
    for name, v in got.items():
        object.__setattr__(out, name, v)  # (a frozen dataclass's too)
    return out


def is_namedtuple(t: type) -> bool:
    """``t`` is a namedtuple's class: it travels as a tuple does (a list at the replica,
    docs/configuration.md), so handles in it are named as in a tuple."""
    return issubclass(t, tuple) and hasattr(t, "_fields")


# Containers whose handles `wire` looks for when they cannot be named (the codec walks
# them, so a handle in one goes by value)
HOLDERS = (list, tuple, dict, set, frozenset)


# What `inside` passes by as it is, by type (nothing in these can be a promise or handle)
_LEAF = frozenset({int, float, bool, str, bytes, type(None), complex, np.ndarray})
_KEYS = frozenset({str, int})  # dict keys looked at no further (nothing can be in them)
_PLAIN = _LEAF - {bytes}  # what `wire` passes at once (bytes: unless out of band)


class _Walk:
    """What `inside` met: ``unlooked``, a value it did not look into (a dict key of
    another type, a set, a list subclass, an object, a container too deep), which may
    hold a handle that then goes by value; ``fwd``, a promise ``forward`` named."""

    __slots__ = ("forward", "fwd", "unlooked")

    def __init__(self, forward: Callable[[Any], Any] | None) -> None:
        self.unlooked = False
        self.forward = forward
        self.fwd = False


def inside(value: list[Any] | tuple[Any, ...] | dict[Any, Any],
           forward: Callable[[Any], Any] | None = None) -> Any:
    """``value``, a list, tuple or dict that holds a promise or handle, as it travels:
    a new container at every level (lists, tuples and dicts: `polybus.wait`'s copy; a
    namedtuple becomes a tuple, as it would arrive anyway),
    every promise in it answered; if a handle is in it, at most `MAX_DEPTH` containers
    deep and not in a dict's key, a `Nested` that names it (client/nested.py). Handles
    that still go by value are said (`by_value_note`). With ``forward`` (a forwarding
    call's: client/fwdargs.py), a promise it gives a Ref for (the others: None) is left
    as that Ref, as deep as a handle is named, and the Nested says so (``fwd``)."""
    places: Places = {}
    seen = _Walk(forward)
    out = _walk(value, places, 1, seen)
    got = Nested(out, places, seen.fwd) if places else out
    if seen.unlooked:
        by_value_note(_left(got), type(value).__name__)
    return got


class _KeyRefused:
    """In place of a dict key holding a broadcast handle of an array: encoding it (the
    codec asks it for its value, as it asks a handle) raises the TypeError every send
    path takes for a value the codec cannot carry (client/unsendable.py)."""

    __slots__ = ()

    def __polybus_value__(self) -> Any:
        raise TypeError("a broadcast handle of an array cannot be a dict key: it would go "
                        "by value, and an array is no key; key the dict by something else, "
                        "and pass the handle as an item or an argument")


def _walk(x: Any, places: Places, depth: int, seen: _Walk) -> Any:
    if type(x) is dict:
        d = {}
        for k, v in x.items():
            if type(k) not in _KEYS:
                if any(isinstance(h.value, np.ndarray) for h in _handles(k)):
                    k = _KeyRefused()
                seen.unlooked = True
            d[k] = v if type(v) in _LEAF else _item(v, k, places, depth, seen)
        return d
    items = [v if type(v) in _LEAF else _item(v, i, places, depth, seen)
             for i, v in enumerate(x)]
    return items if type(x) is list else tuple(items)


def _item(v: Any, step: Any, places: Places, depth: int, seen: _Walk) -> Any:
    t = type(v)
    if t is Shared:
        places[step] = HANDLE
        return v
    if t is list or t is tuple or t is dict or is_namedtuple(t):
        if depth >= MAX_DEPTH:  # (deeper: as `wait` makes it, a handle by value)
            seen.unlooked = True
            return wait(v)
        sub: Places = {}
        out = _walk(v, sub, depth + 1, seen)
        if sub:
            places[step] = sub
        return out
    if isinstance(v, Promise):
        if seen.forward is not None and (ref := seen.forward(v)) is not None:
            places[step] = FWD
            seen.fwd = True
            return ref
        got = v.__polybus_value__()
        if hasattr(v, "_rec"):  # (a call's promise: its value went through the client)
            passed_on(v)
        return got
    if not isinstance(v, np.generic):
        seen.unlooked = True
    return v


def _left(got: Any) -> list[Shared]:
    """The handles in ``got`` (a container, or a Nested) that are not named: each once,
    in the order met."""
    found: list[Shared] = []

    def hook(obj: Any) -> None:
        if type(obj) is Shared:
            found.append(obj)

    value = got.value if type(got) is Nested else got
    try:
        msgspec.msgpack.Encoder(enc_hook=hook).encode(value)
    except (TypeError, ValueError, OverflowError):
        found = _handles(value)
    named = Counter(map(id, got.handles())) if type(got) is Nested else Counter()
    left: dict[int, Shared] = {}
    for h in found:
        if named[id(h)]:
            named[id(h)] -= 1
        else:
            left.setdefault(id(h), h)
    return list(left.values())


def by_value_note(handles: list[Shared], container: str) -> None:
    """Broadcast handles that go by value inside a ``container`` argument (in a dict's
    key, a set, a list subclass or another object, or more than MAX_DEPTH containers
    deep: `inside`, `wire`): said once a handle, with what it costs."""
    for h in handles:
        if not h.noted:
            h.noted = True
            log.warning("polybus: warning: %r was passed inside a %s where it cannot be "
                        "named (a dict key, a set, a list subclass or another object, or "
                        "more than %d lists, tuples or dicts deep), so its value goes with "
                        "every such call (%d bytes), not a short reference: pass it as an "
                        "argument, or as a list, tuple or dict's item", h, container,
                        MAX_DEPTH, held_bytes(h.value))


def _handles(x: Any) -> list[Shared]:
    """Every handle in ``x``'s lists, tuples, dicts (keys too), sets and frozensets."""
    t = type(x)
    if t is Shared:
        return [x]
    if isinstance(x, list | tuple | set | frozenset):
        return [h for v in x for h in _handles(v)]
    if isinstance(x, dict):
        return [h for kv in x.items() for v in kv for h in _handles(v)]
    return []


class _Found(Exception):
    pass


def _look(obj: Any) -> None:
    t = type(obj)
    if hasattr(t, "__polybus_value__") or getattr(t, PROMISE_INSIDE, False):
        raise _Found  # (a BatchPromise is a Struct: msgspec meets its batch, marked)
    return None  # anything else: not looked into (an array holds no promise)


_probe = msgspec.msgpack.Encoder(enc_hook=_look)


def holds_promise(x: Any) -> bool:
    """A promise (or broadcast handle) somewhere in ``x``: msgspec walks it at C speed
    (a list of 10^5 numbers costs what encoding it does), calling back only for what it
    cannot encode itself."""
    try:
        _probe.encode(x)
    except _Found:
        return True
    except (TypeError, ValueError, OverflowError):
        return _holds(x)  # (keys or numbers msgpack cannot take: looked at in Python)
    except RecursionError:  # (nested past the encoder's depth: the codec then says so,
        return False        # naming the call and argument, codec.too_deep)
    return False


def _holds(x: Any) -> bool:
    t = type(x)
    if hasattr(t, "__polybus_value__") or getattr(t, PROMISE_INSIDE, False):
        return True
    if t is list or t is tuple or is_namedtuple(t):
        return any(_holds(v) for v in x)
    if t is dict:
        return any(_holds(k) or _holds(v) for k, v in x.items())
    return False


def _look_handle(obj: Any) -> None:
    if type(obj) is Shared:
        raise _Found
    return None  # (a promise is not looked into: its answer holds no handle of ours)


_handle_probe = msgspec.msgpack.Encoder(enc_hook=_look_handle)


def holds_handle(x: Any) -> bool:
    """A broadcast handle somewhere in ``x`` (a container known to hold a promise or
    handle: `holds_promise`), walked by msgspec as there."""
    try:
        _handle_probe.encode(x)
    except _Found:
        return True
    except (TypeError, ValueError, OverflowError):
        return bool(_handles(x))
    except RecursionError:  # (as in holds_promise: the codec refuses it)
        return False
    return False


def plain_args(args: tuple[Any, ...]) -> bool | None:
    """True if an aggregating binding's lean path (client/batching.py) takes ``args`` as
    they are; False if the general path must (a promise or broadcast handle, which need
    its care, also inside a list, tuple or dict, or bytes large enough to travel out of
    band), or a handle in another container (a set: `wire` says it goes by value);
    None if a list, tuple (a namedtuple too) or dict among them holds a promise
    (forwarded, or waited for first: see batching.py's docstring)."""
    promises = False
    for a in args:
        t = type(a)
        if t is bytes:
            if len(a) >= OOB_BYTES:
                return False
        elif t is list or t is tuple or t is dict:
            if holds_promise(a):
                if holds_handle(a):
                    return False
                promises = True
        elif t not in _PLAIN:
            if hasattr(t, "__polybus_value__") or general(a):
                return False
            if is_namedtuple(t) and holds_promise(a):  # (as a tuple: forwarding's, or
                promises = True  # waited for)
    return None if promises else True


def general(a: Any) -> bool:
    """``a``, an argument not of an exact list, tuple or dict, is a container holding a
    handle (a namedtuple names it, a set says it goes by value: `wire`), or a dataclass
    instance holding a promise (`wire` answers it), which the aggregated lean path
    leaves to the general one."""
    if dataclasses.is_dataclass(type(a)):
        return holds_promise(a)
    return isinstance(a, HOLDERS) and holds_handle(a)
