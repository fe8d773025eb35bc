"""The one exception tree of polybus.

Local mistakes (yours, found before or without the network) are kept apart from remote
failures (something on the other side went wrong), so a caller can catch exactly what
it can act on::

    PolybusError
    ├── ConfigError                 a configuration mistake (file, key, what, nearest name)
    ├── UsageError                  the API used wrongly (use() outside a run, bad argument)
    │   ├── UnsendableError         a call's argument the codec cannot carry (also a TypeError)
    │   ├── PriorityError           an interface's priority expression failed on a call's
    │   │                           arguments (also a TypeError)
    │   └── StalePromiseError       a promise of a run that has ended unanswered was used
    │                               (waited for, or passed to a call of another run)
    ├── ModuleImportError           a user's module failed to import (module, file, line)
    ├── ProtocolError               a peer broke the wire protocol (malformed, oversized frame)
    │   ├── AuthenticationError     a peer did not prove it holds the cluster token
    │   └── MessageTooLarge         a message to send is over the frame limit (also a ValueError)
    ├── TransportError              a connection could not be made or broke
    │   ├── ConnectionLostError     an established connection closed under a call
    │   └── TLSHandshakeError       the mutual TLS of [cluster] tls did not come about
    ├── NoReplicaError              nobody serves the interface that was called
    ├── CancelledError              the call was cancelled before it ran (``p.cancel()``
    │                               returned True), or a call whose value it needed was;
    │                               also a concurrent.futures.CancelledError
    └── RemoteError                 a call was accepted but did not produce a value
        ├── RemoteException         the module function raised (remote type, message, traceback);
        │                           of a built-in type, an instance of that type too
        │                           (RemoteValueError: a RemoteException and a ValueError)
        ├── CallTimeoutError        the call's deadline passed before its answer came
        ├── BusyError               the replica's queue was full and overflow = "reject"
        ├── WorkerDiedError         the replica (or its pool process) died holding a call that
        │                           must not be re-run
        └── PoisonCallError         the call killed several replicas in a row (or its
                                    replica's process pool twice)

Apart from the tree, ``polybus.RunTimeout`` (deadline.py) is a KeyboardInterrupt: a run
stopped by its time limit unwinds as Ctrl-C would.

Nothing here ever carries the cluster token or a key in its message.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

__all__ = [
    "CANCELLED_TYPE",
    "UPSTREAM_FAILED",
    "AuthenticationError",
    "BusyError",
    "CallTimeoutError",
    "CancelledError",
    "ConfigError",
    "ConfigWarning",
    "ConnectionLostError",
    "MessageTooLarge",
    "ModuleImportError",
    "NoReplicaError",
    "PoisonCallError",
    "PolybusError",
    "PriorityError",
    "ProtocolError",
    "RemoteError",
    "RemoteException",
    "StalePromiseError",
    "TransportError",
    "UnsendableError",
    "UsageError",
    "WorkerDiedError",
    "error_line",
    "reported_name",
]


class PolybusError(Exception):
    """Base of every error polybus raises."""


class ConfigError(PolybusError):
    """A configuration mistake, found before any process starts.

    ``file`` and ``key`` say where (``key`` is a dotted path such as
    ``modules.client.use.compare.callstyle``); ``hint`` is the nearest valid name or the
    form that was expected, when there is one.
    """

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None,
                 hint: str | None = None, line: int | None = None) -> None:
        self.file = file
        self.key = key
        self.hint = hint
        self.line = line  # (of a TOML file: the line that wrote ``key``, if found)
        self.bare_message = message
        at = f"{file}:{line}" if file and line is not None else file
        where = ": ".join(p for p in (at, key) if p)
        text = f"{where}: {message}" if where else message
        if hint:
            text += f" ({hint})"
        super().__init__(text)


class ConfigWarning(UserWarning):
    """A likely configuration mistake the files cannot prove (a binding nothing uses):
    said, and the program runs. Formatted like a ConfigError (file, key, hint)."""


class UsageError(PolybusError):
    """The public API was used in a way it does not support.

    ``call_site`` is ``FILE:LINE`` of the user's client code that made the call, once
    ``polybus.run`` has placed it (as for a RemoteError).
    """

    call_site: str | None = None


class UnsendableError(UsageError, TypeError):
    """A call's argument the connection's codec cannot carry (an ``object()``, or anything
    unpicklable where pickle is on). The message names the interface and the argument;
    nothing of the call was sent. A TypeError too, as the codec's own error was."""


class PriorityError(UsageError, TypeError):
    """An interface's ``priority`` expression could not be computed for a call (the
    call's arguments do not bind, or the expression raised on them: ``len`` of a float,
    a key an argument lacks, a result that is not a number). The message names the
    interface, the expression, its configuration key and the reason; the call was not
    made. A TypeError too, as a call the function could not take always was."""


class StalePromiseError(UsageError):
    """A promise whose call was still unanswered when its run ended was used after that:
    waited for (``polybus.wait``, any use of its value), or passed to a call of a later
    run. The run's end closed its connections (and stopped the replicas it started), so
    its answer will never come. The message names the call and the replica it was on;
    use a promise's value within the run that made it (a promise answered by then keeps
    its value, and may be used or passed on later)."""


