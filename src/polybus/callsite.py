"""Where in the user's client code a remote error came out, and, for a call whose
arguments do not fit the function, the function's signature.

A remote error's own traceback is the replica's; the user also needs the line of their
client module that made the call (or used its promise). ``place`` finds it in the local
traceback as the innermost frame outside polybus (and outside the standard library and
installed packages, when the program has a frame of its own above theirs), and rewrites
the error's message to name it. A ``TypeError`` that the function's own call raised (wrong number or names of
arguments, the replica's traceback never entering the user's function) gets the
function's signature and file:line instead of that traceback, which shows only
polybus's frame.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

from polybus.client.promise import Promise
from polybus.config.model import AppConfig
from polybus.config.source import FunctionInfo, inspect_source
from polybus.errors import (
    ConfigError,
    ConnectionLostError,
    MessageTooLarge,
    NoReplicaError,
    RemoteError,
    RemoteException,
    UsageError,
)
from polybus.ownfiles import is_library_file
from polybus.usercode import is_polybus_frame

__all__ = ["PLACED", "place"]

# What `place` names the user's line in: a call that failed (the function raised, timed
# out, or lost every replica), or one the client could not make (an argument it cannot
# send, a message over the frame limit).
PLACED = (RemoteError | UsageError | ConnectionLostError | NoReplicaError
          | MessageTooLarge)  # (isinstance too)

_STUBS = str(Path(__file__).resolve().parent / "client" / "stubs.py")
_BROADCAST = str(Path(__file__).resolve().parent / "client" / "broadcast.py")
_ARGUMENTS = re.compile(r"(?:takes|missing|got) ")
# The signature a replica adds to such a message (worker/replies.py), itself
_REPLICA_NOTE = re.compile(r" \(the function is [^\n]*\)(?= \(raised in |$)")


def _user_frame(exc: BaseException) -> tuple[traceback.FrameSummary, str,
                                             tuple[str | None, bool] | None] | None:
    """The innermost frame of the user's code (of the program's own files, when a
    library's frames are below it), what it did there: "the call" (the next frame is a
    stub's ``__call__``), "the broadcast" (`polybus.broadcast`), or else the use of a
    promise; and for a call, the name of the stub it called (``use("rate")``: "rate")
    and whether the error came out of a promise given to it (`_stub_name`)."""
    frames = traceback.extract_tb(exc.__traceback__)
    outside = [i for i in range(len(frames)) if not is_polybus_frame(frames[i])]
    # (the program's own line, not a library's that used the promise: numpy's mean)
    own = [i for i in outside if not is_library_file(frames[i].filename)]
    if not outside:
        return None
    i = (own or outside)[-1]
    # (polybus's first frame below it: a stub's when the program, or a library it
    # handed the stub to, made the call)
    k = next((k for k in range(i + 1, len(frames)) if is_polybus_frame(frames[k])), None)
    inner = frames[k].filename if k is not None else None
    what = ("the call" if inner == _STUBS else "the broadcast" if inner == _BROADCAST
            else "the call whose answer was used")
    if inner != _STUBS:
        return frames[i], what, None
    return frames[i], what, _stub_name(exc, k)


def _stub_name(exc: BaseException, k: int | None) -> tuple[str | None, bool]:
    """The name of the stub whose ``__call__`` is frame ``k`` of ``exc``'s traceback, and
    whether ``exc`` came out of a promise's value taken below it: a promise the call
    was given (an argument sent by value, a priority read), whose call had failed. (No
    call waits for its own answer through a promise: a sync call waits for its record.)"""
    tb = exc.__traceback__
    for _ in range(k or 0):
        tb = tb.tb_next if tb is not None else None
    name = getattr(tb.tb_frame.f_locals.get("self"), "name", None) if tb else None
    given = False
    while tb is not None and not given:
        given = (tb.tb_frame.f_code.co_name == "__polybus_value__"
                 and isinstance(tb.tb_frame.f_locals.get("self"), Promise))
        tb = tb.tb_next
    return (name if isinstance(name, str) else None), given


def _passed(exc: BaseException, app: AppConfig | None, client: str,
            stub: tuple[str | None, bool] | None) -> str | None:
    """The stub's name, when the call the program made at its line (``stub(...)``) is
    not the call whose error came out there: a promise of a call that had failed, passed
    to it. Its value was taken in the call (whatever the two calls' interfaces: the same
    in ``render(render(x))``), or the binding ``stub`` names serves another interface
    than the one that raised."""
    interface = getattr(exc, "interface", "")
    if stub is None or stub[0] is None or app is None or not isinstance(exc, RemoteError) \
            or not interface:
        return None
    name, given = stub
    if given:
        return name
    bound = next((b for b in app.bindings if b.user == client and b.name == name), None)
    return name if bound is not None and bound.interface != interface else None


def _served(app: AppConfig, client: str, interface: str) -> tuple[Path, FunctionInfo] | None:
    """The source file and function that ``interface``, as ``client`` binds it, runs."""
    for b in app.bindings:
        if b.user == client and b.interface == interface:
            source = app.modules[b.module].source
            try:
                info = inspect_source(source, client=False)
            except ConfigError:
                return None
            fn = info.function(interface)  # (a def of the module, or one it imports)
            return (info.file_of(fn), fn) if fn is not None else None
    return None


def _bad_arguments(exc: RemoteException, source: Path) -> bool:
    """The call of the function raised, before its first line ran."""
    return (exc.remote_type == "TypeError"
            and exc.remote_message.startswith(f"{exc.interface}() ")
            and _ARGUMENTS.match(exc.remote_message, len(exc.interface) + 3) is not None
            and f'File "{source}"' not in exc.remote_traceback)


def place(exc: PLACED, app: AppConfig, client: str,
          returned_by: str | None = None) -> None:
    """Name the user's line (and, for arguments that do not fit, the signature) in ``exc``:
    a remote error, a call lost with every replica, or a call the client could not make
    (an unbound name, an argument that cannot be sent, a message over the frame limit,
    nobody serving it), whose one-line message said nothing of where. ``returned_by``:
    the entrypoint, when ``exc`` came out of waiting for the value it returned (a
    promise it did not wait for itself: no line of the user's is on the stack then)."""
    if exc.call_site is not None:
        return
    # Which call (its arguments short), when the error knows: calls.error_from
    call = f"the call {exc.call}" if isinstance(exc, RemoteError) and exc.call else "the call"
    found = _user_frame(exc)
    if found is None:
        if returned_by is not None:
            head, _, rest = str(exc).partition("\n")
            exc.args = (f"{head}\n  {call} whose promise {returned_by}() returned, waited "
                        "for when it returned" + (f"\n{rest}" if rest else ""),)
        return
    frame, what, stub = found
    if (to := _passed(exc, app, client, stub)) is not None:
        what = f"the call whose promise was passed to {to}(...)"
    if what.startswith("the call"):
        what = call + what[len("the call"):]
    exc.call_site = f"{frame.filename}:{frame.lineno}"
    at = (f'  {what} at File "{frame.filename}", line {frame.lineno}, in {frame.name}'
          + (f":\n    {frame.line}" if frame.line else ""))
    head, _, rest = str(exc).partition("\n")
    served = _served(app, client, exc.interface) if isinstance(exc, RemoteException) else None
    if isinstance(exc, RemoteException) and served is not None and _bad_arguments(exc, served[0]):
        source, fn = served
        head = _REPLICA_NOTE.sub("", head)  # (the replica's own note: said below, with where)
        exc.args = (f"{head}\n{at}\n  does not fit {fn.signature}, defined at "
                    f'File "{source}", line {fn.lineno}',)
        return
    exc.args = (f"{head}\n{at}" + (f"\n{rest}" if rest else ""),)
