"""Mutated frames for test_fuzz_replica.py: real messages the project's codec encodes,
then bytes flipped, cut or inserted, a length, buffer count, flags or buffer length that
lies, a field of the wrong msgpack type, an array whose dtype or shape disagrees with its
bytes, an unknown tag or extension, a pickled value where pickle is off.

`Stream` is what one example sends; `walk` says whether the replica will have read all of
it as whole frames (then it must answer a probe `Ping` or drop the peer) or holds a frame
begun (then the test half-closes and the replica must say the peer went mid-frame).
"""

from __future__ import annotations

import math
import pickle
import struct
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
from hypothesis import strategies as st

from polybus.wire.codec import Codec
from polybus.wire.framing import DEFAULT_MAX_FRAME, encode_frame
from polybus.wire.messages import (
    Batch,
    Call,
    CallBatch,
    Cancel,
    Deliver,
    Drop,
    Fetch,
    Forward,
    Keep,
    Message,
    Ping,
    Put,
    Result,
    Revoke,
    StatsRequest,
    Steal,
)
from polybus.wire.values import Ref
from polybus.worker.keylimits import KEY_MAX

Ext = msgspec.msgpack.Ext
IFACES = ["echo", "boom", "arr"]

ARRAYS = [np.arange(3.0), np.zeros((2, 3), np.int32), np.array(5, np.uint8), np.zeros(0),
          np.array([b"ab", b"c"]), np.arange(3000.0),  # (24 KB: a buffer of its own)
          np.arange(12, dtype=">u4").reshape(3, 4)]
values = st.one_of(
    st.integers(-2**63, 2**63 - 1), st.floats(), st.text(max_size=12), st.binary(max_size=24),
    st.none(), st.booleans(), st.sampled_from(ARRAYS),
    st.lists(st.integers(0, 9), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(-9, 9), max_size=2),
    st.sampled_from([b"\x01" * 70_000,  # out of band (ext 2)
                     b"\x02" * 140_000]))  # a frame the replica reads into memory of its own

# What a field is given in place of its own: each msgpack type, a str one past the limit
# on a key (worker/keylimits.py), the edges of the numbers, extension values, and a
# pickle (the replica's connections do not allow pickle).
CONFUSE: list[Any] = [
    "7", "", "x" * (KEY_MAX + 1), 7, 0, -1, 2**64 - 1, -2**63, 1.5, math.nan, math.inf, -math.inf, 1e308,
    None, True, False, [], [1, "a"], [[[[[[[[[[[]]]]]]]]]]], {}, {"a": 1}, {1: 2}, b"xx",
    Ext(99, b""), Ext(4, msgspec.msgpack.encode(["zz", "k"])), Ext(2, msgspec.msgpack.encode(9)),
    Ext(3, pickle.dumps(1, protocol=5)), Ext(3, pickle.dumps({"a": [1.5]}, protocol=5)),
]
DTYPES = ["<f8", "|O", "V3", "|S0", "<U0", "x" * 100, "<M8[D]", 5, None, [], ">c16", "|b1"]
SHAPES: list[Any] = [[-1], [10**12], [3, "a"], [], [0], [2**62, 2**62], [1] * 40, "3", None,
                     [0, 10**15], [1.5]]
IDXS: list[Any] = [-1, 99, "0", 1.0, None, 2**64 - 1, [0]]
TAGS: list[Any] = [0, 30, 31, 99, 255, -1, 2**32, "1", None, 1.0, 26]


# Where a Forward may send a value on, besides the replica itself: addresses that reach
# no one and make no DNS query (a port nothing listens on; hosts IDNA refuses, which
# fail before any lookup; text that is no address, short or long).
NOWHERE = ["tcp://127.0.0.1:1", "a..b:1", "x" * 64 + ":1", "no-port", "g" * 5000,
           "tcp://127.0.0.1:" + "9" * 2000]


