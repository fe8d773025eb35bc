"""The classes of remote exceptions whose remote type is a built-in exception class.

A served function that raises ValueError fails its call with a RemoteException whose
class is ``RemoteValueError``, a subclass of RemoteException and of ValueError, so that
a program's ``except ValueError`` catches it, as it would the function's own exception
had it run in the program (errors.RemoteException). Each such class is made once, on
first use, and is found by its name here (``polybus.remotetypes.RemoteValueError``),
as pickle finds a class.
"""

from __future__ import annotations

import builtins
import threading
import traceback
from typing import Any

from polybus.errors import RemoteException

__all__ = ["remote_class"]

# A remote type that is one of these is not made an instance of it: a StopIteration
# raised out of a generator is a RuntimeError there (PEP 479), and an exception group
# is built of the exceptions it holds, which a remote one has not. Nor an AttributeError:
# a promise is used by its attributes (client/promise.py), and Python reads an
# AttributeError from an attribute lookup as the attribute's absence (hasattr's False,
# getattr's default, isinstance through ``__class__``), which would hide the failure.
_NOT_TAKEN: tuple[type[BaseException], ...] = (StopIteration, StopAsyncIteration,
                                                BaseExceptionGroup, AttributeError)
_classes: dict[type[Exception], type[RemoteException]] = {}
_classes_lock = threading.Lock()


def remote_class(remote_type: str) -> type[RemoteException]:
    """The class of a RemoteException whose remote type is ``remote_type``: for a
    built-in subclass of Exception (``ValueError``) a subclass of RemoteException and of
    it, ``RemoteValueError``, made once; else RemoteException. Not for a type whose
    instance could not be a RemoteException too: `_NOT_TAKEN`, and one that cannot be
    made a base beside it or whose instance would not show its message as a
    RemoteException does (``SyntaxError``: Python's traceback shows its own fields)."""
    base = getattr(builtins, remote_type, None) if remote_type.isidentifier() else None
    if not (isinstance(base, type) and issubclass(base, Exception) and base is not Exception
            and not issubclass(base, _NOT_TAKEN)):
        return RemoteException
    cls = _classes.get(base)
    if cls is None:
        made = _made(base)
        with _classes_lock:
            cls = _classes.setdefault(base, made)
    return cls


def _made(base: type[Exception]) -> type[RemoteException]:
    name = f"Remote{base.__name__}"
    try:
        cls = type(name, (RemoteException, base), {
            "__module__": __name__, "__qualname__": name,
            "__doc__": f"A RemoteException whose remote type is {base.__name__}: caught "
                       f"by ``except {base.__name__}`` too."})
        probe = cls(base.__name__, "m", "tb\n", interface="f", replica="r")
        text = "m (raised in f on r)\n--- remote traceback ---\ntb\n"
        shown = traceback.format_exception_only(cls, probe)
        if str(probe) != f"{base.__name__}: {text}" or text.splitlines()[0] not in shown[0]:
            return RemoteException
    except Exception:  # (a layout that cannot be combined, a constructor that refuses)
        return RemoteException
    return cls


def __getattr__(name: str) -> Any:
    """``RemoteValueError`` and its like, made on first use (`remote_class`): a class
    pickled by its name is found again."""
    cls = remote_class(name[6:]) if name.startswith("Remote") else RemoteException
    if cls is not RemoteException and cls.__name__ == name:
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
