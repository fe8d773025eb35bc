"""Why an array argument was read-only, for a call that failed writing into one.

A replica's operand cache (cache.py) hands every call that names an operand the same
array, made read-only so that no call changes what later calls see. A function that
writes into one in place (``b *= 2``) fails with numpy's bare "output array is
read-only" or "assignment destination is read-only", which says nothing of the cache.
`note` names the read-only arguments so the client's RemoteException can say it.

Only arguments delivered from the cache arrive read-only: the others are decoded into
memory of their own, writable on every transport. A process pool's child gets pickled
copies of the arguments, writable, so a call that failed there gets no note (replies.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["note"]


def note(exc: BaseException, message: str, fn: Callable[..., Any] | None,
         args: Sequence[Any], kwargs: dict[str, Any] | None) -> str | None:
    """The words to add to ``message`` (``exc``'s) when it is numpy's refusal to write a
    read-only array and the call had read-only array arguments; None otherwise."""
    if not isinstance(exc, ValueError) or "read-only" not in message:
        return None
    names = [name for name, value in _arguments(fn, args, kwargs or {})
             if isinstance(value, np.ndarray) and not value.flags.writeable]
    if not names:
        return None
    first = names[0]
    said = (f"{first} is a cached operand" if len(names) == 1 else
            f"{', '.join(names[:-1])} and {names[-1]} are cached operands")
    copy = (f"{first} = {first}.copy()" if first.isidentifier() else
            f"{first}.copy()" if first.endswith("]") else "x = x.copy()")
    return (f"{said}: cached operands are read-only and shared between calls, so copy one "
            f"before writing to it, e.g. {copy}")


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
