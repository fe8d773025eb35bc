"""Why an array argument was read-only, for a call that failed writing into one.

A replica's operand cache (cache.py) hands every call that names an operand the same
array, made read-only so that no call changes what later calls see. A function that
writes into one in place (``b *= 2``) fails with numpy's bare "output array is
read-only" or "assignment destination is read-only", which says nothing of the cache.
`note` names the read-only arguments so the client's RemoteException can say it.

Arguments delivered from the cache arrive read-only (`held` notes them), and so, over
shm, does a large array the client itself held read-only (transport/shmseg.py): the
note tells the two apart. The others are decoded into memory of their own, writable on
every transport. A process pool's child gets pickled
copies of the arguments, writable, so a call that failed there gets no note (replies.py).
The note names only the read-only arguments the failing line of the function's own file
mentions (a write into an array of the function's own making, beside a cached operand,
blamed the operand); with no source to read, it names them all. A line that mentions
none but writes through a local name for one, or for a view of one (``m, v = pair``,
then ``m *= 2``), names it by both: ``m (pair[0])``.
"""

from __future__ import annotations

import inspect
import linecache
import re
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

from polybus.lazynumpy import is_array
from polybus.wire.values import INSIDE_DEPTH

if TYPE_CHECKING:  # (numpy is imported where an array needs it: polybus/lazynumpy.py)
    import numpy as np

__all__ = ["held", "held_array", "note"]

# The arrays the operand cache holds, by id, each by a weak reference with no callback
# (checked to be the same object): a WeakValueDictionary's entry and its removal when the
# array went cost a replica ~1 us of every Put and Drop, the cost of matmul's small
# stateful calls. The references of arrays gone are let go of as the table grows.
_cached: dict[int, weakref.ref[Any]] = {}
_prune_at = [1024]


def held(value: Any) -> None:
    """Note an array the operand cache holds (read-only) as a cached operand."""
    if is_array(value):
        held_array(value)


def held_array(value: np.ndarray[Any, Any]) -> None:
    """`held` of what is known to be an array."""
    if len(_cached) >= _prune_at[0]:
        _prune()
    _cached[id(value)] = weakref.ref(value)


def _prune() -> None:
    """Let go of the entries of arrays gone; the table may then grow to twice what is
    left (1024 at least) before the next look."""
    for ident, ref in list(_cached.items()):
        if ref() is None:
            taken = _cached.pop(ident, None)
            if taken is not None and taken is not ref:
                # (another thread noted a new array under that id meanwhile: the cache
                # and the forwarding store note from different threads; it stays)
                _cached.setdefault(ident, taken)
    _prune_at[0] = max(1024, 2 * len(_cached))


def _is_cached(value: Any) -> bool:
    ref = _cached.get(id(value))
    return ref is not None and ref() is value


def note(exc: BaseException, message: str, fn: Callable[..., Any] | None,
         args: Sequence[Any], kwargs: dict[str, Any] | None) -> str | None:
    """The words to add to ``message`` (``exc``'s) when it is numpy's refusal to write a
    read-only array and the call had read-only array arguments; None otherwise."""
    if not isinstance(exc, ValueError) or "read-only" not in message:
        return None
    inner: set[str] = set()  # (names of items of list and dict arguments: assignable)
    values = {name: value for name, value in _within(_arguments(fn, args, kwargs or {}), inner)
              if is_array(value) and not value.flags.writeable}
    names = list(values)
    line, local = _failing_line(exc, fn)
    if line is not None:  # (the write's own line: only what it names, a[...] by its a)
        names = [n for n in names if re.search(rf"\b{re.escape(n.split('[')[0])}\b", line)]
        if not names:  # (or a local name it gives one of them: m, v = pair; m *= 2)
            for alias, n in _aliases(line, local, values):
                values[alias] = values[n]
                names.append(alias)
                inner.add(alias)
    if not names:
        return None
    cached = [n for n in names if _is_cached(values[n])]
    sent = [n for n in names if n not in cached]  # (read-only in the client: shmseg.py)
    first = names[0].split(" (")[0]  # (an alias, ``m (pair[0])``: its local name, m)
    copy = (f"{first} = {first}.copy()" if first.isidentifier() or names[0] in inner else
            f"{first}.copy()" if first.endswith("]") else "x = x.copy()")
    if not sent:
        return (f"{_listed(cached, 'is a cached operand', 'are cached operands')}: cached "
                f"operands are read-only and shared between calls, so copy one before "
                f"writing to it, e.g. {copy}")
    said = (f"{_listed(sent, 'was', 'were')} read-only in the client (flags.writeable = "
            f"False), and over shm such an array arrives read-only, its memory shared")
    if cached:
        said = f"{_listed(cached, 'is a cached operand', 'are cached operands')}, and {said}"
    return f"{said}, so copy it before writing to it, e.g. {copy}"


