"""Calls to a module with ``replication = 0``: plain Python calls in the client process.

Such a module has no worker (config/inclient.py): its file is imported once into the
client process, as a worker would import it (its own folder first on ``sys.path``, its
own globals, under the name a worker gives it: usernames.py), and each call of a binding
to it calls the function in the calling thread. This is the sequential baseline of a
speedup: the program's work done by the client alone, with the same module files.

The program sees what it would see with replicas, at the same point:

- ``sync`` returns the value; ``async`` and ``async-demand`` run the call at once and
  return a promise already answered (`DonePromise`: a `Promise`, so ``polybus.wait``,
  ``as_completed`` and using it as its value work as for any promise);
- a function that raises gives the `RemoteException` a replica's failure gives (its
  ``remote_type``, message and traceback, made by the worker's own steps), raised by a
  sync call, and by an async call's promise where it is used; one never used is said
  as a replica's is (client/unseen.py); a failed promise passed to another async call
  fails that call's promise as an upstream failure (client/done.py).

Arguments are passed as they are: not copied, not encoded (a promise or a broadcast
handle among them is given as its value, as a replica would receive it). So a function
that changes an argument in place changes the caller's object here, and a value it
returns is the object itself (a tuple stays a tuple); a replica works on a copy.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from polybus.client.calls import error_from
from polybus.client.calltext import call_text
from polybus.client.done import DonePromise, consumer_failure
from polybus.client.promise import Promise
from polybus.client.shared import Shared
from polybus.client.stubs import SERVED_HERE, importing, serving
from polybus.client.unseen import failed, raised, raised_before
from polybus.config.model import AppConfig, Binding, UseSpec
from polybus.errors import PolybusError
from polybus.usernames import import_name
from polybus.worker.module import interfaces, load_module
from polybus.worker.replies import failure

__all__ = ["DonePromise", "InClient", "in_client", "release"]

# Entries made and not yet released, by their module's import name: its name leaves
# SERVED_HERE with the last (a nested run's end leaves the outer run's in place).
_entries: Counter[str] = Counter()
# Arguments passed on at once (nothing in them can be a promise or a handle)
_LEAF = frozenset({int, float, bool, str, bytes, type(None), complex, np.ndarray})


class InClient:
    """A use()d name bound to a module with ``replication = 0``: calls ``fn`` in the
    calling thread (the session's entry for it: ``Session.local``)."""

    __slots__ = ("calls", "fn", "home", "interface", "module", "sync")

    def __init__(self, fn: Callable[..., Any], interface: str, module: str,
                 home: ModuleType, sync: bool) -> None:
        self.fn = fn
        self.interface = interface
        self.module = module
        self.home = home  # (the module, imported here: its functions' globals)
        self.sync = sync
        self.calls = 0

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.calls += 1
        if not all(type(a) in _LEAF for a in args) or (
                kwargs and not all(type(v) in _LEAF for v in kwargs.values())):
            if not self.sync:  # (a failed promise passed: this call's promise fails)
                got = self._values(args, kwargs)
                if type(got) is DonePromise:
                    return got
                args, kwargs = got
            else:
                args = tuple(_value(a) for a in args)
                kwargs = {k: _value(v) for k, v in kwargs.items()}
        try:
            value = self.fn(*args, **kwargs)
        except KeyboardInterrupt:  # (Ctrl-C, a run's time limit: the program's to stop)
            raise
        except BaseException as exc:  # (sys.exit() too: as a replica, the call fails alone)
            error = self.failure(exc, args, kwargs)
            if self.sync:
                raise raised(error) from None
            return DonePromise(None, error, self.interface)
        return value if self.sync else DonePromise(value, None, self.interface)

    def _values(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> DonePromise | tuple[tuple[Any, ...], dict[str, Any]]:
        """The values of an async call's arguments; or, if a promise among them (not
        inside one: client/awaiting.py) failed, this call's failed promise, as a replica's
        consumer's (client/done.py)."""
        values = []
        for a in (*args, *kwargs.values()):
            if isinstance(a, Promise):
                try:
                    values.append(a.__polybus_value__())
                except PolybusError as error:
                    if raised_before(error, 1):  # (the program saw it fail: an answered
                        raise  # failed promise, which a replica's call raises at once)
                    return consumer_failure(self.interface, a, error, args, kwargs)
            else:
                values.append(_value(a))
        n = len(args)
        return tuple(values[:n]), dict(zip(kwargs, values[n:], strict=True))

    def failure(self, exc: BaseException, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> PolybusError:
        """The error a replica's failure with ``exc`` would give (worker/replies.py's
        Fail, read as the client reads one: calls.py `error_from`)."""
        fail = failure(0, exc, self.fn, args, kwargs)
        error = error_from(fail, self.interface, "", call=call_text(self.interface, args, kwargs))
        failed(error)  # (counted as a call's failure: unseen.py)
        return error


def _value(x: Any) -> Any:
    """An argument as a replica would receive it: a promise as its value, a broadcast
    handle as its value, and a list, tuple or dict holding either rebuilt with their
    values (`polybus.wait`'s copy); anything else as it is."""
    t = type(x)
    if t in _LEAF:
        return x
    if isinstance(x, Promise):
        return x.__polybus_value__()
    if t is Shared:
        return x.value
    if t is list or t is tuple or t is dict or (issubclass(t, tuple) and hasattr(t, "_fields")):
        from polybus.client.wireargs import holds_promise

        if not holds_promise(x):
            return x
        if t is dict:
            return {k: _value(v) for k, v in x.items()}
        items = [_value(v) for v in x]
        return items if t is list else tuple(items) if t is tuple else t._make(items)
    return x


def in_client(app: AppConfig, b: Binding, use: UseSpec, made: Mapping[str, InClient]
              ) -> InClient:
    """The entry of binding ``b`` to a module with ``replication = 0``: its function, from
    the module's file imported once into this process as a worker imports it (``made``:
    the entries made so far, whose module is used again). A use() call made at its
    import is told what a replica's is (client/stubs.py)."""
    home = next((e.home for e in made.values() if e.module == b.module), None)
    if home is None:
        serving(b.module)
        try:
            home = load_module(app.modules[b.module].source, import_name(b.module))
        finally:
            importing(None)
    fn = interfaces(home, [b.interface])[b.interface]
    SERVED_HERE.add(home.__name__)  # (its use() calls refused: stubs.py)
    _entries[home.__name__] += 1
    return InClient(fn, b.interface, b.module, home, use.callstyle.kind == "sync")


def release(made: Mapping[str, InClient]) -> None:
    """As the run ends, the modules imported for ``made`` leave ``sys.modules``, as a
    replica's leave with its process: the next run imports the file afresh in any case
    (`in_client`), and a process that lives on (a notebook's kernel) does not keep the
    module's globals alive for nothing. Objects of it the program kept keep it alive."""
    for e in made.values():
        name = e.home.__name__
        _entries[name] -= 1
        if _entries[name] <= 0:  # (a run nested in another's entrypoint: the outer's
            del _entries[name]   # module of the same key is still called in the client)
            SERVED_HERE.discard(name)
        if sys.modules.get(name) is e.home:
            del sys.modules[name]
