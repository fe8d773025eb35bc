"""Failures arrive typed and clear; a failing call does not stop the worker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import polybus
from polybus.errors import ConfigError, NoReplicaError, UsageError
from polybus.testing.apps import write_app

SERVER = """
    import os

    def fail(message):
        raise ValueError(message)

    def echo(x):
        return x

    def pid():
        return os.getpid()
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 1

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.fail = {{ callstyle = "{style}" }}
    use.echo = {{ callstyle = "{style}" }}
    use.pid = {{ callstyle = "sync" }}

    [bind]
    "client.fail" = "server.fail"
    "client.echo" = "server.echo"
    "client.pid" = "server.pid"
"""


@pytest.mark.parametrize("style", ["sync", "async"])
def test_remote_exception_is_typed_and_the_worker_keeps_serving(tmp_path: Path, style: str) -> None:
    app = write_app(tmp_path, server=SERVER, toml=TOML.format(style=style), client="""
        from polybus import use, wait
        from polybus.errors import RemoteException

        fail, echo, pid = use("fail"), use("echo"), use("pid")

        def main():
            before = pid()
            try:
                wait(fail("boom 42"))
            except RemoteException as exc:
                caught = [exc.remote_type, exc.remote_message, exc.remote_traceback]
            else:
                caught = None
            return {"caught": caught, "after": wait(echo("still here")), "same": pid() == before}
    """)
    r = polybus.run(app).result
    remote_type, message, traceback = r["caught"]
    assert remote_type.endswith("ValueError") and message == "boom 42"
    assert "in fail" in traceback and "raise ValueError(message)" in traceback
    assert r["after"] == "still here" and r["same"] is True


EXITING = """
    import os
    import sys

    def leave(code):
        sys.exit(code)

    def interrupt():
        raise KeyboardInterrupt("from the module")

    def echo(x):
        return x

    def pid():
        return os.getpid()
"""


@pytest.mark.parametrize("use", ['{ callstyle = "sync" }', '{ callstyle = "async" }',
                                 '{ callstyle = "async", aggregate = 4 }'],
                         ids=["sync", "async", "aggregated"])
def test_sys_exit_or_keyboardinterrupt_in_a_function_fails_that_call_only(
        tmp_path: Path, use: str) -> None:
    """Not the pool thread's end: with one thread (the default pool) the replica would
    answer nothing more."""
    toml = f"""
        [modules.server]
        source = "server.py"

        [modules.client]
        source = "client.py"
        entrypoint = "main"
        use.leave = {use}
        use.interrupt = {use}
        use.echo = {use}
        use.pid = {{ callstyle = "sync" }}

        [bind]
        "client.leave" = "server.leave"
        "client.interrupt" = "server.interrupt"
        "client.echo" = "server.echo"
        "client.pid" = "server.pid"
    """
    app = write_app(tmp_path, server=EXITING, toml=toml, client="""
        from polybus import use, wait
        from polybus.errors import RemoteException

        leave, interrupt, echo, pid = use("leave"), use("interrupt"), use("echo"), use("pid")

        def caught(call, *args):
            try:
                wait(call(*args))  # (a sync call raises here, an async one at the wait)
            except RemoteException as exc:
                return [exc.remote_type, exc.remote_message]
            return None

        def main():
            before = pid()
            out = [caught(leave, 3), caught(interrupt), wait([echo(i) for i in range(8)])]
            return out + [pid() == before]
    """)
    left, interrupted, echoed, same = polybus.run(app).result
    assert left == ["SystemExit", "3"]
    assert interrupted == ["KeyboardInterrupt", "from the module"]
    assert echoed == list(range(8)) and same is True


OPAQUE = """
    def opaque(x):
        return [x, object()]
"""


def test_a_result_that_cannot_be_sent_names_the_function_not_a_call_number(
        tmp_path: Path) -> None:
    """The message said "the result of call 1 cannot be sent" ("call 0 of the batch"
    when aggregated): a number of the connection's, which the program never sees."""
    toml = """
        [modules.server]
        source = "server.py"

        [modules.client]
        source = "client.py"
        entrypoint = "main"
        use.plain = { callstyle = "sync" }
        use.held = { callstyle = "async", aggregate = 4 }

        [bind]
        "client.plain" = "server.opaque"
        "client.held" = "server.opaque"
    """
    app = write_app(tmp_path, server=OPAQUE, toml=toml, client="""
        from polybus import use, wait
        from polybus.errors import RemoteException

        plain, held = use("plain"), use("held")

        def main():
            out = []
            for f in (plain, held):
                try:
                    wait(f(1))
                except RemoteException as exc:
                    out.append([str(exc), exc.interface, exc.replica, exc.remote_type])
            return out
    """)
    out = polybus.run(app).result
    assert len(out) == 2
    for text, interface, replica, remote_type in out:
        assert (interface, replica, remote_type) == ("opaque", "server-0", "TypeError")
        assert re.search(r"\bcall \d", text) is None, text
        assert "a value of type object cannot be sent" in text, text
        assert text.endswith("(from opaque on server-0)"), text  # (it returned: no "raised")


