"""Arguments as they travel: promises answered, large bytes out of band.

`wire` is applied to each argument of a call that may hold a promise or large bytes
(client/dispatch.py takes a faster way for the common types, `AS_IS_ASYNC`);
`holds_promise` says whether a list, tuple or dict holds a promise anywhere;
`plain_args`, whether a call's arguments need `wire` at all.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import numpy as np

from polybus.client.batchcalls import BatchPromise
from polybus.client.held import held_bytes
from polybus.client.lane import _AS_IS
from polybus.client.promise import CallPromise, wait
from polybus.client.shared import Shared
from polybus.wire.codec import OOB_BYTES, PROMISE_INSIDE, OutOfBand

__all__ = ["AS_IS_ASYNC", "by_value_note", "holds_promise", "plain_args", "wire"]

log = logging.getLogger("polybus.client")

# Argument types `wire` passes on as they are (by type, not isinstance: a subclass
# takes `wire`'s way), and small bytes.
AS_IS_ASYNC = _AS_IS | {np.ndarray}


def wire(value: Any) -> Any:
    """An argument as it travels: promises answered, large bytes out of band.

    A promise inside a list, tuple or dict is waited for here, when the call is made:
    met only while the message is encoded (the link's send lock held), a wait that must
    itself send on that link (an open batch, a held call) would deadlock."""
    t = type(value)
    if t is CallPromise or t is BatchPromise:
        return value.__polybus_value__()
    if t is bytes and len(value) >= OOB_BYTES:
        return OutOfBand(value)
    if (t is list or t is tuple or t is dict) and holds_promise(value):
        by_value_note(value)
        return wait(value)
    return value


def by_value_note(value: Any) -> None:
    """A broadcast handle inside a list, tuple or dict argument goes by value (only an
    argument of its own travels as a Ref): said once a handle, with what it costs."""
    for h in _handles(value):
        if not h.noted:
            h.noted = True
            log.warning("polybus: warning: %r was passed inside a %s, so its value goes "
                        "with every such call (%d bytes), not a short reference: pass the "
                        "handle as an argument of its own", h, type(value).__name__,
                        held_bytes(h.value))


def _handles(x: Any) -> list[Shared]:
    t = type(x)
    if t is Shared:
        return [x]
    if t is list or t is tuple:
        return [h for v in x for h in _handles(v)]
    if t is dict:
        return [h for v in x.values() for h in _handles(v)]
    return []


class _Found(Exception):
    pass


def _look(obj: Any) -> None:
    t = type(obj)
    if hasattr(t, "__polybus_value__") or getattr(t, PROMISE_INSIDE, False):
        raise _Found  # (a BatchPromise is a Struct: msgspec meets its batch, marked)
    return None  # anything else: not looked into (an array holds no promise)


_probe = msgspec.msgpack.Encoder(enc_hook=_look)


def holds_promise(x: Any) -> bool:
    """A promise (or broadcast handle) somewhere in ``x``: msgspec walks it at C speed
    (a list of 10^5 numbers costs what encoding it does), calling back only for what it
    cannot encode itself."""
    try:
        _probe.encode(x)
    except _Found:
        return True
    except (TypeError, ValueError, OverflowError):
        return _walk(x)  # (keys or numbers msgpack cannot take: looked at in Python)
    return False


def _walk(x: Any) -> bool:
    t = type(x)
    if hasattr(t, "__polybus_value__") or getattr(t, PROMISE_INSIDE, False):
        return True
    if t is list or t is tuple:
        return any(_walk(v) for v in x)
    if t is dict:
        return any(_walk(k) or _walk(v) for k, v in x.items())
    return False


def plain_args(args: tuple[Any, ...]) -> bool | None:
    """True if an aggregating binding's lean path (client/batching.py) takes ``args`` as
    they are; False if the general path must (a promise or broadcast handle, which need
    its care, or bytes large enough to travel out of band); None if a list, tuple or
    dict among them holds a promise (waited for first: see batching.py's docstring)."""
    inside = False
    for a in args:
        t = type(a)
        if t is bytes:
            if len(a) >= OOB_BYTES:
                return False
        elif t is list or t is tuple or t is dict:
            inside = inside or holds_promise(a)
        elif hasattr(t, "__polybus_value__"):
            return False
    return None if inside else True
