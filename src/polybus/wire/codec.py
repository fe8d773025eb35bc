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
array only travels so, its mask with it); a value the
safe codec cannot carry is a clear TypeError at the sender (a str with a lone surrogate
too: wire/unencodable.py).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np

from polybus.errors import ProtocolError
from polybus.wire.arrays import (
    DTYPE_STR,
    HEADS,
    INLINE_DIMS,
    INLINE_MAX,
    META_DEC,
    META_ENC,
    SMALL,
    array_over,
    small_head,
    small_meta,
)
from polybus.wire.framing import _BIG, DEFAULT_MAX_FRAME, PREFIX, Frame, encode_frame, too_large
from polybus.wire.messages import Call, Message, Result
from polybus.wire.undecodable import (
    UNHASHABLE_KEY,
    Undecodable,
    Unpicklable,
    failed_form,
    on_fresh_stack,
    said_of,
    salvage,
    value_raised,
)
from polybus.wire.unencodable import too_deep, unencodable
from polybus.wire.values import (
    OOB_BYTES,
    PROMISE_INSIDE,
    OutOfBand,
    Ref,
    _answered,
    _lifted,
    _PromiseInside,
)

__all__ = ["EXT_BYTES", "EXT_NDARRAY", "EXT_PICKLE", "EXT_REF", "EXT_SMALL", "OOB_BYTES",
           "PROMISE_INSIDE", "Codec", "OutOfBand", "Ref", "too_deep"]

EXT_NDARRAY = 1
EXT_BYTES = 2
EXT_PICKLE = 3
EXT_REF = 4
EXT_SMALL = 5
_HEAD = PREFIX.size
_UNPACK = PREFIX.unpack_from