def _listed(names: list[str], one: str, many: str) -> str:
    if len(names) == 1:
        return f"{names[0]} {one}"
    return f"{', '.join(names[:-1])} and {names[-1]} {many}"


def _arguments(fn: Callable[..., Any] | None, args: Sequence[Any],
               kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(the parameter's name, the value) for each argument of the call."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs) if fn is not None else None
    except (TypeError, ValueError):  # (no signature, or the call did not fit it)
        bound = None
    if bound is None:
        yield from ((f"argument {i + 1}", v) for i, v in enumerate(args))
        yield from kwargs.items()
        return
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            yield from ((f"{name}[{i}]", v) for i, v in enumerate(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            yield from value.items()
        else:
            yield name, value


def _within(named: Iterator[tuple[str, Any]], inner: set[str]) -> Iterator[tuple[str, Any]]:
    """``named``, and the items of its lists and dicts (``xs[0]``, ``d['k']``: a
    broadcast operand inside a list or dict argument arrives as a cached one), at most
    INSIDE_DEPTH deep and _WITHIN items in all; their names go to ``inner``."""
    left = _WITHIN
    stack = [(name, value, 0) for name, value in named][::-1]
    while stack:
        name, value, depth = stack.pop()
        yield name, value
        t = type(value)
        if (t is list or t is dict) and depth < INSIDE_DEPTH and left > 0:
            items = list(islice(value.items() if t is dict else enumerate(value), left))
            left -= len(items)
            more = [(f"{name}[{k!r}]", v, depth + 1) for k, v in items]
            inner.update(n for n, _, _ in more)
            stack.extend(reversed(more))


_WITHIN = 10_000  # items of list and dict arguments looked at, at most (a failure's path)


def _failing_line(exc: BaseException, fn: Callable[..., Any] | None
                  ) -> tuple[str | None, Mapping[str, Any]]:
    """The source line, in ``fn``'s file, of the innermost frame there (where its code
    made the write, or called what made it), and that frame's local names; None (and
    none) if there is no such frame or no source."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None, {}
    file = code.co_filename
    found = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == file:
            found = tb
        tb = tb.tb_next
    if found is None:
        return None, {}
    line = linecache.getline(file, found.tb_lineno).strip()
    return (line, found.tb_frame.f_locals) if line else (None, {})


def _aliases(line: str, local: Mapping[str, Any], values: dict[str, Any]
             ) -> list[tuple[str, str]]:
    """(how to name it, the argument) for each local name ``line`` mentions that is a
    read-only argument, or a view of one: ``m (pair[0])`` after ``m, v = pair``, ``m (a
    view of pair[0])`` after ``m = pair[0][:2]``."""
    found: list[tuple[str, str]] = []
    for word in dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", line)):
        a = local.get(word)
        bases: list[np.ndarray[Any, Any]] = []
        while is_array(a) and len(bases) < 64:  # (a view's chain, bounded)
            bases.append(a)
            a = a.base
        for n, v in values.items():
            if any(b is v for b in bases):
                found.append((f"{word} ({n})" if bases[0] is v else f"{word} (a view of {n})",
                              n))
                break
    return found