def test_remote_exception_reaches_the_caller_of_run(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, toml=TOML.format(style="sync"), client="""
        from polybus import use
        fail = use("fail")

        def main():
            return fail("uncaught")
    """)
    with pytest.raises(polybus.errors.RemoteException) as info:  # type: ignore[attr-defined]
        polybus.run(app)
    assert info.value.remote_message == "uncaught"


def test_a_failed_promise_the_entrypoint_returns_says_so(tmp_path: Path) -> None:
    """An async call's promise returned as it is, not waited for in the user's code: no
    line of theirs is on the stack when its error comes, so the message says where the
    value came from instead."""
    app = write_app(tmp_path, server=SERVER, toml=TOML.format(style="async"), client="""
        from polybus import use
        fail = use("fail")

        def main():
            return fail("unforced")
    """)
    with pytest.raises(polybus.errors.RemoteException) as info:  # type: ignore[attr-defined]
        polybus.run(app)
    assert info.value.remote_message == "unforced"
    assert ("the call fail('unforced') whose promise main() returned, waited for when it "
            "returned") in str(info.value)


def test_calling_an_unbound_name_is_a_usage_error(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, toml=TOML.format(style="sync"), client="""
        from polybus import use
        nobody = use("no" + "body")  # built at run time, so the static check misses it

        def main():
            return nobody(1)
    """)
    with pytest.raises(UsageError, match="nobody") as info:
        polybus.run(app)
    # The one-line message said nothing of where; the user's line is named as for a
    # remote error.
    assert info.value.call_site == f"{tmp_path / 'client.py'}:6"
    assert f'the call at File "{tmp_path / "client.py"}", line 6, in main' in str(info.value)


def test_server_module_without_the_bound_interface(tmp_path: Path) -> None:
    app = write_app(tmp_path, server="def other(x):\n    return x\n",
                    toml=TOML.format(style="sync"), client="def main():\n    return 1\n")
    with pytest.raises(ConfigError) as info:
        polybus.run(app)
    text = str(info.value)
    assert "fail" in text and "server" in text


def test_use_outside_a_run() -> None:
    with pytest.raises(UsageError, match="outside a polybus run"):
        polybus.use("f")(1)


def test_no_replica_error_is_a_polybus_error() -> None:
    assert issubclass(NoReplicaError, polybus.errors.PolybusError)  # type: ignore[attr-defined]


@pytest.mark.parametrize("pool", ["1", '"processes:1"'])
def test_remote_traceback_shows_the_users_frames_only(tmp_path: Path, pool: str) -> None:
    # It began with the replica's own frame (worker/runtime.py); under a process pool it
    # showed only concurrent.futures' frames, the user's lost in a cause it left out.
    toml = TOML.format(style="sync").replace(
        'replication = 1', f'replication = 1\ndefine.fail = {{ pool = {pool} }}\n'
        'define.echo = {}\ndefine.pid = {}')
    app = write_app(tmp_path, server=SERVER, toml=toml, client="""
        from polybus import use
        fail = use("fail")

        def main():
            return fail("deep")
    """)
    with pytest.raises(polybus.errors.RemoteException) as info:  # type: ignore[attr-defined]
        polybus.run(app)
    tb = info.value.remote_traceback
    assert tb.startswith(f'  File "{tmp_path / "server.py"}", line 5, in fail\n'), tb
    assert "raise ValueError(message)" in tb and tb.rstrip().endswith("ValueError: deep")
    assert "polybus" not in tb and "concurrent" not in tb, tb


@pytest.mark.parametrize("pool", ["1", '"processes:1"'])
def test_sys_exit_or_keyboardinterrupt_shows_the_users_frame_in_either_pool(
        tmp_path: Path, pool: str) -> None:
    """Under a process pool the child caught only Exception: the two came back with
    concurrent.futures' frames alone, the user's line lost."""
    toml = f"""
        [modules.server]
        source = "server.py"
        define.leave = {{ pool = {pool} }}
        define.interrupt = {{ pool = {pool} }}
        define.echo = {{ pool = {pool} }}

        [modules.client]
        source = "client.py"
        entrypoint = "main"

        [bind]
        "client.leave" = "server.leave"
        "client.interrupt" = "server.interrupt"
        "client.echo" = "server.echo"
    """
    app = write_app(tmp_path, server=EXITING, toml=toml, client="""
        from polybus import use
        from polybus.errors import RemoteException

        leave, interrupt, echo = use("leave"), use("interrupt"), use("echo")

        def main():
            out = []
            for call, args in ((leave, (4,)), (interrupt, ())):
                try:
                    call(*args)
                except RemoteException as exc:
                    out.append([exc.remote_type, exc.remote_message, exc.remote_traceback])
            return out + [echo("after")]
    """)
    left, interrupted, after = polybus.run(app).result
    server = tmp_path / "server.py"
    assert left[:2] == ["SystemExit", "4"]
    assert left[2].startswith(f'  File "{server}", line 6, in leave\n'), left[2]
    assert left[2].rstrip().endswith("SystemExit: 4"), left[2]
    assert interrupted[:2] == ["KeyboardInterrupt", "from the module"]
    assert interrupted[2].startswith(f'  File "{server}", line 9, in interrupt\n'), interrupted[2]
    for _, _, tb in (left, interrupted):
        assert "polybus" not in tb and "concurrent" not in tb, tb
    assert after == "after"
