"""What a value becomes on its way into a message: large bytes marked to travel out of
band, promises answered, and `Ref`, a value named rather than sent (codec.py encodes
them; they live here to keep the codec to its two directions)."""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from polybus.wire.messages import Batch, Deliver, Fetched, Put, Result

OOB_BYTES = 64 * 1024  # top-level bytes at least this long travel out of band
# Containers deep a Ref inside an argument is looked for, at most (``Call.inside``):
# client/nested.py says why; deeper, the client sends the value itself.
INSIDE_DEPTH = 32


class OutOfBand:
    """Marks a bytes-like value to be sent as a raw buffer."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = data


_VALUED = {Deliver, Fetched, Put}  # (and Result) messages whose ``value`` is a program's


def _lifted(msg: Any) -> Any:
    """``msg`` with a large bytes ``value`` marked out of band, so the bytes go to the
    socket as they are instead of being copied into the header (and again into the
    frame); a Batch's items likewise. Other messages are returned as they are."""
    t = type(msg)
    if t is Result:
        v = msg.value
        if type(v) is bytes and len(v) >= OOB_BYTES:
            return Result(msg.id, OutOfBand(v))
    elif t in _VALUED:
        v = msg.value
        if type(v) is bytes and len(v) >= OOB_BYTES:
            return msgspec.structs.replace(msg, value=OutOfBand(v))
    elif t is Batch:
        for m in msg.items:
            if type(m) is Result and type(m.value) is bytes and len(m.value) >= OOB_BYTES:
                return Batch([_lifted(m) for m in msg.items])
    return msg


# What a promise that msgspec encodes itself (a Struct: client/batchcalls.BatchPromise)
# holds first: the enc_hook meeting it means a promise is inside the message, which is
# then encoded again with its promises answered (msgspec calls no hook for a Struct).
PROMISE_INSIDE = "__polybus_promise_inside__"


class _PromiseInside(Exception):
    pass


def _answered(x: Any) -> Any:
    """``x`` with every promise in it (lists, tuples, dicts, Structs) answered."""
    t = type(x)
    force = getattr(t, "__polybus_value__", None)
    if force is not None:
        return force(x)
    if t is list:
        return [_answered(v) for v in x]
    if t is tuple:
        return tuple(_answered(v) for v in x)
    if t is dict:
        return {_answered(k): _answered(v) for k, v in x.items()}
    if isinstance(x, msgspec.Struct):
        return msgspec.structs.replace(x, **{f: _answered(getattr(x, f))
                                             for f in x.__struct_fields__})
    return x



def as_is(value: Any) -> Any:
    """What a value pickled in another's place unpickles by (a broadcast handle pickles
    as its value: client/shared.py)."""
    return value


def size_of(value: Any) -> int:
    """The bytes an operand cache counts for ``value`` (worker/cache.py), and so the
    client too when it follows what its Puts evict there (client/held.py)."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, bytes | bytearray | str):
        return len(value)
    return sys.getsizeof(value)

class Ref:
    """A named value held elsewhere (a cached operand, a forwarded result)."""

    __slots__ = ("ext", "key", "kind")

    def __init__(self, kind: str, key: Any) -> None:
        self.kind = kind
        self.key = key
        self.ext: msgspec.msgpack.Ext | None = None  # its encoding, made once (_enc_hook)

    def __repr__(self) -> str:
        return f"Ref({self.kind!r}, {self.key!r})"
