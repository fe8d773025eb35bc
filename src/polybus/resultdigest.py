"""A short digest of a program's result: `polybus sweep` keeps one per run (not the
result), so that it can say whether every strategy gave the same answer.

The digest is XXH3-64 (the hash `usercode.source_digest` uses; 16 hex digits) of a
canonical encoding of the value: each value tagged with its kind, so ``1``, ``1.0``,
``"1"`` and ``[1]`` differ; a float by its exact bits (``float.hex``); a value as the
wire carries it (configuration.md), so that a result made in the client (a module with
``replication = 0``) and one a replica sent agree: a tuple (a namedtuple too) as a list,
a dataclass as a dict of its fields, an enum member as its value, a complex as a list
of its two floats; an int of any size by its hex digits; a dict's entries
and a set's elements in the order of their encodings, so equal dicts built in another
order have one digest; an array by its dtype, shape and bytes, as `client/naming.py`
names a cached operand (an array of Python objects element by element). A value with
no encoding that is the same in every process (an object whose only form is its
address, a lock, a socket) has no digest, and `result_digest` says why: it never raises.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import fractions
import pathlib
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import xxhash

__all__ = ["result_digest"]

Write = Callable[[bytes | memoryview], object]

# Values whose repr is their value, the same in every process (their type named too)
_BY_REPR = (datetime.date, datetime.time, datetime.timedelta, datetime.timezone,
            decimal.Decimal, fractions.Fraction, uuid.UUID, pathlib.PurePath, range)


class _Unstable(Exception):
    """A value with no stable encoding (its text says which)."""


def result_digest(value: Any) -> tuple[str | None, str | None]:
    """(digest, None), or (None, why there is none)."""
    h = xxhash.xxh3_64()
    try:
        _encode(value, h.update)
    except _Unstable as exc:
        return None, str(exc)
    except RecursionError:
        return None, "the result is nested too deep to encode"
    except Exception as exc:  # (the program's own type misbehaving: no digest, no crash)
        return None, f"encoding the result raised {type(exc).__name__}: {exc}"
    return h.hexdigest(), None


def _sized(tag: bytes, data: bytes | memoryview, write: Write) -> None:
    write(tag + str(len(data)).encode() + b":")
    write(data)


def _alone(x: Any) -> bytes:
    """``x``'s encoding as bytes of its own (to sort a dict's keys, a set's elements)."""
    buf = bytearray()
    _encode(x, buf.extend)
    return bytes(buf)


def _encode(x: Any, write: Write) -> None:
    t = type(x)  # (first the commonest, exactly: a million-element list's are each met)
    if t is float:
        write(b"f" + x.hex().encode() + b";")
        return
    if t is int:
        write(b"i" + hex(x).encode() + b";")
        return
    if t is str:
        _sized(b"s", x.encode("utf-8", "surrogatepass"), write)
        return
    from polybus.client.promise import Promise

    if isinstance(x, Promise):  # (a promise is its value, as in `run --json`)
        x = x.__polybus_value__()
    # (as the wire carries it: an enum member's value, a dataclass's fields, a complex's
    # two floats; a tuple is a list below)
    if isinstance(x, enum.Enum):
        x = x.value
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        x = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
    elif isinstance(x, complex | np.complexfloating):
        x = [complex(x).real, complex(x).imag]
    t = type(x)
    if x is None:
        write(b"N")
    elif t is bool or isinstance(x, np.bool_):
        write(b"T" if x else b"F")
    elif isinstance(x, int | np.integer):  # (hex: str() refuses an int of 4300+ digits)
        write(b"i" + hex(int(x)).encode() + b";")
    elif isinstance(x, float | np.floating):
        write(b"f" + float(x).hex().encode() + b";")
    elif isinstance(x, str):
        _sized(b"s", x.encode("utf-8", "surrogatepass"), write)
    elif isinstance(x, bytes | bytearray | memoryview):
        view = memoryview(x)  # (its bytes read in place: a copy of a large one is not made)
        _sized(b"b", view.cast("B") if view.c_contiguous else view.tobytes(), write)
    elif isinstance(x, np.ndarray):
        _array(x, write)
    elif isinstance(x, list | tuple):
        write(b"l" + str(len(x)).encode() + b":")
        for v in x:
            _encode(v, write)
    elif isinstance(x, dict):
        write(b"d" + str(len(x)).encode() + b":")
        for key, v in sorted(((_alone(k), v) for k, v in x.items()), key=lambda e: e[0]):
            write(key)
            _encode(v, write)
    elif isinstance(x, set | frozenset):
        write(b"S" + str(len(x)).encode() + b":")
        for e in sorted(_alone(v) for v in x):
            write(e)
    elif isinstance(x, _BY_REPR):
        _sized(b"r", f"{t.__module__}.{t.__qualname__}={x!r}".encode(), write)
    else:
        raise _Unstable(f"the result holds a {t.__module__}.{t.__qualname__}, which has "
                        f"no stable encoding")


def _array(a: np.ndarray[Any, Any], write: Write) -> None:
    if a.dtype.hasobject:  # (Python objects: each by its own encoding)
        write(b"O" + str(a.shape).encode())
        _encode(a.tolist(), write)
        return
    # (a structured dtype by its fields: its str, "|V16", is the same for any of its size)
    kind = a.dtype.descr if a.dtype.names is not None else a.dtype.str
    write(b"a" + f"{kind}{a.shape}".encode() + b":")
    write(np.ascontiguousarray(a).reshape(-1).view(np.uint8).data)
