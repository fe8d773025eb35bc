"""Broadcast handles inside a list, tuple or dict argument, named as references.

`client/wireargs.py` makes a ``Nested`` of a container argument that holds a handle
(`polybus.broadcast`): the container as it travels (its promises answered, a new list,
tuple or dict at every level, as `polybus.wait` makes it), the handles left in place,
and where they are (``places``: a tree of the steps to each, list and tuple indices
and dict keys). The Comm of the call's binding (client/operands.py) then names them for
the replica each send goes to: `Nested.named` copies only the containers on the way to
a handle and puts what the Comm gives for it there (``Ref("op", key)``, or the value
itself for a call sent with values after a second miss), and the Call says which
arguments to look into (``Call.inside``), so a replica looks into no other argument
(worker/cache.py, ``resolve``).

A handle is named when at most `MAX_DEPTH` containers hold it (``[h]``: 1,
``{"k": [h]}``: 2); a namedtuple counts as a tuple (it becomes one here, and arrives as
a list as any tuple does). Deeper, in a dict's key, or in another kind of container (a
set, a list subclass), it goes by value with every call, as before, and polybus says so
once a handle (wireargs.py, ``by_value_note``).

A forwarding call (client/forward.py, fwdargs.py) leaves ``Ref("fwd", key)`` in the
place of each promise it forwards from such a container, its place marked `FWD`
(``fwd``: there are some), and the Comm marks the argument in ``Call.inside`` whether
or not it names handles there, so that the replica finds them and holds the call for
their values (worker/cache.py, worker/fwdheld.py). `Nested.renamed` gives them new keys
(a call run again: client/fwdlost.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from polybus.wire.values import INSIDE_DEPTH, as_is

__all__ = ["FWD", "HANDLE", "MAX_DEPTH", "Nested", "Places"]

# Containers deep a handle is still named (the protocol's bound: wire/values.py). Deep
# enough for any data a program builds by hand (a JSON document nested 32 deep is
# rare); a bound because the replica walks what the call marks (worker/cache.py) and
# the client walks it too, a Python frame a level: bounded, neither can be made to
# recurse without end (a list that holds itself), nor a peer make a replica do so,
# and a handle deeper still goes as it always went.
MAX_DEPTH = INSIDE_DEPTH

# The tree of where a container's handles are: step (index or key) -> subtree, or
# HANDLE where the handle itself is.
Places = dict[Any, Any]
HANDLE = None  # (a leaf of Places: the step leads to a handle)
FWD = "fwd"  # (a leaf of Places: the step leads to a forwarded value's Ref)


class Nested:
    """A list, tuple or dict argument holding broadcast handles, as it travels.

    ``value`` is the container (handles in place, promises answered or, forwarded,
    ``Ref("fwd", key)``); ``places`` where its handles (and Refs) are; ``fwd``, whether
    it holds Refs. Sent where no Comm names them (a binding of another session), it
    goes by value: the codec encodes ``__polybus_value__``, and each handle in it by
    its own."""

    __slots__ = ("fwd", "places", "value")

    def __init__(self, value: Any, places: Places, fwd: bool = False) -> None:
        self.value = value
        self.places = places
        self.fwd = fwd

    def __polybus_value__(self) -> Any:
        return self.value

    def __reduce__(self) -> tuple[Any, ...]:
        return as_is, (self.value,)  # (pickled as its value, as a handle is: shared.py)

    def named(self, name: Callable[[Any], Any]) -> Any:
        """``value`` with ``name(handle)`` in each handle's place: a new container at
        each level on the way to a handle, the others as they are."""
        return _named(self.value, self.places, name, HANDLE)

    def renamed(self, keys: dict[str, Any]) -> Nested:
        """A copy whose forwarded values' Refs are ``keys[old key]`` (those it names)."""
        value = _named(self.value, self.places, lambda r: keys.get(str(r.key), r), FWD)
        return Nested(value, self.places, self.fwd)

    def handles(self) -> list[Any]:
        """The handles, in the order `named` meets them."""
        out: list[Any] = []
        _collect(self.value, self.places, out, HANDLE)
        return out

    def refs(self) -> list[Any]:
        """The forwarded values' Refs."""
        out: list[Any] = []
        _collect(self.value, self.places, out, FWD)
        return out

    def __repr__(self) -> str:
        return f"Nested({self.value!r})"


def _named(x: Any, places: Places, name: Callable[[Any], Any], leaf: Any) -> Any:
    """``x`` with ``name(item)`` at each place marked ``leaf`` (the others as they are)."""
    t = type(x)
    c: Any = dict(x) if t is dict else list(x)
    for step, sub in places.items():
        if sub is leaf:
            c[step] = name(x[step])
        elif type(sub) is dict:
            c[step] = _named(x[step], sub, name, leaf)
    return tuple(c) if t is tuple else c


def _collect(x: Any, places: Places, out: list[Any], leaf: Any) -> None:
    for step, sub in places.items():
        if sub is leaf:
            out.append(x[step])
        elif type(sub) is dict:
            _collect(x[step], sub, out, leaf)
