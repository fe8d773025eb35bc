"""A type of the user's module is shown under the module's key, wherever polybus shows
it: the Fail a replica answers, and any traceback it formats."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from polybus.usernames import format_exception, import_name, type_name
from polybus.worker.replies import failure


@pytest.fixture
def server() -> Iterator[ModuleType]:
    """A module imported as polybus imports the module of key ``server``."""
    name = import_name("server")
    module = ModuleType(name)
    exec("class InputError(Exception):\n    pass\n", module.__dict__)
    sys.modules[name] = module
    yield module
    del sys.modules[name]


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_type_name(server: ModuleType) -> None:
    assert type_name(server.InputError) == "server.InputError"
    assert type_name(ValueError) == "ValueError"
    assert type_name(ModuleType) == "module"  # (a builtins type)
    assert type_name(json.JSONDecodeError) == "json.decoder.JSONDecodeError"  # (not theirs)


def test_a_fail_names_the_type_and_its_traceback_does(server: ModuleType) -> None:
    f = failure(7, _raised(server.InputError("custom failure 1")))
    assert (f.type, f.message) == ("server.InputError", "custom failure 1")
    assert f.traceback.endswith("\nserver.InputError: custom failure 1\n"), f.traceback
    f = failure(8, _raised(ValueError("plain")))
    assert f.type == "ValueError" and f.traceback.endswith("\nValueError: plain\n")


def test_chained_and_grouped_exceptions_are_renamed_and_nothing_else(
        server: ModuleType) -> None:
    try:
        try:
            raise server.InputError()  # (no message: the name alone ends its line)
        except Exception as inner:
            raise ExceptionGroup("two", [inner, server.InputError(
                "polybus_user_server.InputError: a message is left as written")]) from None
    except ExceptionGroup as exc:
        text = "".join(format_exception(exc, exc.__traceback__))
    assert "| server.InputError\n" in text, text
    assert ("| server.InputError: polybus_user_server.InputError: a message is left as "
            "written\n") in text, text
    assert text.count("polybus_user_") == 1, text


def test_polybuss_own_error_in_the_users_function_ends_at_the_users_line() -> None:
    """A use()d interface called where no run is (as in a replica, which has no
    session): polybus raises a UsageError inside the user's function. Its traceback ends
    at the user's line that made the call, not in client/stubs.py, and its type is
    named as a replica's other polybus failures name theirs (MessageTooLarge)."""
    from polybus import use

    def served(x: int) -> int:
        ident = use("ident")
        return int(ident(x))  # the user's line

    try:
        served(1)
    except Exception as exc:
        f = failure(3, exc)
    assert f.type == "UsageError", f.type
    assert "polybus/client" not in f.traceback and "stubs.py" not in f.traceback, f.traceback
    lines = f.traceback.splitlines()
    assert "return int(ident(x))  # the user's line" in "\n".join(lines[-4:]), f.traceback
    assert lines[-1].startswith("UsageError: ident(x) (test_usernames.py, line "), lines[-1]
    assert "was called outside a polybus run" in lines[-1], lines[-1]