def seed(data: st.DataObject, cid: int, to: str) -> tuple[list[Message], bool]:
    """A few real messages a client sends (calls, batches, cached operands, cancelling,
    keeping and forwarding), ids from ``cid``; and whether they may be mutated byte by
    byte (not a Forward: its address, flipped, could name any host, and make the
    replica look it up)."""
    kind = data.draw(st.sampled_from(["call", "kwargs", "batch", "callbatch", "put",
                                      "inside", "cancel", "keep", "forward", "deliver",
                                      "control"]))

    def v() -> Any:
        return data.draw(values)

    iface = data.draw(st.sampled_from(IFACES))
    prio = data.draw(st.sampled_from([0.0, 1.0, -5.0, math.inf]))
    key, name = f"op{cid}", f"n.{cid}"
    out: list[Message] = {
        "call": lambda: [Call(cid, iface, [v()], prio=prio)],
        "kwargs": lambda: [Call(cid, "echo", [], {"x": v()})],
        "batch": lambda: [Batch([Call(cid, "echo", [v()]), Call(cid + 1, iface, [v()])])],
        "callbatch": lambda: [CallBatch(cid, iface, [[v()], [v()]], prio)],
        "put": lambda: [Put(key, v()), Call(cid, "echo", [Ref("op", key)]), Drop([key])],
        "inside": lambda: [Put(key, v()), Call(cid, "echo", [[Ref("op", key), 1]], inside=[0]),
                           Drop([key])],
        "cancel": lambda: [Call(cid, "echo", [v()]), Cancel([cid]), Revoke([cid, cid + 5], 3),
                           Steal(2, 4)],
        "keep": lambda: [Keep(cid, f"p{cid}", name), Call(cid, "echo", [v()]),
                         Fetch(f"p{cid}", 5)],
        "forward": lambda: [Forward(cid, f"p{cid}", name, data.draw(st.sampled_from(
            [to, *NOWHERE, f"ipc:///nonexistent-polybus-fuzz/{cid}"]))), Call(cid, "echo", [v()])],
        "deliver": lambda: [Deliver(name, data.draw(st.booleans()),
                                    data.draw(st.sampled_from([v(), ["ValueError", "m", ""]])))],
        "control": lambda: [Ping(7), StatsRequest(8)],
    }[kind]()
    return out, kind != "forward"


@dataclass
class Part:
    """One frame: its header as msgpack values (extensions as `Ext`), its buffers, and
    its bytes as the codec made them (None once the header or buffers were changed)."""

    tree: Any
    bufs: list[bytes]
    raw: bytes | None
    loose: bool = True  # may be changed byte by byte

    def bytes(self) -> bytes:
        if self.raw is not None:
            return self.raw
        head = msgspec.msgpack.encode(self.tree)
        return b"".join(bytes(p) for p in encode_frame(head, list(self.bufs) or None))


def parts_of(msgs: list[Message], loose: bool) -> list[Part]:
    codec = Codec()
    out = []
    for m in msgs:
        header, bufs = codec.encode_parts(m)
        raw = b"".join(bytes(p) for p in codec.encode(m))
        out.append(Part(msgspec.msgpack.decode(header), [bytes(memoryview(b).cast("B"))
                                                        for b in bufs], raw, loose))
    return out


