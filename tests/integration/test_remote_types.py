"""A served function's exception of a built-in type is caught by that type at the client.

Ported code catches what a function raises by its type, `except ValueError:`, as Dask
(which raises the original type) and Ray (whose task error is also of the cause's type)
let it. A RemoteException whose remote type is a built-in exception class is an instance
of that class too (``RemoteValueError``: errors.RemoteException, remotetypes.py): where
a promise is used, around a sync call, for a call that failed upstream of a forwarded
value, and for an aggregated call; and it is still the RemoteException it was, its
remote type, message and text unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.errors import RemoteException
from polybus.testing.apps import write_app

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
define.throw = {{}}
define.echo = {{}}

[modules.client]
source = "client.py"
entrypoint = "main"
use.throw = {{ callstyle = "{style}"{extra} }}
use.echo = {{ callstyle = "{style}"{extra} }}
use.echo_sync = {{ callstyle = "sync" }}

[bind]
"client.throw" = "server.throw"
"client.echo" = "server.echo"
"client.echo_sync" = "server.echo"
"""

STYLES = {"sync": ("sync", ""), "async": ("async", ""),
          "aggregated": ("async", ', aggregate = 4, linger = "5ms"')}

# (what the function raises, the classes the program catches it by, its text)
RAISED: list[tuple[str, tuple[Any, ...], tuple[type[BaseException], ...], str]] = [
    ("ValueError", ("bad input",), (ValueError,), "ValueError: bad input"),
    ("KeyError", ("k",), (KeyError, LookupError), "KeyError: 'k'"),
    ("ZeroDivisionError", ("division by zero",), (ZeroDivisionError, ArithmeticError),
     "ZeroDivisionError: division by zero"),
    # OSError(2, ...) is a FileNotFoundError, as Python makes it
    ("OSError", (2, "No such file or directory", "in.txt"), (FileNotFoundError, OSError),
     "FileNotFoundError: [Errno 2] No such file or directory: 'in.txt'"),
]


def _caught(use: Any, by: type[BaseException]) -> BaseException:
    """What ``except by`` catches of ``use()``; fails the test if it catches nothing."""
    try:
        use()
    except by as e:
        return e
    pytest.fail(f"nothing raised for except {by.__name__}")


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize(("kind", "args", "bys", "text"), RAISED,
                         ids=[r[0] for r in RAISED])
def test_a_builtin_exception_is_caught_by_its_type(
        tmp_path: Path, style: str, kind: str, args: tuple[Any, ...],
        bys: tuple[type[BaseException], ...], text: str) -> None:
    with cluster(tmp_path, TOML.format(style=STYLES[style][0], extra=STYLES[style][1])) as c:
        s = c.session()
        for by in bys:
            # a sync call raises at the call; a promise where it is used
            e = _caught(lambda: polybus.wait(s.call("throw", (kind, *args), {})), by)
            assert isinstance(e, RemoteException) and isinstance(e, bys)
            assert e.remote_type == text.partition(":")[0]
            assert str(e).startswith(f"{text} (raised in throw on server-0)\n"
                                     "--- remote traceback ---\n"), str(e)
            assert "raise getattr(builtins, kind)(*args)" in e.remote_traceback
            assert (e.interface, e.replica) == ("throw", "server-0")
        if kind == "OSError":  # (the replica sends no errno: none is made up)
            assert e.args == (str(e),) and (e.errno, e.filename) == (None, None)
        # the promise used as its value, not waited for by name
        if style != "sync":
            p = s.call("throw", (kind, *args), {})
            e = _caught(lambda: p + 1, bys[0])
            assert isinstance(e, RemoteException)
        assert polybus.wait(s.call("echo", ("served on",), {})) == "served on"


@pytest.mark.parametrize("forward", ["true", "false"])
def test_a_call_that_failed_upstream_is_caught_by_the_type_its_producer_raised(
        tmp_path: Path, forward: str) -> None:
    """The consumer of a failed promise fails with its producer's type, said as an
    upstream failure: forwarded (the consumer's replica answers) or waiting at the
    client (forward = false)."""
    toml = TOML.format(style="async", extra=f", forward = {forward}")
    with cluster(tmp_path, toml) as c:
        s = c.session()
        p = s.call("throw", ("KeyError", "k"), {})
        q = s.call("echo", (p,), {})
        e = _caught(lambda: polybus.wait(q), KeyError)
        assert isinstance(e, RemoteException) and e.remote_type == "KeyError"
        assert e.remote_message.startswith("an upstream call failed: 'k'"), e.remote_message
        assert _caught(lambda: polybus.wait(p), KeyError) is not e  # (the producer's own)


