"""Operand values a cached call carries: the handle `broadcast` returns (`Shared`), the
read-only copies held calls share (`copy_of`), and what ``cache = "auto"`` counts as
large (client/operands.py makes the messages)."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from polybus.client.naming import adopt
from polybus.wire.arrays import kept_copy
from polybus.wire.codec import OutOfBand
from polybus.wire.values import as_is

__all__ = ["AUTO_THRESHOLD", "Shared", "copy_of", "large"]

AUTO_THRESHOLD = 64 * 1024  # cache = "auto": arguments at least this large

# content key -> the read-only copy held calls share of an array that could change (held)
_copies: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def large(value: Any) -> bool:
    n = getattr(value, "nbytes", None)
    if isinstance(n, int):
        return n >= AUTO_THRESHOLD and isinstance(value, np.ndarray)
    if type(value) is OutOfBand:  # (large bytes, as the call carries them: wireargs.py)
        value = value.data
    return isinstance(value, bytes | bytearray) and len(value) >= AUTO_THRESHOLD


def copy_of(value: np.ndarray[Any, Any], key: str | None) -> np.ndarray[Any, Any]:
    """A read-only copy of ``value``, an array that could change, whose content is named
    ``key``: one per content, shared by whoever keeps it (held calls, broadcast handles),
    counted as a live array of ``key`` (so the replicas keep that content while it
    lives) and named without a second pass over its bytes."""
    copy = _copies.get(key) if key is not None else None
    if copy is None:
        copy = kept_copy(value.copy())
        if key is not None:
            _copies[key] = copy
            adopt(copy, key)
    return copy


class Shared:
    """A value `broadcast` to every replica: pass it as an argument, or inside a list,
    tuple or dict argument (client/nested.py); it travels as a Ref.

    Where no cache is in the path it is sent by value, so it is always safe to pass.
    ``value`` is the content as it was broadcast (client/broadcast.py), which a replica that
    lost it is sent again, and which keeps its name live (not dropped at the replicas)
    while the handle lives.
    """

    __slots__ = ("key", "noted", "value")

    def __init__(self, key: str, value: Any) -> None:
        self.key = key
        self.value = value
        self.noted = False  # said to go by value where it cannot be named (wireargs.py)

    def __polybus_value__(self) -> Any:
        return self.value

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its value, as a promise is: inside a value pickle carries (a
        # dataclass with pickle on, wire/pickling.py) it goes by value.
        return as_is, (self.value,)

    def __repr__(self) -> str:
        return f"<broadcast {self.key[:12]}>"

    # Used in the client as if it were its value (Ray's ``ray.get(ref)`` ported as
    # ``polybus.wait(h)``, which is ``h``): numpy made a 0-d array of the handle, silently,
    # and an attribute said only that a 'Shared' had none. Both say what to use instead.

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError(f"{self!r}: {_NOT_VALUE}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # (a protocol's or polybus's probe: no value's attribute)
            raise AttributeError(name)
        raise AttributeError(f"{self!r}: {_NOT_VALUE} (no attribute {name!r})")


_NOT_VALUE = ("a broadcast handle is not its value in the client: pass it to calls (as an "
              "argument, or in a list, tuple or dict argument), and where the client needs "
              "the value itself, use the value you broadcast (polybus.wait(h) is h)")