def _paths(tree: Any, at: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Every place in a header's values but the tag, down to a few levels."""
    out = []
    items = list(enumerate(tree)) if isinstance(tree, list) else list(tree.items()) \
        if isinstance(tree, dict) else []
    for k, sub in items:
        if not (at == () and k == 0):
            out.append((*at, k))
        if depth < 4:
            out += _paths(sub, (*at, k), depth + 1)
    return out


def _get(tree: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        tree = tree[k]
    return tree


def _set(tree: Any, path: tuple[Any, ...], value: Any) -> None:
    _get(tree, path[:-1])[path[-1]] = value


def _ext(data: st.DataObject, e: Any) -> Any:
    """An extension value with its code or its data changed."""
    code, raw = e.code, bytes(e.data)
    how = data.draw(st.sampled_from(["code", "meta", "bytes"]))
    if how == "code":
        return Ext(data.draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 9, 127, -1, -128])), raw)
    if how == "bytes" or code not in (1, 2, 4, 5):
        cut = data.draw(st.integers(0, len(raw)))
        return Ext(code, raw[:cut] + data.draw(st.binary(max_size=6)))
    if code == 5:  # u8 n, n bytes of [dtype, shape], the array's bytes
        n = raw[0]
        meta = msgspec.msgpack.decode(raw[1:1 + n])
        rest = raw[1 + n:]
    else:
        meta, rest = msgspec.msgpack.decode(raw), b""
    if code == 2:
        meta = data.draw(st.sampled_from(IDXS))
    elif code == 4:
        meta = data.draw(st.sampled_from([["zz", "k"], ["op", 5], ["fwd", None], ["op"], "op",
                                          ["op", "k", 1], ["fwd", ["a", 1]],
                                          ["fwd", "k" * (KEY_MAX + 1)]]))
    else:
        i = data.draw(st.integers(0, len(meta) - 1))
        meta[i] = data.draw(st.sampled_from([DTYPES, SHAPES, IDXS][i]))
    packed = msgspec.msgpack.encode(meta)
    if code == 5:
        n = data.draw(st.sampled_from([len(packed), (len(packed) + 1) % 256, 0, 255]))
        return Ext(5, bytes((n,)) + packed + rest)
    return Ext(code, packed)


def restructure(data: st.DataObject, part: Part) -> str:
    """Change ``part``'s header or buffers (a frame whose lengths still agree); what."""
    tree = part.tree
    exts = [p for p in _paths(tree) if isinstance(_get(tree, p), Ext)]
    how = data.draw(st.sampled_from(["field", "tag", "buffers"] + (["ext"] * 2 if exts else [])))
    if how == "tag" or not isinstance(tree, list):
        part.tree = [data.draw(st.sampled_from(TAGS)), *tree[1:]] if isinstance(tree, list) \
            else data.draw(st.sampled_from(CONFUSE))
    elif how == "field":
        paths = [p for p in _paths(tree) if not (tree[0] == 13 and p[0] == 4)]  # (Forward.to)
        if paths:
            _set(tree, data.draw(st.sampled_from(paths)), data.draw(st.sampled_from(CONFUSE)))
        else:
            tree.append(data.draw(st.sampled_from(CONFUSE)))
    elif how == "ext":
        path = data.draw(st.sampled_from(exts))
        _set(tree, path, _ext(data, _get(tree, path)))
    else:  # the buffers the header names, as the frame carries them
        op = data.draw(st.sampled_from(["drop", "add", "short", "long", "swap"]))
        bufs = part.bufs
        if op == "add" or not bufs:
            bufs.append(data.draw(st.binary(max_size=40)))
        elif op == "drop":
            bufs.pop(data.draw(st.integers(0, len(bufs) - 1)))
        elif op == "short":
            bufs[-1] = bufs[-1][:data.draw(st.integers(0, max(0, len(bufs[-1]) - 1)))]
        elif op == "long":
            bufs[-1] += data.draw(st.binary(min_size=1, max_size=16))
        else:
            bufs.reverse()
            bufs.append(b"")
    part.raw = None
    return how


_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")


