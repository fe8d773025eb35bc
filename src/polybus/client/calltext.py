"""A call as an error message names it: ``crash(41, mode='x')``, short.

A call that fails without its function having raised (every replica gone, the replica
died holding it) has no traceback of its own to tell it from the program's other calls
to the same interface; its arguments do. Each is shown in a few dozen characters at most:
an array as its shape and dtype, bytes as their length, anything else as `reprlib`
cuts it, so a message stays one line however large the arguments. An argument is shown
as the program passed it, not as it travels (large bytes marked out of band, a container
of broadcast handles), and one named rather than sent (an earlier call's value forwarded,
a cached operand) by what it is.
"""

from __future__ import annotations

import reprlib
from typing import Any

from polybus.client.nested import Nested
from polybus.wire.values import OutOfBand, Ref

__all__ = ["call_text"]

LIMIT = 120  # characters of the whole text, at most

# What an argument named rather than sent (a `Ref`) is said to be, by its kind
_NAMED = {"fwd": "<an earlier call's value>", "op": "<a cached operand>"}


class _Short(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 2
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 4
        self.maxstring = self.maxother = 40

    def repr1(self, x: Any, level: int) -> str:
        t = type(x)
        if t is OutOfBand or t is Nested:  # (the program's bytes, or list, tuple or dict,
            x = x.data if t is OutOfBand else x.value  # as it travels: client/wireargs.py)
        elif t is Ref:  # (a value named, not sent: never polybus's own repr)
            return _NAMED.get(x.kind, "<a value held elsewhere>")
        shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
        if isinstance(shape, tuple) and shape and dtype is not None:  # (never its values)
            return f"<{type(x).__name__} {'x'.join(map(str, shape))} {dtype}>"
        if isinstance(x, bytes | bytearray | memoryview) and len(x) > 16:
            return f"<{type(x).__name__} of {len(x)} bytes>"
        return super().repr1(x, level)  # (a __repr__ that raises: "<T instance at ...>")


_SHORT = _Short()


def call_text(interface: str, args: list[Any] | tuple[Any, ...],
              kwargs: dict[str, Any] | None) -> str:
    """``interface(args...)``, each argument short; the whole within `LIMIT` characters."""
    parts = [_SHORT.repr(a) for a in args]
    parts += [f"{k}={_SHORT.repr(v)}" for k, v in (kwargs or {}).items()]
    text = f"{interface}({', '.join(parts)})"
    return text if len(text) <= LIMIT else text[:LIMIT - 4] + "...)"
