"""A value `broadcast` takes that is not an array or bytes: a dict, a list, a str, a mix
with arrays inside, a dataclass; anything the codec of the links it goes to can send.

It is named by its encoding, as an array is by its bytes: the msgpack the codec makes
of it, and the buffers of the arrays in it, hashed (XXH3-128, after a prefix of its own,
so no array's or bytes' name can be one of these). The handle keeps what the replicas
get: the encoding read back (a copy, the arrays in it read-only), so a change the
program makes to the value afterwards (a dict's entry set) changes neither what the
replicas hold nor what a replica that lost it is sent again. It is encoded once for
each pickle setting among the modules it goes to (with pickle off a dataclass arrives
as a dict, with pickle on as itself: wire/pickling.py) before anything is sent, so a
value one of them cannot carry fails broadcast() with the codec's error, saying where
in the value the part it cannot carry sits, and no replica is sent anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import xxhash

from polybus.errors import UnsendableError
from polybus.wire.codec import Codec
from polybus.wire.framing import Frame
from polybus.wire.messages import Result
from polybus.wire.unsendablepath import at
from polybus.worker.heldvalue import freeze_inside

if TYPE_CHECKING:
    from polybus.client.session import Session

__all__ = ["encoded"]

_PREFIX = b"polybus broadcast value\0"  # (an array's name begins with its dtype and shape)


def encoded(session: Session, value: Any) -> tuple[str, Any]:
    """The content name of ``value`` and the copy of it the handle keeps (see above);
    UnsendableError if a module it goes to cannot be sent it."""
    modules: dict[bool, list[str]] = {}  # pickle on or off -> the modules with it
    for module, links in session.links.items():
        if links:
            modules.setdefault(links[0].channel.codec.allow_pickle, []).append(module)
    settings = sorted(modules) or [False]  # (the safe codec first: its error says most)
    kept: tuple[Codec, bytes, list[Any]] | None = None
    for pickle in settings:
        codec = Codec(allow_pickle=pickle)
        try:
            header, bufs = codec.encode_parts(Result(0, value))
        except (TypeError, OverflowError) as exc:
            to = modules.get(pickle, [])
            whom = (f" to module{'s' if len(to) > 1 else ''} {', '.join(map(repr, to))}"
                    if len(modules) > 1 else "")
            raise UnsendableError(f"broadcast(...){whom}{at(value, exc, pickle)}: "
                                  f"{exc}") from None
        if pickle == settings[-1]:  # (pickle on, if any module has it: kept as itself)
            kept = (codec, header, bufs)
    assert kept is not None
    codec, head, parts = kept
    h = xxhash.xxh3_128(_PREFIX)
    h.update(head)
    for b in parts:
        h.update(b)
    back = codec.decode(Frame(head, [bytearray(b) for b in parts], 0))
    if type(back) is not Result:  # (a dict key the replicas could not take: a map)
        raise UnsendableError(f"broadcast(...): it could not be read back as a replica "
                              f"would read it: {getattr(back, 'message', back)}")
    freeze_inside(back.value)
    return h.hexdigest(), back.value