def test_wait_over_containers_and_as_completed_let_the_type_through(tmp_path: Path) -> None:
    """polybus.wait of a container and as_completed take promises' values in loops of
    their own, and a sync call passes a promise's value on: the call's KeyError or
    TypeError comes out as it is, never taken for one of theirs (a key missing, a value
    the codec cannot carry)."""
    with cluster(tmp_path, TOML.format(style="async", extra="")) as c:
        s = c.session()
        ok = s.call("echo", (1,), {})
        p = s.call("throw", ("KeyError", "k"), {})
        e = _caught(lambda: polybus.wait({"a": [ok, p], "b": (ok,)}), KeyError)
        assert isinstance(e, RemoteException)
        t = s.call("throw", ("TimeoutError", "the device did not answer"), {})
        done = list(polybus.as_completed([ok, p, t], timeout=30))
        assert len(done) == 3
        assert isinstance(_caught(lambda: polybus.wait(done), LookupError), RemoteException)
        e = _caught(lambda: polybus.wait(t), TimeoutError)  # (the function's own)
        assert isinstance(e, RemoteException) and e.remote_type == "TimeoutError"
        # its value passed on to a call through the client (the consumer is sync)
        bad = s.call("throw", ("TypeError", "not a number"), {})
        e = _caught(lambda: s.call("echo_sync", ([bad],), {}), TypeError)
        assert isinstance(e, RemoteException) and e.remote_type == "TypeError"
        assert polybus.wait(s.call("echo", ("served on",), {})) == "served on"


def test_a_program_run_by_polybus_catches_them_by_type(tmp_path: Path) -> None:
    """Through polybus.run: a sync call, a promise used as its value, and an OSError
    of a file the replica lacks."""
    app = write_app(tmp_path, server="""
        def divide(a, b):
            return a / b

        def read(name):
            with open(name) as f:
                return f.read()
    """, client="""
        from polybus import use, wait

        divide, read, divide_async = use("divide"), use("read"), use("divide_async")

        def main():
            caught = []
            try:
                divide(1, 0)
            except ArithmeticError as e:
                caught.append([type(e).__name__, e.remote_type, e.interface])
            p = divide_async(1, 0)
            try:
                p * 2
            except ZeroDivisionError as e:
                caught.append([type(e).__name__, e.remote_type, e.interface])
            try:
                read("no such file")
            except FileNotFoundError as e:
                caught.append([type(e).__name__, e.errno, str(e).splitlines()[0]])
            return caught
    """, toml="""
        [modules.server]
        source = "server.py"

        [modules.client]
        source = "client.py"
        entrypoint = "main"
        use.divide_async = { callstyle = "async" }

        [bind]
        "client.divide" = "server.divide"
        "client.read" = "server.read"
        "client.divide_async" = "server.divide"
    """)
    r = polybus.run(app, worker_output=False).result
    assert r == [
        ["RemoteZeroDivisionError", "ZeroDivisionError", "divide"],
        ["RemoteZeroDivisionError", "ZeroDivisionError", "divide"],
        ["RemoteFileNotFoundError", None, "FileNotFoundError: [Errno 2] No such file or "
         "directory: 'no such file' (raised in read on server-0)"]]


def test_a_remote_attribute_error_is_never_taken_for_a_missing_attribute(
        tmp_path: Path) -> None:
    """A promise is used by its attributes: Python reads an AttributeError raised by an
    attribute lookup as the attribute's absence (hasattr, getattr's default, isinstance
    through ``__class__``). The call's AttributeError is raised there, never hidden as
    a False or a default: it is a RemoteException alone, not an AttributeError."""
    with cluster(tmp_path, TOML.format(style="async", extra="")) as c:
        s = c.session()
        for use in (lambda p: hasattr(p, "real"), lambda p: getattr(p, "real", None),
                    lambda p: isinstance(p, dict), lambda p: p.real):
            p = s.call("throw", ("AttributeError", "no such thing"), {})
            with pytest.raises(RemoteException) as e:
                use(p)
            assert e.value.remote_type == "AttributeError"
            assert not isinstance(e.value, AttributeError)
        assert polybus.wait(s.call("echo", ("served on",), {})) == "served on"