class ModuleImportError(PolybusError):
    """A user's module raised while it was imported (or lacks a function the configuration
    names). The message names the module's key, its file and the line, and shows only the
    user's own traceback frames; ``line`` is None when no frame is in the module's file."""

    # Defaults so that an unpickled copy (from a process pool's child) can be rebuilt.
    def __init__(self, message: str, *, module: str = "", file: str = "",
                 line: int | None = None) -> None:
        self.module = module
        self.file = file
        self.line = line
        super().__init__(message)


class ProtocolError(PolybusError):
    """A peer sent something that is not valid polybus protocol."""


class AuthenticationError(ProtocolError):
    """A peer failed the token handshake; nothing it sent was decoded."""


class MessageTooLarge(ProtocolError, ValueError):
    """A message to send is over the frame limit (``[cluster] max_frame``). Raised before
    a byte of it is written: the call fails alone, and the connection is as it was.

    ``call_site``: as for an UnsendableError, when a call of the program's failed with it.
    """

    call_site: str | None = None


class TransportError(PolybusError):
    """A connection could not be made, or failed."""


class TLSHandshakeError(TransportError):
    """A peer was reached, but the mutual TLS of ``[cluster] tls`` did not come about
    between the two: one side speaks no TLS, or a certificate was refused; or, on a plain
    connection, the peer sent no polybus greeting (as a TLS peer sends none). The message
    says which, rather than that nothing answers."""


class ConnectionLostError(TransportError):
    """An established connection closed while calls were outstanding on it.

    ``heartbeat`` (seconds) is set when the client closed it itself: the replica sent
    nothing for three heartbeats while it held calls, and was taken for dead though its
    process may well be alive (a call holding the GIL keeps it from answering a Ping).
    ``call_site``: as for a RemoteError, when a call failed with it. ``killed`` is set
    (client/session.py) when the worker of the replica, and of each of its module's
    replicas lost before it, was killed by SIGKILL: from outside any call; ``stopped``
    when each was ended so or stopped (a stop signal, or the clean end an engine's
    worker makes of one, status 0), some of them stopped.
    """

    call_site: str | None = None
    killed = False
    stopped = False

    def __init__(self, message: str, *, heartbeat: float | None = None) -> None:
        self.heartbeat = heartbeat
        super().__init__(message)


class NoReplicaError(PolybusError):
    """No replica serves the interface that was called. ``call_site``: as for a
    RemoteError."""

    call_site: str | None = None


class CancelledError(PolybusError, concurrent.futures.CancelledError):
    """The call was cancelled: ``p.cancel()`` returned True, so it never ran and never
    will (client/cancel.py); using its promise's value (``polybus.wait(p)``,
    ``p.result()``, passing it to another call) raises this. A subclass of
    ``concurrent.futures.CancelledError``, so code ported from concurrent.futures or
    Dask catches it as it did.

    A call whose promise argument was cancelled after it was made (it needed that value,
    which will never be) fails with it too, ``upstream`` then naming the cancelled call
    (its own ``p.cancelled()`` stays False: it was not cancelled, its input was).
    ``interface`` and ``call`` name the call itself, as a RemoteError's do; ``call_site``
    is where the program used it, once ``polybus.run`` has placed it."""

    call_site: str | None = None

    def __init__(self, message: str, *, interface: str = "", call: str = "",
                 upstream: str = "") -> None:
        self.interface = interface
        self.call = call
        self.upstream = upstream
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return _cancelled, (str(self), dict(self.__dict__))


def _cancelled(message: str, state: dict[str, Any]) -> CancelledError:
    e = CancelledError(message)
    e.__dict__.update(state)
    return e


# The type a forwarded failure names when the value it stands for will never be because
# its call was cancelled (client/forward.py): the consumer's replica fails the consumer
# with it, and the client makes that failure a CancelledError (client/calls.py).
CANCELLED_TYPE = "polybus.CancelledError"


class RemoteError(PolybusError):
    """A call was accepted but ended without a value.

    ``call_site`` is ``FILE:LINE`` of the user's code where the error came out of the
    client (the call, or where its promise was used), once ``polybus.run`` has placed it.
    ``call`` is the call as text, its arguments short (``boom(3)``; "" if not known):
    which of the program's calls to the interface it was.
    """

    call_site: str | None = None

    def __init__(self, message: str, *, interface: str = "", replica: str = "",
                 call: str = "") -> None:
        self.interface = interface
        self.replica = replica
        self.call = call
        # (BaseException's own: a RemoteException of a built-in type has that type as a
        # base too, whose __init__ would take other arguments, UnicodeDecodeError's five)
        BaseException.__init__(self, message)


# How a replica begins the message of a call it fails because a forwarded value it
# waited for failed upstream (worker/forwarding.py); the client names that call.
UPSTREAM_FAILED = "an upstream call failed: "


