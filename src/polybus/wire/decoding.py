"""The decoding direction of the codec (wire/codec.py): a frame's msgpack header and raw
buffers back to a message, the extension types (wire/exts.py) rebuilt as arrays, bytes,
unpickled values and refs; a lone frame read in one piece (`decode_lone`); the buffers a
header names as bytes values, for a large frame's receiver (`bytes_buffers`,
wire/placing.py); and a message that does not decode as it is (nested past this stack's
room, a dict key that cannot be one here, a value that does not unpickle) read as the
message that fails what it carried (wire/undecodable.py).

`Codec` inherits these; they use its state, set in `Codec.__init__` and named below for
the checker.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from polybus.errors import ProtocolError
from polybus.wire.arrays import META_DEC, SMALL, array_over, small_meta
from polybus.wire.exts import EXT_BYTES, EXT_NDARRAY, EXT_PICKLE, EXT_REF, EXT_SMALL
from polybus.wire.framing import PREFIX, Frame
from polybus.wire.messages import Message
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
from polybus.wire.values import Ref

__all__ = ["Decoding"]

_HEAD = PREFIX.size
_UNPACK = PREFIX.unpack_from


class Decoding:
    """`Codec`'s decoding methods (a mixin: the codec's state below is its)."""

    allow_pickle: bool
    max_frame: int
    _in: Sequence[bytes | bytearray | memoryview]  # (the frame's buffers, while decoding)
    _ref_hook: Callable[[Ref], Any] | None
    _dec: msgspec.msgpack.Decoder[Message]
    _any_dec: msgspec.msgpack.Decoder[Any]
    _scan_dec: msgspec.msgpack.Decoder[Any]
    _lenient: bool
    _fresh: bool
    _refs: list[tuple[int, Any]]

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
            import numpy as np

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
            if kind != "op" and kind != "fwd":  # (another was taken for "op": a cache-miss)
                raise ProtocolError(f"a reference of kind {str(kind)[:40]!r}; the kinds "
                                    f"are 'op' and 'fwd'")
            ref = Ref(kind, key)
            return self._ref_hook(ref) if self._ref_hook is not None else ref
        raise ProtocolError(f"unknown extension type {code}")

    def _buffer(self, idx: Any) -> bytes | bytearray | memoryview:
        if not isinstance(idx, int) or not 0 <= idx < len(self._in):
            raise ProtocolError(f"reference to buffer {idx!r}, frame has {len(self._in)}")
        return self._in[idx]
