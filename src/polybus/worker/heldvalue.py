"""What a value a replica holds (its operand cache, a forwarded value kept) takes:
its bytes, walked (`held_bytes`), and its arrays made read-only (`freeze`,
`freeze_inside`), as every call given it gets that one object."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from polybus.lazynumpy import is_array, ndarray_type
from polybus.wire.values import size_of
from polybus.worker import readonly

__all__ = ["CACHE_ENTRY_BYTES", "freeze", "freeze_inside", "held_bytes"]

# An operand cache's count for each entry beside its value's own bytes: the entry's key,
# its places in the LRU and the users' sets, the value's object (measured with
# tracemalloc: 460-600 B beyond a 16-byte value and its 90-byte key). Without it, fresh
# 16-byte operands never dropped took about 36 times `cache_bytes` before any left. The
# client's belief of a replica's cache (client/held.py, batchcalls.py) counts the same.
CACHE_ENTRY_BYTES = 600

_SCALARS = frozenset({int, float, bool, type(None)})  # (held_bytes: no walk into these)


def _fields(v: Any) -> list[Any] | None:
    """The values of dataclass instance ``v``'s fields; None if ``v`` is not one."""
    if not hasattr(type(v), "__dataclass_fields__"):
        return None
    return [getattr(v, f.name, None) for f in dataclasses.fields(v)]


def held_bytes(value: Any) -> int:
    """The memory a received value holds, about (its arrays' and buffers' bytes, and
    its containers'): walked, as a list of lists of bytes is not the size of its outer
    list. A container of numbers alone is counted without a Python step per item."""
    nd = ndarray_type()  # (None while numpy is not imported: then no value is an array)
    if type(value) is nd:  # (the common operand: no walk)
        return value.nbytes  # type: ignore[no-any-return]
    total = 0
    stack = [value]
    seen: set[int] = set()  # (containers walked)
    while stack:
        v = stack.pop()
        t = type(v)
        if t is nd:
            total += v.nbytes
        elif t is bytes or t is bytearray or t is str:
            total += len(v)
        elif id(v) in seen:  # (a container seen: pickle keeps cycles, in a dataclass)
            continue
        elif t is list or t is tuple:
            seen.add(id(v))
            total += sys.getsizeof(v)
            if _SCALARS.issuperset(map(type, v)):
                total += 32 * len(v)
            else:
                stack.extend(v)
        elif t is dict:
            seen.add(id(v))
            total += sys.getsizeof(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        elif (fields := _fields(v)) is not None:  # (a dataclass, pickle on: as itself)
            seen.add(id(v))
            total += sys.getsizeof(v)
            stack.extend(fields)
        else:
            total += size_of(v)
    return total


def freeze(value: Any) -> None:
    """Make an array a store holds read-only (its note says why a write into it fails)."""
    if is_array(value):
        value.flags.writeable = False
        readonly.held(value)


_LEAVES = _SCALARS | {str, bytes}


def freeze_inside(value: Any) -> None:
    """`freeze` each array in ``value``'s lists, tuples and dicts too, and in a
    dataclass's fields (one arrives as itself with pickle on: wire/pickling.py): a
    broadcast dict's, as every call passed its handle gets that one object, as it gets
    one array."""
    stack = [value]
    seen: set[int] = set()  # (containers walked)
    nd = ndarray_type()  # (None while numpy is not imported: then no value is an array)
    while stack:
        v = stack.pop()
        t = type(v)
        if t is nd:
            freeze(v)
        elif id(v) in seen:  # (a container seen: pickle keeps cycles, in a dataclass)
            continue
        elif t is list or t is tuple:
            seen.add(id(v))
            if not _LEAVES.issuperset(map(type, v)):
                stack.extend(v)
        elif t is dict:
            seen.add(id(v))
            stack.extend(v.values())
        elif (fields := _fields(v)) is not None:
            seen.add(id(v))
            stack.extend(fields)
