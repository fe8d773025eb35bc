"""What a held call's arguments were when it was made.

A call that is written at once (``sync``, ``async``) is encoded before it returns, so
the program may change an argument the moment after: ``x[:] = i; f(x)`` in a loop sends
each ``i``. A call that is held instead (in ``async-demand``'s backlog or among the
calls written with the next ones, or in an aggregated batch) is encoded later, and
before this it sent whatever the array held by then: with ``aggregate = 8`` that loop
sent ``7`` eight times. A configuration switch must not change a program's results, so
a held call keeps a copy of each argument the program could change: a writable array
(an array that is read-only through and through, ``b.flags.writeable = False``, cannot
change and is not copied: freeze large shared operands to skip the copy), a bytearray
or memoryview (as bytes), lists, dicts and sets (subclasses too: namedtuples and other
tuples are made anew only when they hold something copied). Anything else is kept as
it is: numbers, strings, bytes and numpy scalars cannot change; the codec's other kinds
(a Struct, say) and the elements of an array of objects are the program's to leave
alone until the call is answered (configuration.md says so).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from copy import copy as shallow
from typing import Any, cast

import numpy as np

from polybus.client.nested import Nested
from polybus.wire.arrays import frozen, kept_copy

__all__ = ["AS_IS", "Keep", "frozen", "kept", "snapshot", "snapshot_kwargs", "snapshot_row"]

AS_IS = frozenset({int, float, bool, str, bytes, type(None), complex})


# keep(index, value): a held call's cached operand as it is now, shared among the held
# calls naming the same content (client/operands.py, Comm.held), or None for an
# argument it does not cache
Keep = Callable[[int | str, Any], Any]


def snapshot(args: list[Any], keep: Keep | None = None) -> list[Any]:
    """``args`` (itself, if nothing in it could change) with a copy of each argument
    the program could change after the call."""
    for a in args:
        if type(a) not in AS_IS:
            break
    else:
        return args  # (numbers, strings, bytes: the common call, looked at once)
    changed = _changed(enumerate(args), keep)
    if not changed:
        return args
    out = list(args)
    for i, c in changed:
        out[i] = c
    return out


def snapshot_row(args: tuple[Any, ...], keep: Keep | None = None) -> tuple[Any, ...]:
    """`snapshot` for the positional arguments of one call, as a tuple."""
    for a in args:
        if type(a) not in AS_IS:
            out = snapshot(list(args), keep)
            return args if all(x is y for x, y in zip(out, args, strict=True)) else tuple(out)
    return args


def snapshot_kwargs(kwargs: dict[str, Any] | None,
                    keep: Keep | None = None) -> dict[str, Any] | None:
    """`snapshot` for keyword arguments."""
    changed = _changed(kwargs.items(), keep) if kwargs else None
    if not changed:
        return kwargs
    out = dict(kwargs)  # type: ignore[arg-type]
    out.update(changed)
    return out


def kept(args: list[Any], kwargs: dict[str, Any] | None,
         keep: Keep) -> tuple[list[Any], dict[str, Any] | None]:
    """Only the cached operands of a call written at once, kept as they are now
    (``keep``): it is sent again from them after a cache miss, which the client's own
    next operand may cause by evicting this one."""
    changed = _changed(enumerate(args), keep, only_kept=True)
    if changed:
        args = list(args)
        for i, c in changed:
            args[i] = c
    if kwargs:
        more = _changed(kwargs.items(), keep, only_kept=True)
        if more:
            kwargs = {**kwargs, **dict(more)}
    return args, kwargs


def _changed(items: Iterable[tuple[Any, Any]], keep: Keep | None,
             only_kept: bool = False) -> list[tuple[Any, Any]]:
    """(index or name, copy) for each of ``items`` the program could still change (with
    ``only_kept``, for those ``keep`` keeps)."""
    out = []
    for k, v in items:
        if type(v) in AS_IS:
            continue
        c = keep(k, v) if keep is not None else None
        if c is None:
            if only_kept:
                continue
            try:
                c = _copy(v)
            except RecursionError:  # (too deep to copy is too deep to send: the codec
                c = v               # refuses it, naming the call and argument)
        if c is not v:
            out.append((k, c))
    return out


def _copy(a: Any) -> Any:
    t = type(a)
    if t in AS_IS:
        return a
    if isinstance(a, np.ndarray):
        if frozen(a):
            return a
        # (read-only: a second look, or its hash, knows it cannot change; yet it goes
        # as the writable array it was)
        return kept_copy(a.copy())
    if isinstance(a, np.generic):  # a numpy scalar cannot change
        return a
    if t is bytearray or t is memoryview:
        return bytes(a)
    if t is list:
        return [_copy(x) for x in a]
    if t is dict:
        return {k: _copy(v) for k, v in a.items()}
    if isinstance(a, tuple):
        items = [_copy(x) for x in a]
        if all(x is y for x, y in zip(items, a, strict=True)):
            return a
        return tuple(items) if t is tuple else (
            t._make(items) if hasattr(t, "_make") else t(items))  # (a namedtuple: _make)
    if t is Nested:  # (a container holding broadcast handles or Refs: client/nested.py)
        c = _copy(a.value)
        return a if c is a.value else Nested(c, a.places, a.fwd)
    if isinstance(a, list | dict | set):  # a subclass (OrderedDict, defaultdict...) or a set
        c = shallow(cast(Any, a))
        if isinstance(a, list):
            c[:] = [_copy(x) for x in a]
        elif isinstance(a, dict):
            for k, v in a.items():
                c[k] = _copy(v)
        return c
    return a