class RemoteException(RemoteError):
    """The module function raised on the replica.

    ``remote_type`` is the exception type's name as its module is known to the user
    (``ValueError``, ``server.InputError`` for a class of module ``server``), ``remote_message``
    its message and ``remote_traceback`` the formatted traceback from the replica.

    A remote type that is a built-in exception class (``ValueError``, ``KeyError``,
    ``OSError`` and its subclasses, ...) makes the error an instance of that class too:
    its class is then ``RemoteValueError`` (polybus/remotetypes.py), a subclass of
    RemoteException and of ValueError, so a program's ``except ValueError`` catches it
    as it would the function's own. Its text is a RemoteException's (not the built-in's:
    a KeyError's message is not quoted), and the built-in's own fields (an OSError's
    ``errno``) are None: a replica sends the type's name, the message and the traceback
    only. A class of the user's modules (``server.InputError``), which the client does
    not import, gives a RemoteException alone.
    """

    # (what polybus's reports, --json's "type", call the class: usernames.type_name)
    _reported_as = "RemoteException"

    def __new__(cls, remote_type: str, *args: Any, **kwargs: Any) -> RemoteException:
        from polybus.remotetypes import remote_class

        kind = remote_class(remote_type) if cls is RemoteException else cls
        # (no arguments: OSError's __new__ would read them as errno and strerror, and
        # refuses keywords; __init__ sets args)
        return super(RemoteException, kind).__new__(kind)

    def __init__(self, remote_type: str, remote_message: str, remote_traceback: str, *,
                 interface: str = "", replica: str = "", origin: str = "") -> None:
        self.remote_type = remote_type
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        self.origin = origin  # (an upstream failure: the call that raised it, "f on server-0")
        # A failure with no remote frames (a result the codec could not send) gets no
        # empty traceback section under its message, and is not said to be raised in a
        # function that returned.
        frames = bool(remote_traceback.strip())
        where = f"on {replica}" if replica else ""
        if remote_message.startswith(UPSTREAM_FAILED):
            # The call's replica answered for the call whose value it waited for
            # (forwarding): the frames are that call's, ``origin`` ("f on server-0").
            said = " ".join(filter(None, (
                ("raised" if frames else "failed") + (f" in {origin}," if origin else ""),
                "upstream of", interface or "this call", where)))
        else:
            said = " ".join(filter(None, (
                "raised" if frames else "",
                (f"in {interface}" if frames else f"from {interface}") if interface else "",
                where)))
        tb = f"\n--- remote traceback ---\n{remote_traceback}" if frames else ""
        super().__init__(f"{remote_type}: {remote_message} ({said or 'remote'}){tb}",
                         interface=interface, replica=replica)

    # Its text is its message, whatever built-in it is also (KeyError's str quotes it,
    # UnicodeDecodeError's reads fields this one has not).
    __str__ = BaseException.__str__
    __repr__ = BaseException.__repr__

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled and copied as what it is: BaseException's way called the class with
        # its text alone, which __init__ does not take.
        return _unpickled, (self.remote_type, self.remote_message, self.remote_traceback,
                            self.args, dict(self.__dict__))


def _unpickled(remote_type: str, remote_message: str, remote_traceback: str,
               args: tuple[Any, ...], state: dict[str, Any]) -> RemoteException:
    e = RemoteException(remote_type, remote_message, remote_traceback)
    e.args = args
    e.__dict__.update(state)
    return e


def reported_name(exc: BaseException) -> str:
    """The name of ``exc``'s class as polybus's reports give it (--json's ``"type"``,
    the count of failures never looked at): a RemoteException of a built-in type
    (``RemoteValueError``) is a ``RemoteException`` there, its remote type said apart."""
    return getattr(type(exc), "_reported_as", None) or type(exc).__name__


class CallTimeoutError(RemoteError):
    """The call's deadline passed; an answer arriving later is discarded."""


class BusyError(RemoteError):
    """The replica's queue was full and the interface is configured to reject."""


class WorkerDiedError(RemoteError):
    """The replica died holding the call, and the interface is not idempotent; or, under
    ``pool = "processes:N"``, the process of the replica's pool that ran it did (the
    replica serves on: worker/procpool.py)."""


class PoisonCallError(RemoteError):
    """The call was running on each of 3 replicas in a row when it died, the last time
    alone there (client/backlog.py); or, under ``pool = "processes:N"``, its replica's
    process pool broke with it in it, and again when it ran there alone
    (worker/procpool.py)."""


def error_line(exc: BaseException) -> str:
    """``exc`` as polybus's error line says it (``polybus run: error: ...``, and a worker's
    that could not start, under every engine): polybus's own error by its message
    alone, but a call's failure of a type of its own, one a program catches by name
    (BusyError, CallTimeoutError, WorkerDiedError, ..., and ConnectionLostError, a call
    lost with every replica, NoReplicaError and CancelledError, none of them a
    RemoteError: they were said by their message alone), led by that name, as a remote
    exception is led by the remote type (whose text has it); any other exception led by
    its type's name."""
    if not isinstance(exc, PolybusError) or isinstance(
            exc, ConnectionLostError | NoReplicaError | CancelledError) or (
            isinstance(exc, RemoteError) and type(exc) is not RemoteError
            and not isinstance(exc, RemoteException)):
        return f"{type(exc).__name__}: {exc}"
    return str(exc)
