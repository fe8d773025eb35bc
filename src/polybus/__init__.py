"""polybus: distributed programs from plain Python modules; strategy lives in the configuration.

The whole public face::

    from polybus import as_completed, use, wait, run

    compare = use("compare")          # in a client module: an interface the config binds
    value = wait(promise)             # force an overlapped call's answer
    for p in as_completed(promises):  # the first answered first
    out = run("app.toml", {"modules.server.replication": 4})   # from Python

and the errors a client catches (`RemoteException`: what a server's function raised;
`CancelledError`: a promise whose call was cancelled; the rest of polybus.errors is
there too).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from polybus.deadline import RunTimeout
from polybus.errors import (
    BusyError,
    CallTimeoutError,
    CancelledError,
    ConfigError,
    NoReplicaError,
    PolybusError,
    RemoteError,
    RemoteException,
    WorkerDiedError,
)

if TYPE_CHECKING:
    from polybus.client.broadcast import broadcast
    from polybus.client.completion import as_completed
    from polybus.client.promise import Promise, wait
    from polybus.client.stubs import use
    from polybus.runner import RunResult

__version__ = "0.1.0"
__all__ = ["BusyError", "CallTimeoutError", "CancelledError", "ConfigError", "NoReplicaError",
           "PolybusError", "Promise", "RemoteError", "RemoteException", "RunResult", "RunTimeout",
           "WorkerDiedError",
           "__version__", "as_completed", "broadcast", "run", "use", "wait"]


def run(path: Any, overrides: Any = (), *, registry: str | None = None,
        token_file: str | None = None, worker_output: Any = True,
        timeout: float | str | None = None, **kwargs: Any) -> RunResult:
    """Run the program the configuration ``path`` describes and return its result and
    figures (``.result``, ``.elapsed_s``, ``.calls``, ``.replicas``, ``.summary()``).

    ``overrides``: ``{"modules.server.replication": 4}`` (or ``["key=value", ...]``).
    ``registry`` (HOST:PORT): use the workers registered there instead of starting any,
    with the token from ``token_file`` (else $POLYBUS_TOKEN). ``worker_output``: where
    the started workers' lines go, ``True`` (``sys.stderr``), a text stream, or
    ``False``. ``timeout`` (seconds, or ``"2m"``; main thread only): stop the program
    after that long, raising `polybus.RunTimeout`. More: `polybus.runner.run`."""
    from polybus.runner import run as _run

    return _run(path, overrides, registry=registry, token_file=token_file,
                worker_output=worker_output, timeout=timeout, **kwargs)


# Imported when first asked for (``from polybus import use`` in a program's module): the
# client's modules pull in the configuration, the transports and numpy, 0.2 s that
# every `polybus` command paid before its first line ran, when a Ctrl-C could only
# print a traceback of imports (cli/main.py says "interrupted" from its first line).
_LAZY = {"as_completed": "polybus.client.completion", "broadcast": "polybus.client.broadcast",
         "Promise": "polybus.client.promise", "wait": "polybus.client.promise",
         "use": "polybus.client.stubs", "RunResult": "polybus.runner"}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'polybus' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value  # (asked once)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
