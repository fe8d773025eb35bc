"""Values that arrive as themselves where pickle is on: dataclasses, datetimes, dates,
times, timedeltas, Decimals, UUIDs and enum members.

msgspec, which encodes every message, has a form of its own for each of these
(docs/configuration.md, "Values the safe codec converts"): it never hands them to the
codec's hook, so they arrived converted (a dataclass as a dict of its fields, a
datetime as a str) even where pickle is on, as nothing else a program sends did. A
codec with pickle on (codec.py) first looks through a message's values (`message`): each
such value in a list, tuple, dict, set or frozenset (or the value itself) is put in a
`Pickled`, which the codec's hook asks for what travels in its place, as it asks a
promise: the value pickled (`pickled`). So it arrives as itself, as every other value
pickle carries does. The look copies only the containers on the way to such a value; a
value with none is sent as it is. A codec with pickle off never looks: it converts them
as documented.

A dataclass of a class the other side cannot import (one of the program's own modules,
or one defined inside a function) is refused at the sender, saying so
(unencodable.not_importable), as an object of such a class is with pickle off: pickled,
it would only fail to unpickle there. A promise or a broadcast handle inside a
dataclass pickles as its value (client/promise.py, client/shared.py).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import pickle
import uuid
from collections.abc import Callable
from itertools import chain
from typing import Any

import msgspec

from polybus.lazynumpy import ndarray_type
from polybus.wire.exts import EXT_PICKLE
from polybus.wire.messages import (
    Batch,
    BatchResult,
    Call,
    CallBatch,
    Deliver,
    Fetched,
    Message,
    Put,
    Result,
)
from polybus.wire.undecodable import value_raised
from polybus.wire.unencodable import class_of_the_program, instead, not_importable
from polybus.wire.values import OutOfBand, Ref

__all__ = ["Marking", "Pickled", "marked", "message", "pickled"]


class Pickled:
    """A value the codec pickles (a dataclass, a datetime, ...: the module's docstring)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __polybus_value__(self) -> msgspec.msgpack.Ext:
        return pickled(self.value)


# Types a value of is sent as it is, looked at no further (by type: a subclass is looked
# at); numpy's arrays among them where numpy is imported already (a worker imports it
# only for an array: polybus/lazynumpy.py; an array is then a leaf of `_kind`'s, sent as
# it is all the same)
_AS_IS = frozenset({int, float, str, bytes, bool, type(None), complex, Ref, OutOfBand,
                    msgspec.msgpack.Ext, Pickled, *filter(None, [ndarray_type()])})
_CONVERTED = (datetime.date, datetime.time, datetime.timedelta, decimal.Decimal, uuid.UUID,
              enum.Enum)  # (a datetime is a date)

# What `marked` does with a value of a type: leave it, look into it, or pickle it
_LEAF, _SEQ, _MAP, _SET, _PICKLE = range(5)
_KINDS: dict[type, int] = {}
_KINDS_MAX = 1024  # (types made without end, a class a call: classified each time)


def _kind(t: type) -> int:
    if hasattr(t, "__polybus_value__"):  # (a promise, a handle: the codec's hook marks
        kind = _LEAF                     # the value it answers with)
    elif issubclass(t, list | tuple):
        kind = _SEQ
    elif issubclass(t, dict):
        kind = _MAP
    elif issubclass(t, set | frozenset):
        kind = _SET
    elif hasattr(t, "__dataclass_fields__") or issubclass(t, _CONVERTED):
        kind = _PICKLE
    else:  # (an object: the codec's hook pickles it anyway; a msgspec type as it is)
        kind = _LEAF
    if len(_KINDS) < _KINDS_MAX:
        _KINDS[t] = kind
    return kind


def marked(x: Any) -> Any:
    """``x`` with each dataclass, datetime, ... in it put in a `Pickled`: new lists,
    tuples and dicts on the way to one (a set or frozenset made a list or a tuple, as it
    arrives anyway), ``x`` itself when it holds none. One frame a level, as msgspec
    takes one (a value it can encode is looked through here too)."""
    t = type(x)
    if t in _AS_IS:
        return x
    kind = _KINDS.get(t)
    if kind is None:
        kind = _kind(t)
    if kind == _LEAF:
        return x
    if kind == _PICKLE:
        return Pickled(x)
    out: Any = None
    if kind == _MAP:
        if len(x) > 16 and _AS_IS.issuperset(map(type, x.values())) and \
                _AS_IS.issuperset(map(type, x)):
            return x  # (a table of numbers and strings: looked at in C; a small one below)
        for i, (k, v) in enumerate(x.items()):
            mk = k if type(k) in _AS_IS else marked(k)
            mv = v if type(v) in _AS_IS else marked(v)
            if out is None:
                if mk is k and mv is v:
                    continue
                out = dict(item for _, item in zip(range(i), x.items(), strict=False))
            out[mk] = mv
        return x if out is None else out
    xs = list(x) if kind == _SET else x
    types = set(map(type, xs))  # (numbers, strings: looked at in C, as are the items
    if types <= _AS_IS or (  # of a list of records or of rows, the common tables)
            len(types) == 1 and _flat(types.pop(), xs)):
        return x
    for i, v in enumerate(xs):
        if type(v) in _AS_IS:
            continue
        m = marked(v)
        if m is not v:
            if out is None:
                out = list(xs)
            out[i] = m
    if out is None:
        return x
    # (a tuple stays one, and a frozenset becomes one: either may be a dict's key)
    return tuple(out) if isinstance(x, tuple | frozenset) else out


def _flat(t: type, xs: Any) -> bool:
    """Whether ``xs``, all of type ``t``, are dicts (or lists, or tuples) of values
    sent as they are, keys too: looked at in C, a call a level, not one an item."""
    if t is dict:
        return _AS_IS.issuperset(map(type, chain.from_iterable(map(dict.values, xs)))) \
            and _AS_IS.issuperset(map(type, chain.from_iterable(xs)))
    if t is list or t is tuple:
        return _AS_IS.issuperset(map(type, chain.from_iterable(xs)))
    return False


def message(msg: Message) -> Message:
    """``msg`` with its values `marked` (a new message if any changed)."""
    t = type(msg)
    if t is Call:
        args = marked(msg.args)  # type: ignore[union-attr]
        kwargs = msg.kwargs  # type: ignore[union-attr]
        named = marked(kwargs) if kwargs else kwargs
        if args is not msg.args or named is not kwargs:  # type: ignore[union-attr]
            return msgspec.structs.replace(msg, args=args, kwargs=named)
    elif t is Result or t is Put or t is Deliver or t is Fetched:
        v = msg.value  # type: ignore[union-attr]
        if type(v) not in _AS_IS and (m := marked(v)) is not v:
            return msgspec.structs.replace(msg, value=m)
    elif t is Batch:
        items = [message(m) for m in msg.items]  # type: ignore[union-attr]
        if any(a is not b for a, b in zip(items, msg.items, strict=True)):  # type: ignore[union-attr]
            return Batch(items)  # type: ignore[arg-type]
    elif t is CallBatch:
        rows = [marked(a) for a in msg.args]  # type: ignore[union-attr]
        if any(a is not b for a, b in zip(rows, msg.args, strict=True)):  # type: ignore[union-attr]
            return msgspec.structs.replace(msg, args=rows)
    elif t is BatchResult:
        values = marked(msg.values)  # type: ignore[union-attr]
        if values is not msg.values:  # type: ignore[union-attr]
            return msgspec.structs.replace(msg, values=values)
    return msg


class Marking:
    """A pickle-on codec's encoder: its messages `marked` first, then encoded."""

    __slots__ = ("_encode",)

    def __init__(self, encode: Callable[[Any], bytes]) -> None:
        self._encode = encode

    def encode(self, msg: Any) -> bytes:
        return self._encode(message(msg))


# type -> `class_of_the_program` of a value of it (looked at once a type)
_OWN: dict[type, str] = {}


def pickled(value: Any) -> msgspec.msgpack.Ext:
    """``value`` (what `marked` put in a `Pickled`) pickled; a TypeError, as for any
    value the codec cannot carry, if it cannot be, or would not unpickle there."""
    t = type(value)
    own = _OWN.get(t)
    if own is None:  # (an enum member pickles by its class whatever its reduce says)
        own = class_of_the_program(value, reduces=dataclasses.is_dataclass(t))
        if len(_OWN) < _KINDS_MAX:
            _OWN[t] = own
    if own:
        raise TypeError(f"a value of type {type(value).__name__}, {own}, cannot be sent: "
                        f"with pickle = true it is pickled, to arrive as itself, and "
                        f"{not_importable(value, pickled=True)}")
    try:
        return msgspec.msgpack.Ext(EXT_PICKLE, pickle.dumps(value, protocol=5))
    except BaseException as exc:  # (a field pickle cannot take: a lock, a lambda, ...)
        if not value_raised(exc):
            raise
        raise TypeError(f"a value of type {type(value).__qualname__} cannot be pickled: "
                        f"{exc}; {instead(value, pickled=True)}") from None
