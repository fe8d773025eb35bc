"""Values <-> msgpack header + raw buffers.

msgpack types travel in the header. numpy arrays (anywhere in a value) and large
top-level bytes (a call's argument, a message's ``value``) travel as raw buffers beside
it, referred to by extension types; small arrays travel inside the header, their bytes
in the extension's data (a frame of no buffers is the cheapest to write and read):

    ext 1  ndarray   data = msgpack [dtype.str, shape, buffer index]
    ext 2  bytes     data = msgpack buffer index
    ext 3  pickle    data = pickle protocol 5 (only where both sides enable pickle)
    ext 4  ref       data = msgpack [kind, key]  (a cached operand or a forwarded value)
    ext 5  small     data = u8 n, n bytes of msgpack [dtype.str, shape], the array's bytes
                     (an array of at most INLINE_MAX bytes, carried in the header)

Nothing is pickled unless the codec was made with ``allow_pickle=True`` (a numpy masked
array only travels so, its mask with it; dataclasses, datetimes, Decimals, UUIDs and
enum members, which msgspec would convert, are then pickled too: wire/pickling.py); a
value the safe codec cannot carry is a clear TypeError at the sender (a str with a lone
surrogate too: wire/unencodable.py).

This module encodes; decoding is wire/decoding.py's (`Codec` inherits it), and the ext
codes above are wire/exts.py's.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from polybus.lazynumpy import is_array
from polybus.wire.arrays import DTYPE_STR, HEADS, INLINE_DIMS, INLINE_MAX, META_ENC, small_head
from polybus.wire.decoding import Decoding
from polybus.wire.exts import EXT_BYTES, EXT_NDARRAY, EXT_PICKLE, EXT_REF, EXT_SMALL
from polybus.wire.framing import _BIG, DEFAULT_MAX_FRAME, PREFIX, encode_frame, too_large
from polybus.wire.messages import Call, Message, Result
from polybus.wire.pickling import Marking, marked
from polybus.wire.undecodable import value_raised
from polybus.wire.unencodable import (
    class_of_the_program,
    instead,
    not_importable,
    of_the_program,
    too_deep,
    unencodable,
    unpicklable,
)
from polybus.wire.values import (
    OOB_BYTES,
    PROMISE_INSIDE,
    OutOfBand,
    Ref,
    _answered,
    _lifted,
    _PromiseInside,
)

if TYPE_CHECKING:  # (numpy is imported where an array needs it: polybus/lazynumpy.py)
    import numpy as np

_np: Any = None  # numpy, once it is imported in this process (`_numpy_if_imported`)


def _numpy_if_imported() -> Any:
    """numpy if it is imported in this process (kept in ``_np``), else None: while it is
    not, no value is an array (the encoder's hook looks once per value it is given)."""
    global _np
    np = sys.modules.get("numpy")
    if np is not None and hasattr(np, "ndarray"):  # (not one still being imported)
        _np = np
        return np
    return None

__all__ = ["EXT_BYTES", "EXT_NDARRAY", "EXT_PICKLE", "EXT_REF", "EXT_SMALL", "OOB_BYTES",
           "PROMISE_INSIDE", "Codec", "OutOfBand", "Ref", "too_deep"]


class Codec(Decoding):
    """Encodes and decodes messages for one connection (not thread-safe: one per side).
    Encoding is below; decoding is its base's (`Decoding`, wire/decoding.py)."""

    def __init__(self, *, allow_pickle: bool = False, max_frame: int = DEFAULT_MAX_FRAME,
                 ref_hook: Callable[[Ref], Any] | None = None) -> None:
        self.allow_pickle = allow_pickle
        self.max_frame = max_frame
        self._out: list[memoryview | np.ndarray[Any, Any]] = []
        self._gather = 0  # see encode_parts
        self._in = []
        self._ref_hook = ref_hook
        self._enc: msgspec.msgpack.Encoder | Marking = msgspec.msgpack.Encoder(
            enc_hook=self._enc_hook)
        if allow_pickle:  # (dataclasses, datetimes, ... pickled too: wire/pickling.py)
            self._enc = Marking(self._enc.encode)
        self._dec = msgspec.msgpack.Decoder(Message, ext_hook=self._ext_hook)
        self._any_dec = msgspec.msgpack.Decoder(ext_hook=self._ext_hook)
        self._lenient = False  # (see _failed)
        self._fresh = False  # (see _deep)
        self._refs = []
        self._scan_dec = msgspec.msgpack.Decoder(ext_hook=self._scan_hook)

    # -- encoding ---------------------------------------------------------------
    def encode(self, msg: Message) -> list[bytes | memoryview]:
        """The pieces of one frame, ready for sendmsg; large buffers are not copied."""
        out: list[Any] = []  # (memoryviews only: nothing is left to gather here)
        self._out = out
        t = type(msg)
        try:
            # A call, or an answer that is not large bytes, as it is (the hot path).
            if t is Call or (t is Result and (type(v := msg.value) is not bytes  # type: ignore[union-attr]
                                              or len(v) < OOB_BYTES)):
                try:
                    header = self._enc.encode(msg)
                except _PromiseInside:  # (rare) a Struct promise inside: _header answers it
                    del out[:]
                    header = self._header(msg)
            else:
                header = self._header(msg)
        except (RecursionError, UnicodeEncodeError) as exc:  # (nested thousands deep;
            raise unencodable(exc) from None  # a str UTF-8 cannot carry: unencodable.py)
        finally:
            self._out = []
        if not out:  # the common small message: one piece, prefix and header
            length = 8 + len(header)
            if length > self.max_frame:
                raise too_large(length, self.max_frame)
            if length < _BIG:
                return [PREFIX.pack(length, 0, 0, len(header)) + header]
            return [PREFIX.pack(length, 0, 0, len(header)), header]  # not copied to join
        return encode_frame(header, list(out), self.max_frame)

    def encode_parts(self, msg: Message, gather: int = 0
                     ) -> tuple[bytes, list[bytes | memoryview | np.ndarray[Any, Any]]]:
        """The msgpack header and the raw buffers it refers to, not yet framed (a
        transport may carry the buffers its own way, as transport/shm.py does).

        With ``gather``, a non-contiguous or read-only array of at least that many bytes
        is left as it is (the buffer is the array itself): a transport that copies the
        bytes anyway gathers them as it copies, one pass over them instead of two, and
        one that shares memory can tell an array that cannot change (transport/shmseg.py)."""
        self._out = []
        self._gather = gather
        try:
            header = self._header(msg)
            bufs: list[bytes | memoryview | np.ndarray[Any, Any]] = list(self._out)
        except (RecursionError, UnicodeEncodeError) as exc:
            raise unencodable(exc) from None
        finally:
            self._out = []
            self._gather = 0
        return header, bufs

    def _header(self, msg: Message) -> bytes:
        """Encode ``msg``, its raw buffers going to ``self._out``; large bytes in a value
        go out of band (to the socket as they are, not copied into the header)."""
        t = type(msg)
        if t is Result:  # the common answer, checked inline (this is the hot path)
            v = msg.value  # type: ignore[union-attr]  # (t is Result: not narrowed)
            if type(v) is bytes and len(v) >= OOB_BYTES:
                msg = Result(msg.id, OutOfBand(v))  # type: ignore[union-attr]
        try:
            header = self._enc.encode(msg)
        except _PromiseInside:  # rare: the common promise is answered before it gets here
            del self._out[:]
            msg = _answered(msg)
            header = self._enc.encode(msg)
        if t is not Result and t is not Call and len(header) >= OOB_BYTES:
            # Rare: large bytes in another message's value or a Batch's Results;
            # looked for only now, so a batch of small answers pays nothing.
            # (A call's large bytes were marked out of band by the client.)
            lifted = _lifted(msg)
            if lifted is not msg:
                del self._out[:]
                header = self._enc.encode(lifted)
        return header

    def _enc_hook(self, obj: Any) -> Any:
        t = type(obj)
        if t is Ref:  # (a batch names one operand in each of its calls: encoded once)
            ext = obj.ext
            if ext is None:
                ext = obj.ext = msgspec.msgpack.Ext(EXT_REF, META_ENC.encode((obj.kind, obj.key)))
            return ext
        np = _np or _numpy_if_imported()
        if (np is None or t is not np.ndarray) and (
                force := getattr(t, "__polybus_value__", None)) is not None:
            # A promise inside a value: its answer is what travels. Looked for first: a
            # promise passes isinstance as its answer's class (client/promise.py).
            return marked(force(obj)) if self.allow_pickle else force(obj)
        if np is not None:  # (no value is an array while numpy is not imported)
            if isinstance(obj, np.ndarray):
                if t is not np.ndarray:  # (subclasses only)
                    if isinstance(obj, np.ma.MaskedArray):
                        return self._masked(obj)
                    if isinstance(obj, np.matrix):
                        return self._matrix(obj)
                small = obj.nbytes <= INLINE_MAX
                if small and (head := HEADS.get((obj.dtype, obj.shape))) is not None:
                    return msgspec.msgpack.Ext(EXT_SMALL, head + obj.tobytes())  # (the common one)
                dt = obj.dtype
                dstr = DTYPE_STR.get(dt)
                if dstr is None:
                    if dt.hasobject or dt.names is not None:  # (dtype.str drops field names)
                        return self._pickled(obj)
                    dstr = dt.str
                    if len(DTYPE_STR) < 256:  # (made-up structured dtypes could be endless)
                        DTYPE_STR[dt] = dstr
                if small and obj.ndim <= INLINE_DIMS:
                    # Small: its bytes in the header, after its meta (a frame of no buffers
                    # takes every in-place path on both sides; the buffer's own steps, a
                    # table, padding and a copy out, cost more than the bytes).
                    return msgspec.msgpack.Ext(EXT_SMALL, small_head(obj, dstr) + obj.tobytes())
                idx = len(self._out)
                if self._gather and obj.nbytes >= self._gather and (
                        not obj.flags.c_contiguous or not obj.flags.writeable):
                    # The caller gathers it, or sees that it is read-only (encode_parts)
                    self._out.append(obj)
                    return msgspec.msgpack.Ext(EXT_NDARRAY, META_ENC.encode((dstr, obj.shape, idx)))
                arr = np.ascontiguousarray(obj)
                # (a uint8 view, not memoryview.cast: the buffer protocol has no datetime64)
                self._out.append(memoryview(arr.reshape(-1).view(np.uint8)) if arr.nbytes
                                 else memoryview(b""))
                # obj.shape, not arr.shape: ascontiguousarray makes a 0-d array 1-d.
                return msgspec.msgpack.Ext(EXT_NDARRAY, META_ENC.encode((dstr, obj.shape, idx)))
            if isinstance(obj, np.generic):
                return obj.item()
        if isinstance(obj, OutOfBand):
            idx = len(self._out)
            self._out.append(memoryview(obj.data).cast("B"))
            return msgspec.msgpack.Ext(EXT_BYTES, META_ENC.encode(idx))
        if isinstance(obj, memoryview):
            return obj.tobytes()
        if getattr(t, PROMISE_INSIDE, False):
            raise _PromiseInside
        if isinstance(obj, complex):
            return self._pickled(obj) if self.allow_pickle else [obj.real, obj.imag]
        return self._pickled(obj)

    def _masked(self, obj: np.ma.MaskedArray[Any, Any]) -> msgspec.msgpack.Ext:
        """A masked array: pickled where pickle is on (its mask travels too); else
        refused (it went as a plain array, fill values in place of the masked data)."""
        if self.allow_pickle:
            return self._pickled(obj)
        raise TypeError("a numpy masked array cannot be sent by the safe codec: it would "
                        "arrive as a plain array, its mask lost; send its .data and .mask "
                        "as two arrays, or .filled(value), or set pickle = true on the "
                        "serving module in the configuration")

    def _matrix(self, obj: np.matrix[Any, Any]) -> msgspec.msgpack.Ext:
        """A numpy matrix: pickled where pickle is on; else refused (it went as a plain
        ndarray, whose * multiplies element by element where a matrix's is a product)."""
        if self.allow_pickle:
            return self._pickled(obj)
        raise TypeError("a numpy matrix cannot be sent by the safe codec: it would arrive "
                        "as a plain ndarray, where * multiplies element by element (a "
                        "matrix's * is a matrix product); send np.asarray(m) and use @, or "
                        "set pickle = true on the serving module in the configuration")

    def _pickled(self, obj: Any) -> msgspec.msgpack.Ext:
        if not self.allow_pickle:
            names = obj.dtype.names if is_array(obj) else None
            why = (f"a structured numpy array (fields {', '.join(names)}) cannot be sent by "
                   "the safe codec: it carries a dtype as a type string, which has no field "
                   "names; send its fields as arrays of their own" if names else
                   "a numpy array of dtype object (Python objects, not numbers) cannot be "
                   "sent by the safe codec; convert it to a numeric dtype or a list"
                   if is_array(obj) else "" if unpicklable(obj) else
                   f"a value of type {type(obj).__qualname__} cannot be sent by the safe "
                   "codec (msgpack types, numpy arrays, bytes); convert it")
            if why and (own := class_of_the_program(obj)):  # (pickle would not help)
                raise TypeError(
                    f"a value of type {type(obj).__name__}, {own}, cannot be sent by the "
                    "safe codec (msgpack types, numpy arrays, bytes), and pickle = true "
                    f"would not carry it either: {not_importable(obj)}")
            raise TypeError(f"{why}, or set pickle = true on the serving module in the "
                            "configuration" if why else instead(obj))
        if of_the_program(obj):  # (pickles here by a name only this process has)
            raise TypeError(instead(obj))
        try:
            return msgspec.msgpack.Ext(EXT_PICKLE, pickle.dumps(obj, protocol=5))
        except BaseException as exc:  # PicklingError, a local function, a __reduce__'s
            if not value_raised(exc):  # own SystemExit (undecodable.value_raised), ...
                raise
            # A TypeError, as from the safe codec: every send path takes a call that
            # cannot be encoded back as never sent, and says which argument it was.
            raise TypeError(f"a value of type {type(obj).__qualname__} cannot be pickled: "
                            f"{exc}; {instead(obj, pickled=True)}") from None
