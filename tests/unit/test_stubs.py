"""What a client module gets from use(): the interface as a function."""

from __future__ import annotations

import copy
import sys

import pytest

from polybus import use
from polybus.errors import UsageError


def test_a_method_style_call_says_how_to_call_the_interface() -> None:
    echo = use("echo")
    with pytest.raises(AttributeError, match=r"call it as echo\(\.\.\.\), not \.echo\(\.\.\.\)"):
        echo.echo  # noqa: B018  (the attribute a new user reaches for)


def test_dunder_lookups_stay_plain_attribute_errors() -> None:
    echo = use("echo")
    assert not hasattr(echo, "__array__")  # numpy and copy probe for these
    assert copy.copy(echo).name == "echo"


def test_use_wants_a_name() -> None:
    with pytest.raises(UsageError, match="interface name"):
        use("")


def test_broadcast_outside_a_run_says_broadcast_not_use() -> None:
    import numpy as np

    import polybus

    with pytest.raises(UsageError, match=r"polybus\.broadcast\(np\.ones\(3\)\) \(test_stubs\.py, line \d+\) was called outside") as e:
        polybus.broadcast(np.ones(3))
    assert "use()d" not in str(e.value)


def test_a_call_while_the_client_module_is_imported_says_so() -> None:
    # (it said "outside a polybus run; start the program with polybus run", to a program
    # started so: runner.py imports the client module before the session is active)
    from polybus.client import stubs

    stubs.importing("client", "main")
    f = use("f")
    try:
        with pytest.raises(UsageError) as e:
            line = sys._getframe().f_lineno + 1
            f(1, [2, 3])
    finally:
        stubs.importing(None)
    # (the call as written and its place, not use('f'): the place beside the call, not
    # after "a function it calls", where the import error adds "at line N")
    assert str(e.value) == (
        f"f(1, [2, 3]) (test_stubs.py, line {line}) was called while the client module "
        "'client' was being imported, before the run's session starts: call it from the "
        "entrypoint, main(), or from a function it calls")
    with pytest.raises(UsageError, match="outside a polybus run"):
        use("f")(1)


def test_a_call_outside_any_run_names_the_call_and_its_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # (it said "a use()d interface was called", naming no interface: a program of several
    # use()d names, run the Ray way outside a run, was left to find which one it was)
    from polybus.client import stubs

    monkeypatch.setattr(stubs, "_ran", [False])
    init = use("init")
    with pytest.raises(UsageError) as e:
        line = sys._getframe().f_lineno + 1
        init(3, 0.05)
    assert str(e.value) == (
        f"init(3, 0.05) (test_stubs.py, line {line}) was called outside a polybus run; "
        "start the program with `polybus run app.toml` or polybus.run()")


def test_a_call_after_a_run_ended_from_the_main_thread_says_to_start_a_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # (in an interactive session, after polybus.run(...) returned, calling the client's
    # main() again by hand was told to "join a thread that makes calls before the
    # entrypoint returns": there was no thread, the call was the main thread's)
    from polybus.client import stubs

    monkeypatch.setattr(stubs, "_ran", [True])
    init = use("init")
    with pytest.raises(UsageError) as e:
        line = sys._getframe().f_lineno + 1
        init(3)
    assert str(e.value) == (
        f"init(3) (test_stubs.py, line {line}) was called outside a polybus run: the run "
        "it was made for has ended, and a run takes calls only while its entrypoint runs; "
        "start a run, polybus.run() or `polybus run app.toml`, which calls the entrypoint")


def test_a_call_after_a_run_ended_from_a_thread_says_to_join_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from polybus.client import stubs

    monkeypatch.setattr(stubs, "_ran", [True])
    init = use("init")
    said: list[str] = []

    def late() -> None:
        try:
            init(3)
        except UsageError as exc:
            said.append(str(exc))

    t = threading.Thread(target=late)
    t.start()
    t.join(30)
    assert said and said[0].startswith("init(3) (test_stubs.py, line "), said
    assert said[0].endswith(
        "was called outside a polybus run: the run's entrypoint returned, and a run takes "
        "calls only while its entrypoint runs (the process may still be waiting for the "
        "program's threads); join a thread that makes calls before the entrypoint returns"), said
