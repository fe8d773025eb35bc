"""Where a client program was when an exception came out of it: the traceback from its
own entrypoint down (`client_traceback`: the frames of polybus that called it say
nothing one can act on), and, for a stop (Ctrl-C, SIGTERM, a time limit), the line it
was at and what it was waiting for (`where_stopped`), for `polybus run` and `sweep`."""

from __future__ import annotations

from contextlib import contextmanager
from types import TracebackType

from polybus.ownfiles import is_library_file, is_polybus_file

__all__ = ["client_traceback", "error_text", "where_stopped"]


def client_traceback(exc: BaseException) -> TracebackType | None:
    """``exc``'s traceback from the frame `run` called the user's entrypoint in, if the
    exception came out of that call (the client program raised it); else None. (The
    frames of polybus that called it say nothing one can act on.)"""
    from polybus.runner import run  # (the frame that called the entrypoint is run's)

    code = run.__code__
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            below = tb.tb_next  # (the entrypoint's; not polybus's, nor a `with`'s enter)
            name = "" if below is None else below.tb_frame.f_code.co_filename
            if not name or name == contextmanager.__code__.co_filename or is_polybus_file(name):
                return None
            return below
        tb = tb.tb_next
    return None


def where_stopped(exc: BaseException) -> str:
    """Where the program was when ``exc`` (Ctrl-C, SIGTERM, a time limit) stopped it:
    " while the program was at FILE, line N, in FUNC" (its innermost frame in a file of
    its own: not polybus's, nor the standard library's or an installed package's, unless
    there is none) and "; it was waiting for ..." (the notes a wait adds: client/calls.py
    ``waiting_for``, drain.py); "" if it came from none of the program's lines."""
    tb = client_traceback(exc)
    line = own = ""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not is_polybus_file(name):
            line = (f" while the program was at {name}, line {tb.tb_lineno}, in "
                    f"{tb.tb_frame.f_code.co_name}")
            if not is_library_file(name):
                own = line
        tb = tb.tb_next
    notes = "; ".join(n for n in getattr(exc, "__notes__", ()) if n.startswith("it was "))
    return (own or line) + (f"; {notes}" if notes else "")


def error_text(exc: Exception | SystemExit) -> str:
    """A failed cell's error: its first line says what, and an exception the client
    program raised keeps its traceback from the entrypoint down below it, as `run`
    shows it (the cell's first line in the table, the whole in --json/--csv). A
    program's sys.exit says the status it asked for."""
    from polybus.errors import PolybusError
    from polybus.usernames import format_exception

    what = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    if isinstance(exc, SystemExit):
        code = exc.code
        status = 0 if code is None else code if isinstance(code, int) else 1
        what += f" (the program exited, status {status})"
    tb = None if isinstance(exc, PolybusError) else client_traceback(exc)
    if tb is None:
        return what
    return what + "\n" + "".join(format_exception(exc, tb)).rstrip()  # (client.InputError)
