"""The msgpack extension type codes of the wire format, one per kind of value carried
beside the msgpack types (wire/codec.py's docstring says what each carries). Shared by
the codec's two directions: encoding (codec.py) and decoding (decoding.py)."""

from __future__ import annotations

__all__ = ["EXT_BYTES", "EXT_NDARRAY", "EXT_PICKLE", "EXT_REF", "EXT_SMALL"]

EXT_NDARRAY = 1
EXT_BYTES = 2
EXT_PICKLE = 3
EXT_REF = 4
EXT_SMALL = 5
