"""numpy arrays on the wire: checking a received array's layout, and the cached meta
of small arrays (ext 5, wire/codec.py) both ways.

Every array a peer sends is checked here before numpy sees it (`layout`): a dtype that
is not a short string or holds objects, a shape that is not a list of non-negative
ints, or a byte count that does not match is a ProtocolError, not a crash.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import msgspec

from polybus.errors import ProtocolError

if TYPE_CHECKING:  # (numpy is imported where an array needs it: lazynumpy.py)
    import numpy as np

__all__ = ["DTYPE_STR", "HEADS", "INLINE_DIMS", "INLINE_MAX", "META_DEC", "META_ENC", "SMALL", "array_over",
           "frozen", "kept_copy", "layout", "owner_of", "place_of", "program_froze", "small_head", "small_meta"]

# Arrays up to this size (and of at most INLINE_DIMS dimensions) travel inside the
# header (ext 5), not as buffers beside it: a frame with no buffers takes the in-place
# paths on both sides, where a buffer's own steps (its table, padding, a copy out, the
# general intake) cost more than copying a few KiB. Raised from 2 KiB to the size of a
# frame that is written in one piece anyway (framing.JOIN_MAX): matmul n=100 over shm,
# a 4 KB block of A per call, stateful with 2 replicas 1.45 -> 1.09 ms a product
# (design.md, "Arrays inside the header").
INLINE_MAX = 16 * 1024
ZERO_ITEMS_MAX = 2048  # elements of a zero-byte dtype a receiver takes (none to count)
INLINE_DIMS = 16

META_ENC = msgspec.msgpack.Encoder()
# dtype -> dtype.str (which builds its string anew each time: ~0.4 us an array); only
# dtypes without objects are kept, so a hit needs no hasobject check.
DTYPE_STR: dict[Any, str] = {}
META_DEC = msgspec.msgpack.Decoder()
# dtype.str -> dtype (np.dtype parses the string each time), for dtypes without objects.
_DTYPES: dict[str, np.dtype[Any]] = {}
_DTYPE_LEN = 64  # longer strings are refused: numpy parses them (slowly) into large dtypes


def layout(dtype: str, shape: list[int]) -> tuple[np.dtype[Any], tuple[int, ...], int]:
    """A received array's dtype, shape and byte count; ProtocolError for anything that is
    not one an encoder makes: a dtype that is not a short string or holds objects, a
    shape that is not a list of non-negative ints, elements of zero bytes by the many.
    (A dtype string numpy cannot read raises TypeError: `Codec.decode_header` reports
    that too.)"""
    dt = _DTYPES.get(dtype) if type(dtype) is str else None
    if dt is None:
        if type(dtype) is not str or len(dtype) > _DTYPE_LEN:  # (dtype.str is short)
            raise ProtocolError(f"array dtype {str(dtype)[:40]!r} is not a dtype string")
        import numpy as np

        dt = np.dtype(dtype)
        if dt.hasobject:
            raise ProtocolError("object arrays are not sent as raw buffers")
        if len(_DTYPES) < 256:
            _DTYPES[dtype] = dt
    if type(shape) is not list:
        raise ProtocolError("array shape is not a list")
    count = 1
    for s in shape:
        if type(s) is not int or s < 0:
            raise ProtocolError(f"array dimension {s!r} is not a non-negative int")
        count *= s
    if not dt.itemsize and count > ZERO_ITEMS_MAX:  # (no bytes to check the count against)
        raise ProtocolError(f"{count} elements of zero bytes")
    return dt, tuple(shape), count * dt.itemsize


_ndarray: list[type[Any]] = []  # numpy.ndarray, once `frozen` has been given an array


def frozen(a: np.ndarray[Any, Any]) -> bool:
    """Whether ``a``'s bytes cannot change: it and every array it views are read-only,
    down to memory no array owns that is immutable (bytes) or none at all. (Asked at
    every call naming a cached operand: numpy's type is looked up once, not imported
    at each call.)"""
    if not _ndarray:
        import numpy as np

        _ndarray.append(np.ndarray)
    nd = _ndarray[0]
    x: Any = a
    while isinstance(x, nd):
        if x.flags.writeable:
            return False
        x = x.base
    return x is None or isinstance(x, bytes)


def owner_of(arr: np.ndarray[Any, Any]) -> Any:
    """The last array of ``arr``'s bases (``arr`` itself if it views none)."""
    import numpy as np

    owner: Any = arr
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    return owner


def place_of(view: np.ndarray[Any, Any]) -> tuple[Any, tuple[Any, ...]]:
    """The owner of ``view`` and the place of ``view`` in it (its first byte's address:
    an owner's memory stays where it is while it lives, and the view keeps it alive)."""
    owner = owner_of(view)
    start = view.__array_interface__["data"][0]
    return owner, (id(owner), start, view.shape, view.strides, view.dtype)


# Copies polybus made of a program's writable arrays (a held call's arguments, client/
# snapshot.py), read-only so that a second look knows they cannot change: `frozen`, but
# not by the program, so they travel as the writable arrays they were (transport/shmseg.py).
_kept: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def kept_copy(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``a`` (a fresh copy of the program's array), made read-only and noted as polybus's."""
    a.flags.writeable = False
    _kept[id(a)] = a
    return a


def program_froze(a: np.ndarray[Any, Any]) -> bool:
    """Whether ``a`` cannot change because the program made it so (`frozen`, and not a
    copy polybus keeps, `kept_copy`)."""
    return frozen(a) and _kept.get(id(a)) is not a


def array_over(dtype: str, shape: list[int], buf: bytearray | memoryview) -> np.ndarray[Any, Any]:
    """The array of ``dtype`` and ``shape`` over ``buf`` (a buffer beside the header)."""
    dt, dims, nbytes = layout(dtype, shape)
    if nbytes != (buf.nbytes if type(buf) is memoryview else len(buf)):
        raise ProtocolError("array shape does not match its buffer")
    import numpy as np

    return np.ndarray(dims, dt, buf)


# The meta of small arrays (ext 5), both ways: (dtype, shape) -> the bytes before the
# array's (a length and msgpack [dtype.str, shape]), and those bytes -> (dtype, shape,
# nbytes). Each is emptied when full (shapes are few in a program, but need not be).
HEADS: dict[tuple[Any, tuple[int, ...]], bytes] = {}
SMALL: dict[bytes, tuple[np.dtype[Any], tuple[int, ...], int]] = {}
_CACHED = 1024


def small_head(obj: np.ndarray[Any, Any], dstr: str) -> bytes:
    """The bytes before ``obj``'s in its ext 5 (``dstr``: its dtype's str), kept for the
    next array like it."""
    meta = META_ENC.encode((dstr, obj.shape))
    head = bytes((len(meta),)) + meta  # (under 256: a dtype's str is short, the shape too)
    if len(HEADS) >= _CACHED:
        HEADS.clear()
    HEADS[(obj.dtype, obj.shape)] = head
    return head


def small_meta(meta: bytes) -> tuple[np.dtype[Any], tuple[int, ...], int]:
    """A received ext 5's dtype, shape and byte count from its meta (``meta``: the
    length byte and the msgpack), kept for the next array like it."""
    dtype, shape = META_DEC.decode(meta[1:])
    got = layout(dtype, shape)
    if len(SMALL) >= _CACHED:
        SMALL.clear()
    SMALL[meta] = got
    return got