class Codec:
    """Encodes and decodes messages for one connection (not thread-safe: one per side)."""

    def __init__(self, *, allow_pickle: bool = False, max_frame: int = DEFAULT_MAX_FRAME,
                 ref_hook: Callable[[Ref], Any] | None = None) -> None:
        self.allow_pickle = allow_pickle
        self.max_frame = max_frame
        self._out: list[memoryview | np.ndarray[Any, Any]] = []
        self._gather = 0  # see encode_parts
        self._in: Sequence[bytes | bytearray | memoryview] = []
        self._ref_hook = ref_hook
        self._enc = msgspec.msgpack.Encoder(enc_hook=self._enc_hook)
        self._dec = msgspec.msgpack.Decoder(Message, ext_hook=self._ext_hook)
        self._any_dec = msgspec.msgpack.Decoder(ext_hook=self._ext_hook)
        self._lenient = False  # (see _failed)
        self._fresh = False  # (see _deep)
        self._refs: list[tuple[int, Any]] = []
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
        if t is not np.ndarray and (force := getattr(t, "__polybus_value__", None)) is not None:
            # A promise inside a value: its answer is what travels. Looked for first: a
            # promise passes isinstance as its answer's class (client/promise.py).
            return force(obj)
        if isinstance(obj, np.ndarray):
            if t is not np.ndarray and isinstance(obj, np.ma.MaskedArray):  # (subclasses only)
                return self._masked(obj)
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
            self._out.append(memoryview(arr.reshape(-1).view(np.uint8)) if arr.nbytes  # type: ignore[arg-type]
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

    def _pickled(self, obj: Any) -> msgspec.msgpack.Ext:
        if not self.allow_pickle:
            names = obj.dtype.names if isinstance(obj, np.ndarray) else None
            why = (f"a structured numpy array (fields {', '.join(names)}) cannot be sent by "
                   "the safe codec: it carries a dtype as a type string, which has no field "
                   "names; send its fields as arrays of their own" if names else
                   "a numpy array of dtype object (Python objects, not numbers) cannot be "
                   "sent by the safe codec; convert it to a numeric dtype or a list"
                   if isinstance(obj, np.ndarray) else
                   f"a value of type {type(obj).__qualname__} cannot be sent by the safe "
                   "codec (msgpack types, numpy arrays, bytes); convert it")
            raise TypeError(f"{why}, or set pickle = true on the serving module in the "
                            "configuration")
        try:
            return msgspec.msgpack.Ext(EXT_PICKLE, pickle.dumps(obj, protocol=5))
        except BaseException as exc:  # PicklingError, a local function, a __reduce__'s
            if not value_raised(exc):  # own SystemExit (undecodable.value_raised), ...
                raise
            # A TypeError, as from the safe codec: every send path takes a call that
            # cannot be encoded back as never sent, and says which argument it was.
            raise TypeError(f"a value of type {type(obj).__qualname__} cannot be pickled: "
                            f"{exc}") from None

    # -- decoding ---------------------------------------------------------------
    def decode(self, frame: Frame) -> Message:
        """One message; ProtocolError for anything malformed."""
        self._in = frame.buffers
        try:
            return self.decode_header(frame.header)
        finally:
            self._in = []

    def decode_header(self, header: bytes | bytearray | memoryview) -> Message:
        """The message of a frame that carries no buffers (FrameDecoder.next_small)."""
        try:
            msg: Message = self._dec.decode(header)
        except Unpicklable:  # (the program's value, not the protocol: wire/undecodable.py)
            return self._failed(header)
        except msgspec.DecodeError as exc:
            if UNHASHABLE_KEY in str(exc):  # (the program's value: wire/undecodable.py)
                return self._salvaged(header)
            raise ProtocolError(f"malformed message: {exc}") from None
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as exc:
            raise ProtocolError(f"malformed value in message: {exc}") from None
        except RecursionError:  # (a RuntimeError: arrays or maps nested past this stack's room)
            if not self._fresh:
                return self._deep(header)
            raise ProtocolError("malformed message: values nested too deeply") from None
        return msg

    def _deep(self, header: bytes | bytearray | memoryview) -> Message:
        """`decode_header` of a message nested deeper than this thread's stack has room
        for, again at the bottom of a new one (undecodable.py): what a sender could encode
        is read, whatever depth the reader was called at."""
        self._fresh = True
        try:
            return on_fresh_stack(self.decode_header, header)  # type: ignore[no-any-return]
        finally:
            self._fresh = False

    def _salvaged(self, header: bytes | bytearray | memoryview) -> Message:
        """The message of ``header``, a dict key in one of whose values cannot be one
        here, as the message that fails what it carried (or a `Refusal`)."""
        self._lenient = True  # (a pickle that fails in it fails the same way)
        try:
            return salvage(header, self._dec.decode, self._any_dec.decode)  # type: ignore[no-any-return]
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as exc:
            raise ProtocolError(f"malformed value in message: {exc}") from None
        finally:
            self._lenient = False

    def _failed(self, header: bytes | bytearray | memoryview) -> Message:
        """The message of ``header``, one of whose values did not unpickle, as the
        message that fails what it carried (or a `Refusal`)."""
        self._lenient = True
        try:
            msg = self._dec.decode(header)
        except Exception as exc:  # (it decoded up to the pickle: something else is wrong)
            raise ProtocolError(f"malformed message: {exc}") from None
        finally:
            self._lenient = False
        return failed_form(msg)  # type: ignore[no-any-return]

    def decode_lone(self, data: bytes) -> Message | None:
        """The message of ``data`` if it is exactly one whole frame that carries no
        buffers and no flags (a lone call or answer, read in one piece), else None:
        then ``data`` is for the frame decoder, which also says what is wrong with it."""
        n = len(data)
        if n < _HEAD:
            return None
        length, nbufs, flags, header_len = _UNPACK(data)
        if nbufs or flags or length != n - 4 or length != 8 + header_len or length > self.max_frame:
            return None
        try:
            msg: Message = self._dec.decode(memoryview(data)[_HEAD:])
        except Exception:  # malformed: the decoder's way reports it
            return None
        return msg

    def bytes_buffers(self, header: memoryview) -> list[int]:
        """The buffers ``header`` names as bytes values, each named once and only as
        bytes: a large frame's receiver puts those straight into bytes objects
        (wire/placing.py). Empty for anything it cannot read (decode reports that)."""
        refs: list[tuple[int, Any]] = []
        self._refs = refs
        try:
            self._scan_dec.decode(header)
        except Exception:  # malformed: decoding the frame for real says how
            return []
        finally:
            self._refs = []
        named = [idx for _, idx in refs]
        return [idx for code, idx in refs
                if code == EXT_BYTES and type(idx) is int and named.count(idx) == 1]

    def _scan_hook(self, code: int, data: memoryview) -> None:
        if code == EXT_BYTES:
            self._refs.append((code, META_DEC.decode(data)))
        elif code == EXT_NDARRAY:
            meta = META_DEC.decode(data)
            self._refs.append((code, meta[2] if isinstance(meta, list) and len(meta) == 3 else None))

    def decode_value(self, data: bytes, buffers: list[bytearray | memoryview]) -> Any:
        self._in = buffers
        try:
            return self._any_dec.decode(data)
        finally:
            self._in = []

    def _ext_hook(self, code: int, data: memoryview) -> Any:
        if code == EXT_SMALL:
            n = data[0] + 1
            meta = bytes(data[:n])
            got = SMALL.get(meta)
            if got is None:
                got = small_meta(meta)
            dt, shape, nbytes = got
            if data.nbytes - n != nbytes:
                raise ProtocolError("array shape does not match its bytes")
            return np.ndarray(shape, dt, bytearray(data[n:]))
        if code == EXT_NDARRAY:
            dtype, shape, idx = META_DEC.decode(data)
            buf = self._buffer(idx)
            # (bytes: only a buffer named as bytes too; arrays stay writable)
            return array_over(dtype, shape, bytearray(buf) if isinstance(buf, bytes) else buf)
        if code == EXT_BYTES:
            buf = self._buffer(META_DEC.decode(data))
            # Received into its own bytes object (wire/placing.py): handed out as it is.
            return buf if type(buf) is bytes else bytes(buf)
        if code == EXT_PICKLE:
            if not self.allow_pickle:
                raise ProtocolError("peer sent a pickled value but pickle is not enabled here")
            try:
                return pickle.loads(data)
            except BaseException as exc:  # (a class only the sender has, a broken pickle,
                if not value_raised(exc):  # or its own SystemExit: value_raised)
                    raise
                if self._lenient:
                    return Undecodable(exc)
                raise Unpicklable(f"a pickled value did not unpickle: "
                                  f"{type(exc).__name__}: {said_of(exc)}") from None
        if code == EXT_REF:
            kind, key = META_DEC.decode(data)
            ref = Ref(kind, key)
            return self._ref_hook(ref) if self._ref_hook is not None else ref
        raise ProtocolError(f"unknown extension type {code}")

    def _buffer(self, idx: Any) -> bytes | bytearray | memoryview:
        if not isinstance(idx, int) or not 0 <= idx < len(self._in):
            raise ProtocolError(f"reference to buffer {idx!r}, frame has {len(self._in)}")
        return self._in[idx]