def rewrite(data: st.DataObject, frame: bytes) -> tuple[bytes, str]:
    """``frame`` changed byte by byte (its prefix's fields lying, or any of its bytes)."""
    b = bytearray(frame)
    length = _U32.unpack_from(b)[0]
    nbufs = _U16.unpack_from(b, 4)[0]
    how = data.draw(st.sampled_from(["flip", "flip", "length", "nbufs", "flags", "header_len",
                                     "buflen", "cut", "insert", "dup", "junk"]))
    if how == "flip":
        for _ in range(data.draw(st.integers(1, 3))):
            b[data.draw(st.integers(0, len(b) - 1))] ^= data.draw(st.integers(1, 255))
    elif how == "length":
        _U32.pack_into(b, 0, data.draw(st.sampled_from([
            max(0, length - data.draw(st.integers(1, 16))), length + data.draw(st.integers(1, 16)),
            DEFAULT_MAX_FRAME + 1, 2**32 - 1, data.draw(st.integers(0, 7)),
            data.draw(st.integers(0, 2**32 - 1))])))
    elif how == "nbufs":
        _U16.pack_into(b, 4, data.draw(st.sampled_from([nbufs + 1, max(0, nbufs - 1), 4097, 65535])))
    elif how == "flags":
        _U16.pack_into(b, 6, data.draw(st.sampled_from([1, 2, 3, 4, 65535])))
    elif how == "header_len":
        hl = _U32.unpack_from(b, 8)[0]
        _U32.pack_into(b, 8, data.draw(st.sampled_from([hl + 1, max(0, hl - 1), 0, 2**32 - 1])))
    elif how == "buflen" and nbufs and len(b) >= 12 + 8 * nbufs:
        at = 12 + 8 * data.draw(st.integers(0, nbufs - 1))
        n = _U64.unpack_from(b, at)[0]
        _U64.pack_into(b, at, data.draw(st.sampled_from([n + 1, max(0, n - 1), 0, 2**64 - 1, 2**40])))
    elif how == "cut":
        del b[data.draw(st.integers(1, len(b) - 1)):]
    elif how == "insert":
        at = data.draw(st.integers(0, len(b)))
        b[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    elif how == "dup":
        b += frame
    elif how == "junk":  # a frame of the right length whose body is anything
        body = data.draw(st.binary(min_size=8, max_size=60))
        b = bytearray(_U32.pack(len(body)) + body)
    return bytes(b), how


@dataclass
class Stream:
    data: bytes
    what: list[str] = field(default_factory=list)


def mutated(data: st.DataObject, msgs: list[Message], loose: bool) -> Stream:
    """``msgs`` as frames, none, one or two of them changed."""
    parts = parts_of(msgs, loose)
    what = []
    for _ in range(data.draw(st.sampled_from([0, 1, 1, 1, 2]))):
        part = data.draw(st.sampled_from(parts))
        if part.loose and data.draw(st.booleans()):
            part.raw, how = rewrite(data, part.bytes())
            part.loose = False  # (its prefix, as changed, stays)
            what.append(f"bytes:{how}")
        elif part.raw is not None or part.loose:
            what.append(f"values:{restructure(data, part)}")
    return Stream(b"".join(p.bytes() for p in parts), what)


def walk(stream: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> str:
    """"whole": every frame of ``stream`` came whole (or one is refused on its length,
    which is checked first); "begun": a frame is begun and not whole, which a replica
    waits for."""
    pos = 0
    while len(stream) - pos >= 4:
        (length,) = _U32.unpack_from(stream, pos)
        if length > max_frame or length < 8:
            return "whole"
        if pos + 4 + length > len(stream):
            return "begun"
        pos += 4 + length
    return "whole" if pos == len(stream) else "begun"


def says_goodbye(stream: bytes) -> bool:
    """Whether a frame of ``stream`` is a `Goodbye` (tag 26) from the client: the replica
    then drops it as a peer that went, with nothing to log."""
    pos = 0
    while len(stream) - pos >= 12:
        length, nbufs, _flags, header_len = struct.unpack_from("<IHHI", stream, pos)
        head = stream[pos + 12 + 8 * nbufs:pos + 12 + 8 * nbufs + header_len]
        try:
            tree = msgspec.msgpack.decode(head, ext_hook=lambda code, data: None)
        except (msgspec.DecodeError, ValueError):
            tree = None
        if isinstance(tree, list) and tree and tree[0] == 26 and type(tree[0]) is int:
            return True
        pos += 4 + length
    return False


def answers_result(ans: Result, sent: Any) -> bool:
    """``ans`` carries ``sent`` (as the codec writes both: NaN equal to itself, an
    array's dtype and shape compared too)."""
    def frame(m: Message) -> bytes:
        return b"".join(bytes(p) for p in Codec().encode(m))
    return frame(ans) == frame(Result(ans.id, sent))
