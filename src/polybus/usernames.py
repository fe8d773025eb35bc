"""The names a user's modules are imported under, and the names a user is shown.

A module of the configuration is imported as ``polybus_user_<key>`` (so its key cannot
shadow a module of the same name that it or polybus imports), but the user knows it as
``<key>``: an exception class it defines is shown as ``server.InputError``, never under
the internal name. Imports nothing of polybus, so a process-pool child can use it cheaply.
"""

from __future__ import annotations

import re
import traceback
from types import TracebackType

__all__ = ["PREFIX", "format_exception", "import_name", "key_of", "shown_names", "type_name"]

PREFIX = "polybus_user_"
# polybus's own errors are shown by their names alone (``UsageError``), as a replica's
# other failures of polybus's name theirs (``MessageTooLarge``, ``WorkerDiedError``)
_OWN = "polybus.errors"
_REMOTE = "polybus.remotetypes"  # (RemoteValueError and its like)


def import_name(key: str) -> str:
    """The name module ``key`` is imported under (its ``sys.modules`` entry)."""
    return PREFIX + key


def key_of(module: str) -> str:
    """The name the user knows a module by: its key for one of theirs, else ``module``."""
    return module.removeprefix(PREFIX)


def type_name(kind: type) -> str:
    """An exception type's name as a user knows it: ``ValueError``, ``server.InputError``
    (a traceback's way of naming it, with the user's module under its key),
    ``UsageError`` (polybus's own; a RemoteException of a built-in type, a
    ``RemoteValueError``, as ``RemoteException``)."""
    mod = kind.__module__
    if mod in ("builtins", "__main__", _OWN):
        return kind.__qualname__
    if mod == _REMOTE:
        return getattr(kind, "_reported_as", kind.__qualname__)
    return f"{key_of(mod)}.{kind.__qualname__}"


def _chained(exc: BaseException) -> list[BaseException]:
    """``exc`` and each exception chained to it (cause, context, a group's members)."""
    out: list[BaseException] = []
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        out.append(e)
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]
        if isinstance(e, BaseExceptionGroup):
            todo += list(e.exceptions)
    return out


def format_exception(exc: BaseException, tb: TracebackType | None) -> list[str]:
    """``traceback.format_exception`` of ``exc`` with ``tb`` (its lines, as that gives
    them), each exception of a user's module named as ``type_name`` names it (the line
    ``server.InputError: ...``)."""
    return shown_names(exc, traceback.format_exception(type(exc), exc, tb))


def shown_names(exc: BaseException, lines: list[str]) -> list[str]:
    """``lines``, formatted from ``exc`` (``traceback.format_exception``, or its
    ``_only``), with each exception of a user's module, or of polybus's own, named as
    ``type_name`` names it: a module's import error says ``server.InputError``, as a
    call's does."""
    for e in _chained(exc):
        kind = type(e)
        if isinstance(kind.__module__, str) and (kind.__module__.startswith(PREFIX)
                                                 or kind.__module__ in (_OWN, _REMOTE)):
            internal, shown = f"{kind.__module__}.{kind.__qualname__}", type_name(kind)
            lines = [_renamed(line, internal, shown) for line in lines]
    return lines


def _renamed(text: str, internal: str, shown: str) -> str:
    """``text`` with ``internal`` as ``shown`` where it begins a line (after the indent
    and '|' of a group's members) and its message follows: frames and messages stay."""
    pattern = re.compile(rf"^([ |]*){re.escape(internal)}(?=:|$)", re.MULTILINE)
    return pattern.sub(lambda m: m.group(1) + shown, text)
