"""The keys a client names things by on a replica, and the limit on their length.

A replica keeps the keys it is sent beyond the message that carried them: a cached
operand's (``Put``), a forwarded value's and its producer's (``Forward``, ``Keep``,
``Deliver``, a ``Ref("fwd", key)`` argument, ``Cancel``'s keys), and the first part of
a forwarded value's key, its client's nonce (fwdgone.py); some of them long after (the
last 100,000 taken or dropped, fwdheld.py). Their count is bounded; their length was
not, and 100,000 keys of a megabyte each would have held 100 GB. So every key a replica
takes is a str of at most `KEY_MAX` characters, the ones it only looks up too (``Drop``,
``Fetch``, ``Put.keep``, a ``Ref("op", key)``), so that one rule holds for every key.

The project's own client makes far shorter ones (tests/unit/test_key_limits.py): a
content hash, 32 hex digits (client/naming.py, broadcastvalue.py); a nonce, 16 hex
digits and maybe ``~`` (client/forward.py), then ``.call id``, ``.index``, ``+run``
(each at most 20 digits), or ``.own`` (client/fwdown.py): 80 characters at most.

A control message with a key past the limit is a protocol error (`key_fault`: the
replica answers ``Goodbye`` naming the message, the field, its length and the limit,
and closes that connection); a call naming one (worker/cache.py's `resolve`) is
answered ``Fail(kind="bad-call")`` alone (`ref_fault`). Neither is kept; the replica serves on.
"""

from __future__ import annotations

from typing import Any

from polybus.registry.limits import said
from polybus.wire.messages import Cancel, Deliver, Drop, Fail, Fetch, Forward, Keep, Put

__all__ = ["KEYED", "KEY_MAX", "key_fault", "ref_fault"]

# 256: three times the longest key the project's client makes (80 characters), and the
# registry's limit on a name (registry/limits.py NAME_MAX). 100,000 remembered keys of
# it are 25 MB at most, where a replica's stores are 512 MiB.
KEY_MAX = 256

# The control messages that carry keys, each with its key fields and list-of-key fields.
KEYED: dict[type[Any], tuple[tuple[str, ...], tuple[str, ...]]] = {
    Put: (("key",), ("keep",)),
    Drop: ((), ("keys",)),
    Forward: (("pkey", "key"), ()),
    Keep: (("pkey", "key"), ()),
    Fetch: (("pkey",), ()),
    Deliver: (("key",), ()),
    Cancel: ((), ("keys",)),
}


def _over(what: str, key: str) -> str:
    return (f"{what} {said(key)} is {len(key):,} characters long, over a replica's "
            f"limit of {KEY_MAX:,} for a key")


def key_fault(msg: Any) -> str | None:
    """Why a replica refuses control message ``msg`` (one of `KEYED`): its first key
    over `KEY_MAX`, named by message and field; None when every key is within it."""
    name = type(msg).__name__
    single, many = KEYED[type(msg)]
    for field in single:
        key = getattr(msg, field)
        if len(key) > KEY_MAX:
            return _over(f"a {name}'s {field}", key)
    for field in many:
        for i, key in enumerate(getattr(msg, field)):
            if len(key) > KEY_MAX:
                return _over(f"a {name}'s {field} [{i}]", key)
    return None


def ref_fault(cid: int, key: Any, where: str) -> Fail:
    """The answer to call ``cid`` (or batch) for naming, at ``where`` (its argument),
    a reference (``Ref``) whose key is not a str of at most `KEY_MAX` characters (a
    peer's list, a megabyte): ``bad-call``, saying which and why."""
    if type(key) is not str:
        return Fail(cid, "bad-call", "TypeError",
                    f"{where} is a reference whose key is a {type(key).__name__}, not a str")
    return Fail(cid, "bad-call", "ValueError", _over(f"{where} is a reference whose key", key))
