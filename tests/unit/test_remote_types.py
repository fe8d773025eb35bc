"""A RemoteException of a built-in type is an instance of that type too (remotetypes.py).

Its class (``RemoteValueError``) is made once per type, a subclass of RemoteException
and of the built-in; its text, fields, pickling and copies are a RemoteException's; the
types that cannot be taken so (StopIteration, those that are not an Exception, those
whose layout or display does not allow it, the user's own) give a RemoteException alone.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from polybus.cli.cmd_run import error_doc
from polybus.client.unsendable import named
from polybus.errors import (
    PolybusError,
    RemoteError,
    RemoteException,
    UnsendableError,
    error_line,
    reported_name,
)
from polybus.remotetypes import remote_class
from polybus.usernames import type_name


def _remote(kind: str, message: str = "bad", tb: str = "tb\n", **kw: Any) -> RemoteException:
    return RemoteException(kind, message, tb, interface="f", replica="server-0", **kw)


@pytest.mark.parametrize("kind", [ValueError, KeyError, TypeError, ZeroDivisionError,
                                  IndexError, RuntimeError, OSError,
                                  FileNotFoundError, TimeoutError, ConnectionResetError,
                                  UnicodeDecodeError, ImportError, ModuleNotFoundError,
                                  NotImplementedError, AssertionError, UserWarning])
def test_a_builtin_type_is_caught_by_its_type_and_is_still_a_remote_exception(
        kind: type[Exception]) -> None:
    e = _remote(kind.__name__)
    with pytest.raises(kind) as caught:
        raise e
    assert caught.value is e
    assert isinstance(e, RemoteException) and isinstance(e, RemoteError)
    assert isinstance(e, PolybusError)
    assert type(e).__name__ == f"Remote{kind.__name__}"
    # its text is a RemoteException's, whatever the built-in's own str does (KeyError
    # quotes its argument; UnicodeDecodeError reads fields it has not)
    text = f"{kind.__name__}: bad (raised in f on server-0)\n--- remote traceback ---\ntb\n"
    assert str(e) == text and e.args == (text,)
    assert repr(e) == f"Remote{kind.__name__}({text!r})"
    assert (e.remote_type, e.remote_message, e.remote_traceback) == (kind.__name__, "bad", "tb\n")
    assert type(_remote(kind.__name__)) is type(e)  # (made once)


@pytest.mark.parametrize("kind", [
    "StopIteration", "StopAsyncIteration",  # (PEP 479: a RuntimeError in a generator)
    "KeyboardInterrupt", "SystemExit", "GeneratorExit",  # (not an Exception)
    "AttributeError",  # (a promise's attribute lookup would read it as a missing attribute)
    "ExceptionGroup", "SyntaxError", "IndentationError", "MemoryError", "Exception",
    "server.InputError", "InputError", "builtins.KeyError", "int", "print", "",
    "ValueError\n"])
def test_what_is_not_a_builtin_exception_it_can_be_gives_a_remote_exception_alone(
        kind: str) -> None:
    e = _remote(kind)
    assert type(e) is RemoteException and remote_class(kind) is RemoteException
    assert str(e).startswith(f"{kind}: bad (raised in f on server-0)")


def test_an_oserror_keeps_its_text_and_makes_up_no_errno() -> None:
    e = _remote("FileNotFoundError", "[Errno 2] No such file or directory: 'in.txt'")
    assert isinstance(e, FileNotFoundError) and isinstance(e, OSError)
    assert (e.errno, e.strerror, e.filename) == (None, None, None)
    assert str(e).startswith("FileNotFoundError: [Errno 2] No such file or directory: 'in.txt'")


@pytest.mark.parametrize("kind", ["ValueError", "OSError", "UnicodeDecodeError", "E"])
@pytest.mark.parametrize("how", ["pickle", "copy", "deepcopy"])
def test_it_pickles_and_copies_as_what_it_is(kind: str, how: str) -> None:
    e = _remote(kind, origin="g on server-1")
    e.call = "f(1)"
    e.call_site = "client.py:3"
    e.args = (str(e) + "\n  the call f(1) at ...",)  # (as callsite.place makes it)
    e.add_note("a note")
    got = (pickle.loads(pickle.dumps(e)) if how == "pickle"
           else copy.copy(e) if how == "copy" else copy.deepcopy(e))
    assert type(got) is type(e) and got is not e
    assert str(got) == str(e) and got.args == e.args
    assert [got.remote_type, got.remote_message, got.remote_traceback, got.interface,
            got.replica, got.origin, got.call, got.call_site, got.__notes__] == [
        kind, "bad", "tb\n", "f", "server-0", "g on server-1", "f(1)", "client.py:3",
        ["a note"]]


def test_its_class_is_found_by_its_name() -> None:
    cls = type(_remote("KeyError"))
    assert cls.__module__ == "polybus.remotetypes"
    assert pickle.loads(pickle.dumps(cls)) is cls
    import polybus.remotetypes as rt

    assert rt.RemoteKeyError is cls  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = rt.RemoteInputError  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = rt.RemoteIOError  # type: ignore[attr-defined]  # (an alias: OSError's is RemoteOSError)


def test_reports_call_it_a_remote_exception() -> None:
    """--json's "type", the count of failures never looked at and a nested call's
    remote type name the class as before; the error line is its text."""
    e = _remote("ValueError")
    assert reported_name(e) == "RemoteException" and reported_name(KeyError()) == "KeyError"
    assert error_doc(e)["error"]["type"] == "RemoteException"  # type: ignore[index]
    assert error_doc(e)["error"]["remote_type"] == "ValueError"  # type: ignore[index]
    assert type_name(type(e)) == "RemoteException"
    assert error_line(e) == str(e)


def test_a_remote_failure_met_encoding_a_call_is_not_said_unsendable() -> None:
    """A failed promise inside an argument, its value taken as the call is encoded,
    raises the call's own error there: a TypeError too, when the function raised one,
    which the send paths' ``except TypeError`` took for a value the codec cannot carry
    ("f(...) argument 1: TypeError: ...", an UnsendableError)."""
    e = _remote("TypeError")
    assert named("g", [object()], None, e, False) is e
    assert isinstance(named("g", [object()], None, TypeError("x"), False), UnsendableError)


def test_an_upstream_failure_says_in_json_where_it_was_raised() -> None:
    """A call that failed because the call whose value it was passed failed: --json's
    error named the consumer's replica and interface alone (``reduce_`` on stage2-1), and
    where the error was raised (``load on stage1-1``) only inside the message's text."""
    e = RemoteException("ValueError", "an upstream call failed: bad shard 3", "tb\n",
                        interface="reduce_", replica="stage2-1", origin="load on stage1-1")
    doc = error_doc(e)["error"]
    assert doc["origin"] == "load on stage1-1"  # type: ignore[index]
    assert (doc["interface"], doc["replica"]) == ("reduce_", "stage2-1")  # type: ignore[index]
    assert e.origin == "load on stage1-1"
    assert "origin" not in error_doc(_remote("ValueError"))["error"]  # type: ignore[operator]
